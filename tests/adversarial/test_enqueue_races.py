"""Enqueue inside the caller's transaction never aborts it (§A4; issue 9, defect 2).

The first messages to a new actor race a creator whose transaction rolls back: on InnoDB the
waiters' duplicate-key checks used to turn into gap locks that deadlocked each other, and
the deadlock rolled back a waiter's whole transaction (the user's own writes with it).
"""

from __future__ import annotations

import threading

import pytest
from django.contrib.auth.models import Group
from django.db import transaction

from solid_objects.models import Instance, Message
from tests.support.waiting import wait_until
from tests.testapp.actors.core import Counter

from ..runtime.helpers import start_thread
from .interleaving import PATIENCE, lock_waiters

pytestmark = pytest.mark.django_db(transaction=True)

WAITERS = 4
ROUNDS = 5


class RolledBack(Exception):
    pass


def wait_for_waiters(count: int, alias: str = "default") -> None:
    """Until ``count`` sessions wait for a lock (PostgreSQL, MariaDB); SQLite serialises the
    writers on its database lock instead, which cannot deadlock."""
    from django.db import connections

    if connections[alias].vendor == "sqlite":
        return
    wait_until(
        lambda: lock_waiters(alias) >= count,
        PATIENCE,
        interval=0.01,
        what=f"{count} sessions to wait for the creator's lock",
    )


@pytest.mark.parametrize("round_", range(ROUNDS))
def test_first_messages_to_a_new_actor_racing_a_creator_that_rolls_back(round_):
    actor_id = f"contended-{round_}"
    created, finish = threading.Event(), threading.Event()

    def creator() -> None:
        try:
            with transaction.atomic():
                Counter.ref(actor_id).enqueue().add(1000)
                created.set()
                assert finish.wait(PATIENCE)
                raise RolledBack
        except RolledBack:
            pass

    def waiter(n: int) -> int:
        assert created.wait(PATIENCE)
        with transaction.atomic():
            Group.objects.create(name=f"own-write-{round_}-{n}")  # the caller's own work
            message = Counter.ref(actor_id).enqueue().add(1)
            Group.objects.create(name=f"own-write-after-{round_}-{n}")
        return message.sequence

    first = start_thread(creator, "creator")
    assert created.wait(PATIENCE)
    waiters = [start_thread(lambda n=n: waiter(n), f"waiter-{n}") for n in range(WAITERS)]
    wait_for_waiters(WAITERS)
    finish.set()
    first.outcome()
    sequences = sorted(w.outcome() for w in waiters)  # no waiter's transaction was aborted

    assert sequences == list(range(1, WAITERS + 1))
    assert Group.objects.filter(name__startswith=f"own-write-{round_}-").count() == WAITERS
    assert Group.objects.filter(name__startswith=f"own-write-after-{round_}-").count() == WAITERS
    instance = Instance.objects.get(actor_id=actor_id)
    assert Message.objects.filter(instance_id=instance.id).count() == WAITERS
