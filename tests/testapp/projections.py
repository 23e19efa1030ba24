"""Projections used by tests/activity (names start with ``tests.activity.``).

Their read models live in memory but behave like tables written in the catch-up
transaction: a change is staged with ``transaction.on_commit`` and lands only if the
transaction that applied it commits, so a rolled-back batch leaves no trace and tests can
assert "exactly once" on what landed. Tests using them need committed transactions
(``django_db(transaction=True)``).
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable, Sequence
from datetime import datetime

from django.db import transaction

from tilttek_activity import ActivityEntry, Projection


class CommittedStore:
    """State that changes only when the applying transaction commits."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.applied: list[int] = []
        self.counts: Counter[tuple[str, datetime]] = Counter()
        #: Called (inside the applying transaction) before each batch; tests hook here.
        self.before_batch: Callable[[Sequence[ActivityEntry]], None] | None = None
        self.on_reset: Callable[[], None] | None = None

    def clear(self) -> None:
        with self.lock:
            self.applied.clear()
            self.counts.clear()
        self.before_batch = None
        self.on_reset = None

    def stage(self, change: Callable[[], None]) -> None:
        def land() -> None:
            with self.lock:
                change()

        transaction.on_commit(land)


class Ledger(Projection):
    """Remembers every position applied (all verbs)."""

    name = "tests.activity.ledger"
    store = CommittedStore()

    def apply_batch(self, entries: Sequence[ActivityEntry]) -> None:
        if self.store.before_batch is not None:
            self.store.before_batch(entries)
        positions = [entry.position for entry in entries]
        self.store.stage(lambda: self.store.applied.extend(positions))

    def reset(self, since: datetime | None = None, until: datetime | None = None) -> None:
        raise NotImplementedError("the ledger is append-only")


class OrderCounts(Projection):
    """Quantity per (verb, occurred_at) for ``order.`` verbs; cancellations subtract."""

    name = "tests.activity.orders"
    verbs = ("order.",)
    store = CommittedStore()

    def apply(self, entry: ActivityEntry) -> None:
        key = (entry.verb, entry.occurred_at)
        delta = -entry.quantity if entry.is_cancellation else entry.quantity
        applied = entry.position

        def change() -> None:
            self.store.counts[key] += delta
            self.store.applied.append(applied)

        self.store.stage(change)

    def reset(self, since: datetime | None = None, until: datetime | None = None) -> None:
        if self.store.on_reset is not None:
            self.store.on_reset()

        def forget() -> None:
            for key in list(self.store.counts):
                moment = key[1]
                if (since is None or moment >= since) and (until is None or moment < until):
                    del self.store.counts[key]

        self.store.stage(forget)
