"""Projections: catch-up exactly once, concurrent runners, rebuilds, read-your-writes."""

from __future__ import annotations

import threading
from collections import Counter
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.core.exceptions import ImproperlyConfigured

from tests.support.statements import capturing_statements
from tests.testapp.projections import Ledger, OrderCounts
from tilttek_activity import (
    Projection,
    UnknownProjection,
    cancel_activity,
    catch_up,
    entries,
    rebuild,
    record_activities,
    record_activity,
    wait_until_projected,
)
from tilttek_activity.models import Checkpoint
from tilttek_activity.projections import registry

from .conftest import in_thread, statements
from .factories import ActivityFactory

pytestmark = pytest.mark.django_db(transaction=True)

T0 = datetime(2024, 6, 1, tzinfo=UTC)


def checkpoint(name: str) -> int:
    return Checkpoint.objects.get(projection=name).position


def test_catch_up_applies_new_entries_once(ledger: Ledger) -> None:
    made = [r.entry.position for r in record_activities(ActivityFactory.build_batch(7))]
    result = catch_up(Ledger.name)[Ledger.name]
    assert result.applied == 7 and result.position == made[-1] and result.skipped == []
    assert Ledger.store.applied == made
    assert checkpoint(Ledger.name) == made[-1]
    again = catch_up(Ledger.name)[Ledger.name]
    assert again.applied == 0 and Ledger.store.applied == made


def test_small_batches(ledger: Ledger) -> None:
    made = [r.entry.position for r in record_activities(ActivityFactory.build_batch(25))]
    assert catch_up(Ledger.name, batch_size=4)[Ledger.name].applied == 25
    assert Ledger.store.applied == made


def test_verbs_filter_and_cancellations(orders: OrderCounts) -> None:
    placed = record_activity(
        "auth.user:1", "order.placed", quantity=3, occurred_at=T0, idempotency_key="o1"
    )
    record_activity("auth.user:1", "page.viewed", occurred_at=T0)
    record_activity("auth.user:1", "Order.placed", occurred_at=T0)  # another verb
    cancelled = cancel_activity("o1")
    result = catch_up(OrderCounts.name)[OrderCounts.name]
    assert result.applied == 2
    assert result.position == cancelled.entry.position  # passed the entries it does not want
    assert OrderCounts.store.applied == [placed.entry.position, cancelled.entry.position]
    # a cancellation happens when it is cancelled (its own occurred_at) unless told otherwise
    assert OrderCounts.store.counts[("order.placed", T0)] == 3
    assert OrderCounts.store.counts[("order.placed", cancelled.entry.occurred_at)] == -3
    record_activity("auth.user:1", "order.placed", quantity=2, occurred_at=T0, idempotency_key="o2")
    cancel_activity("o2", occurred_at=T0)
    catch_up(OrderCounts.name)
    assert OrderCounts.store.counts[("order.placed", T0)] == 3


def test_one_batch_takes_three_statements(ledger: Ledger) -> None:
    record_activities(ActivityFactory.build_batch(10))
    with capturing_statements() as queries:
        result = catch_up(Ledger.name, batch_size=500)[Ledger.name]
    assert result.applied == 10
    # lock the checkpoint, read the entries, advance the checkpoint (in one transaction)
    assert len(statements(queries)) == 3, queries.captured_queries


def test_a_failing_projection_rolls_the_batch_back(ledger: Ledger) -> None:
    record_activities(ActivityFactory.build_batch(3))
    start = checkpoint(Ledger.name)

    def explode(entries: Any) -> None:
        raise RuntimeError("projection bug")

    Ledger.store.before_batch = explode
    with pytest.raises(RuntimeError):
        catch_up(Ledger.name)
    assert checkpoint(Ledger.name) == start and Ledger.store.applied == []
    Ledger.store.before_batch = None
    assert catch_up(Ledger.name)[Ledger.name].applied == 3


def test_a_projection_without_checkpoint_starts_at_zero(ledger: Ledger) -> None:
    Checkpoint.objects.filter(projection=Ledger.name).delete()
    made = [r.entry.position for r in record_activities(ActivityFactory.build_batch(2))]
    catch_up(Ledger.name)
    assert Ledger.store.applied[-2:] == made
    assert checkpoint(Ledger.name) == made[-1]


