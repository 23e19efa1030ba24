"""The journal's awaitable face (§A15): ``arecord_activity``, ``arecord_activities``,
``acancel_activity``, ``aentries`` behave as their synchronous counterparts (validation,
idempotency, errors), on the caller's connection (``thread_sensitive``)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from asgiref.sync import async_to_sync

import tilttek_activity
from tilttek_activity import (
    ActivityNotFound,
    IdempotencyConflict,
    InvalidActivity,
    acancel_activity,
    aentries,
    arecord_activities,
    arecord_activity,
)
from tilttek_activity.models import Entry

pytestmark = pytest.mark.django_db


def run(coroutine_function: Any) -> Any:
    return async_to_sync(coroutine_function)()


def test_record_cancel_and_read_awaited():
    moment = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)

    async def scenario() -> tuple[Any, ...]:
        first = await arecord_activity(
            "user:1", "order.placed", object="order:7", occurred_at=moment, idempotency_key="o7"
        )
        again = await arecord_activity(
            "user:1", "order.placed", object="order:7", occurred_at=moment, idempotency_key="o7"
        )
        bulk = await arecord_activities(
            [
                {"member": "user:2", "verb": "order.placed", "idempotency_key": "b1"},
                {"member": "user:3", "verb": "order.shipped", "idempotency_key": "b2"},
            ]
        )
        cancelled = await acancel_activity("o7")
        feed = await aentries(verb_prefix="order.", kind=None)
        return first, again, bulk, cancelled, feed

    first, again, bulk, cancelled, feed = run(scenario)
    assert (first.created, again.created) == (True, False)
    assert again.entry.position == first.entry.position
    assert [r.created for r in bulk] == [True, True]
    assert cancelled.created and cancelled.entry.kind == "cancelled"
    assert [(e.kind, e.idempotency_key) for e in feed] == [
        ("recorded", "o7"),
        ("recorded", "b1"),
        ("recorded", "b2"),
        ("cancelled", "o7"),
    ]
    # The awaited calls ran in the test's transaction: the rows are visible here.
    assert Entry.objects.count() == 4


def test_errors_are_those_of_the_sync_functions():
    async def invalid() -> None:
        await arecord_activity("no-colon", "verb")

    async def conflict() -> None:
        await arecord_activity("user:1", "a", idempotency_key="k")
        await arecord_activity("user:1", "b", idempotency_key="k")

    async def missing() -> None:
        await acancel_activity("never")

    async def bad_limit() -> None:
        await aentries(limit=0)

    with pytest.raises(InvalidActivity):
        run(invalid)
    with pytest.raises(IdempotencyConflict):
        run(conflict)
    with pytest.raises(ActivityNotFound):
        run(missing)
    with pytest.raises(InvalidActivity):
        run(bad_limit)
    assert Entry.objects.count() == 1


def test_exported_from_the_package():
    assert tilttek_activity.arecord_activity is arecord_activity
    assert arecord_activity.__name__ == "arecord_activity"
    assert {"arecord_activity", "arecord_activities", "acancel_activity", "aentries"} <= set(
        tilttek_activity.__all__
    )
