"""A call the database picks as a deadlock victim is run again (issue 9: the library's own
transactions never surface a raw deadlock; a caller's transaction is never retried)."""

from __future__ import annotations

import threading

import pytest
from django.db import OperationalError, connection, transaction

from solid_objects.db.connections import recovering
from solid_objects.models import Instance
from tests.testapp.actors.core import Counter

from .helpers import alias, start_thread

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.db_vendor("postgresql", "mysql")]


def lock_both(first: int, second: int, barrier: threading.Barrier, tries: list[int]):
    """A unit of work that locks two instance rows in the given order; on its first try it
    waits for its rival to hold the other row, so the two deadlock."""

    def work(attempt) -> str:
        tries.append(first)
        with transaction.atomic(), connection.cursor() as cursor:
            table = connection.ops.quote_name(Instance._meta.db_table)
            cursor.execute(f"UPDATE {table} SET updated_at = updated_at WHERE id = %s", [first])
            if tries.count(first) == 1:
                barrier.wait(timeout=30)
            cursor.execute(f"UPDATE {table} SET updated_at = updated_at WHERE id = %s", [second])
        return "done"

    return work


def two_actors() -> tuple[int, int]:
    a = Counter.ref("deadlock-a").enqueue().add(1).instance_id
    b = Counter.ref("deadlock-b").enqueue().add(1).instance_id
    return a, b


def test_a_deadlock_victim_among_the_library_s_calls_is_run_again():
    a, b = two_actors()
    barrier, tries = threading.Barrier(2), []
    one = start_thread(lambda: recovering(alias(), "one", lock_both(a, b, barrier, tries)), "one")
    two = start_thread(lambda: recovering(alias(), "two", lock_both(b, a, barrier, tries)), "two")
    assert (one.outcome(), two.outcome()) == ("done", "done")
    assert len(tries) == 3  # the victim ran twice, the winner once


def test_inside_the_caller_s_transaction_a_deadlock_is_the_caller_s():
    a, b = two_actors()
    barrier, tries = threading.Barrier(2), []

    def in_callers_transaction(first: int, second: int):
        def call() -> str:
            with transaction.atomic():
                return recovering(alias(), "call", lock_both(first, second, barrier, tries))

        return call

    one = start_thread(in_callers_transaction(a, b), "one")
    two = start_thread(in_callers_transaction(b, a), "two")
    errors = []
    for thread in (one, two):
        try:
            thread.outcome()
        except OperationalError as exc:
            errors.append(exc)
    assert len(errors) == 1 and len(tries) == 2  # never run again inside atomic()