def test_two_concurrent_runners_apply_every_entry_exactly_once(ledger: Ledger) -> None:
    made = [r.entry.position for r in record_activities(ActivityFactory.build_batch(300))]
    more_written = threading.Event()
    barrier = threading.Barrier(3)
    extra: list[int] = []

    def runner() -> None:
        barrier.wait()
        for _ in range(3):
            catch_up(Ledger.name, batch_size=7)

    def writer() -> None:
        barrier.wait()
        for _ in range(5):
            extra.extend(
                r.entry.position for r in record_activities(ActivityFactory.build_batch(10))
            )
        more_written.set()

    threads = [in_thread(runner), in_thread(runner), in_thread(writer)]
    for thread, errors in threads:
        thread.join()
        assert not errors, errors
    assert more_written.is_set()
    catch_up(Ledger.name)
    applied = Ledger.store.applied
    assert len(applied) == len(set(applied)), "an entry was applied twice"
    # (the in-memory store lands each batch after its commit, so batches of two runners may
    # land in either order; a table written in the batch transaction would not)
    assert sorted(applied) == sorted(made + extra)


def test_rebuild_of_a_period_equals_a_full_rebuild_while_entries_keep_arriving(
    orders: OrderCounts, vendor: str
) -> None:
    days = [T0 + timedelta(days=n, hours=n) for n in range(5)]

    def batch(count: int, offset: int) -> list[dict[str, Any]]:
        return [
            {
                "member": f"auth.user:{(offset + n) % 3}",
                "verb": ("order.placed", "order.paid")[n % 2],
                "quantity": 1 + n % 4,
                "occurred_at": days[(offset + n) % 5],
                "idempotency_key": f"rebuild:{offset + n}",
            }
            for n in range(count)
        ]

    record_activities(batch(40, 0))
    for key in ("rebuild:3", "rebuild:8"):
        cancel_activity(key)
    catch_up(OrderCounts.name)

    stop = threading.Event()
    wrote_during_reset = threading.Event()
    writes = {"count": 0}

    def writer() -> None:
        offset = 1000
        while not stop.is_set():
            record_activities(batch(3, offset))
            offset += 3
            writes["count"] += 3
            if writes["count"] >= 6:
                wrote_during_reset.set()

    if vendor != "sqlite":
        # Prove the writers are not blocked by a rebuild: wait inside reset() for them.
        OrderCounts.store.on_reset = lambda: wrote_during_reset.wait(timeout=30)
    thread, errors = in_thread(writer)
    try:
        replayed = rebuild(OrderCounts.name, since=days[1], until=days[3])
    finally:
        OrderCounts.store.on_reset = None
        stop.set()
        thread.join()
    assert not errors, errors
    assert replayed > 0
    if vendor != "sqlite":
        assert wrote_during_reset.is_set()
    catch_up(OrderCounts.name)
    after_period_rebuild = dict(OrderCounts.store.counts)

    rebuild(OrderCounts.name)  # a fresh full rebuild
    assert dict(OrderCounts.store.counts) == after_period_rebuild

    # and both equal the journal itself
    expected: Counter[tuple[str, datetime]] = Counter()
    last = checkpoint(OrderCounts.name)
    for entry in entries(verb_prefix="order.", kind=None, limit=10_000):
        assert entry.position <= last
        expected[(entry.verb, entry.occurred_at)] += (
            -entry.quantity if entry.is_cancellation else entry.quantity
        )
    assert after_period_rebuild == dict(expected)


def test_rebuild_needs_reset(ledger: Ledger) -> None:
    with pytest.raises(NotImplementedError):
        rebuild(Ledger.name)


def test_wait_until_projected(ledger: Ledger) -> None:
    position = record_activity(**ActivityFactory()).entry.position
    assert wait_until_projected(Ledger.name, position, timeout=0) is False
    started = threading.Event()

    def runner() -> None:
        started.set()
        catch_up(Ledger.name)

    thread, errors = in_thread(runner)
    started.wait()
    assert wait_until_projected(Ledger.name, position, timeout=30) is True
    thread.join()
    assert not errors


def test_registry() -> None:
    assert Ledger.name in registry.names() and OrderCounts.name in registry.names()
    with pytest.raises(UnknownProjection):
        catch_up("tests.activity.nope")
    with pytest.raises(ImproperlyConfigured):

        class Clash(Projection):
            name = Ledger.name

    class Intermediate(Projection):
        abstract = True

    class TooLong(Intermediate):
        name = "x" * 65
        verbs = "order."  # type: ignore[assignment]

    try:
        # reported by the system checks, never run
        assert TooLong.name not in registry.names() and "" not in registry.names()
        problems = [message for cls, message in registry.problems() if cls is TooLong]
        assert len(problems) == 2
        assert "at most 64" in problems[0] and "tuple" in problems[1]
    finally:
        registry.unregister(TooLong.name)
    assert registry.problems() == []
