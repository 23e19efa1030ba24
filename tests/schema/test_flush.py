"""Django's ``flush`` empties the tables while a lease and a claimed turn are held.

``flush`` is how every ``TransactionTestCase`` (and ``django_db(transaction=True)`` test) of a
project using ``solid_objects`` ends. It deletes the tables in the order of a set, so in no
particular order; on SQLite, with foreign keys enforced, the immediate ``RESTRICT`` references
to ``processes`` made it fail whenever ``processes`` came before the rows naming a process.
These tests hold a real lease and a real claim (the runtime's own ``acquire``), fix the order
Django happens to choose to the one that failed (and its opposite), and get no help from the
suite's fixtures: the flush under test runs inside the test, or is the test case's teardown.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import pytest
from django.core.management import call_command
from django.db import connection
from django.test import TransactionTestCase

from solid_objects.conf import get_settings, table
from solid_objects.lease import acquire
from solid_objects.models import ClaimedMessage, Instance
from solid_objects.runtime import processes
from tests.testapp.actors.core import Counter

from . import sql
from .expected import SCHEMA

OWNERS_FIRST = ("processes", "instances", "claimed_messages")  # what SQLite refused
OWNED_FIRST = ("claimed_messages", "instances", "processes")


def in_order(first: Sequence[str], tables: Callable[..., list[str]]) -> Callable[..., list[str]]:
    """``django_table_names`` listing our ``first`` tables first, in that order (flush
    deletes in the order it is given)."""
    wanted = [table(name) for name in first]

    def ordered(*args: Any, **kwargs: Any) -> list[str]:
        names = tables(*args, **kwargs)
        return [name for name in wanted if name in names] + sorted(set(names) - set(wanted))

    return ordered


def hold_a_lease_and_a_claim() -> str:
    """Enqueue to a Counter and let a registered process lease it and claim the turn."""
    alias = get_settings().DATABASE
    message = Counter.ref("held-during-flush").enqueue().add(1)
    owner = processes.register("worker", alias)
    assert acquire(alias, owner, [message.instance_id]) is not None
    assert Instance.objects.get(pk=message.instance_id).activation_owner_id == owner
    assert ClaimedMessage.objects.get(message_id=message.id).process_id == owner
    return owner


def row_counts() -> dict[str, int]:
    return {name: sql.scalar(f"SELECT COUNT(*) FROM {sql.quote(table(name))}") for name in SCHEMA}


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("first", [OWNERS_FIRST, OWNED_FIRST], ids=["owners", "owned"])
def test_flush_empties_the_tables_while_a_lease_and_a_claim_are_held(
    monkeypatch: pytest.MonkeyPatch, first: Sequence[str]
) -> None:
    hold_a_lease_and_a_claim()
    assert row_counts()["processes"] == 1
    tables = connection.introspection.django_table_names
    monkeypatch.setattr(connection.introspection, "django_table_names", in_order(first, tables))

    call_command("flush", interactive=False, verbosity=0)

    assert row_counts() == dict.fromkeys(SCHEMA, 0)
    if connection.vendor == "sqlite":
        assert sql.scalar("PRAGMA foreign_keys") == 1, "flush ran with the rules enforced"


class LeaseHeldAtTeardown(TransactionTestCase):
    """A user's ``TransactionTestCase`` that ends with a lease and a claim still held: its
    teardown (Django's ``flush``, deleting ``processes`` first) must succeed, or this test is
    reported as an error."""

    @classmethod
    def setUpClass(cls) -> None:
        super().setUpClass()
        introspection = connection.introspection
        introspection.django_table_names = in_order(OWNERS_FIRST, introspection.django_table_names)
        cls.addClassCleanup(delattr, introspection, "django_table_names")

    def test_ends_holding_a_lease_and_a_claim(self) -> None:
        owner = hold_a_lease_and_a_claim()
        assert sql.count("processes", "id", owner) == 1
