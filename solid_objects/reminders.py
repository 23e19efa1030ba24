"""Reminders: due rows of the ``reminders`` table become ordinary internal messages.

A turn upserts reminders by ``(instance, name)`` in its fenced commit (``self.schedule`` /
``self.unschedule``, see :mod:`solid_objects.fencing`). The scheduler, per batch and
in ONE transaction:

1. locks the instance rows of due reminders (``SKIP LOCKED``; instance first, the order every
   other writer uses), so a destroyed actor is never recreated: only a reminder whose
   instance row still exists, with that id, is fired;
2. re-reads the due reminders under lock and enqueues one ``internal`` message per
   occurrence, keyed ``reminder:<id>:<occurrence>`` (so a fire is idempotent);
3. completes a one-shot reminder, or advances a recurring one: ``missed="latest"`` coalesces
   every missed slot into one message and moves to the next future slot;
   ``missed="all"`` enqueues one message per missed slot, at most :data:`MAX_CATCH_UP` per
   pass (the rest follow in the next passes).

Time is the database clock, read in the same statement that reads the rows, unless a test
passes ``now`` (:func:`solid_objects.testing.run_due_reminders`). The statements are in
:mod:`solid_objects.db.reminders`.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.db import DatabaseError, InterfaceError, OperationalError, connections, transaction

from . import cron, signals
from .conf import get_settings
from .db import reminders as queries
from .db.dialect import Dialect
from .db.reminders import DueReminder
from .db.vendors import dialect_for
from .errors import IdempotencyConflict, SolidObjectsError
from .mailbox import enqueue
from .registry import get_spec
from .runtime.roles import Role
from .schedules import sync_schedules

logger = logging.getLogger("solid_objects")

#: Messages one recurring ``missed="all"`` reminder may enqueue per pass.
MAX_CATCH_UP = 1000
#: Due reminders handled per transaction.
BATCH_SIZE = 100
#: A reminder whose message cannot be enqueued (mailbox full, unknown actor type or
#: operation) is tried again this many seconds later.
ERROR_DELAY = 30.0

TRANSIENT = (OperationalError, InterfaceError)


@dataclass(frozen=True, slots=True)
class Fired:
    """One message a reminder enqueued."""

    reminder_id: int
    actor_type: str
    actor_id: str
    name: str
    occurrence: int
    message_id: int


# -- firing ----------------------------------------------------------------------------------
def plan(reminder: DueReminder, now: datetime) -> tuple[int, int]:
    """``(messages to enqueue, slots the schedule advances)`` for a due reminder."""
    if reminder.cron is not None:
        if reminder.missed_policy == "all":
            count = cron.due_slots(
                reminder.cron, _zone(reminder), reminder.next_run_at, now, MAX_CATCH_UP
            )
            return count, count
        return 1, 0  # "latest": the next run is the first slot after now (_next_run)
    if reminder.interval is None:
        return 1, 1
    slots = (now - reminder.next_run_at) // reminder.interval + 1
    if reminder.missed_policy == "all":
        count = min(slots, MAX_CATCH_UP)
        return count, count
    return 1, slots


def _zone(reminder: DueReminder) -> str:
    return reminder.time_zone or "UTC"


def _next_cron_run(
    reminder: DueReminder, now: datetime, slots: int, consumed: int, complete: bool
) -> datetime:
    """The next run of a fired cron reminder: the first slot after ``now`` (``latest``), or
    the slot after the last one enqueued (``all``)."""
    assert reminder.cron is not None
    advanced = slots if complete else consumed
    if advanced == 0:  # "latest": every missed slot coalesced into the one message
        return cron.next_after(reminder.cron, _zone(reminder), now)
    return cron.following(reminder.cron, _zone(reminder), reminder.next_run_at, advanced)[-1]


def _fire(
    cursor: Any, dialect: Dialect, alias: str, reminder: DueReminder, now: datetime
) -> list[Fired]:
    count, slots = plan(reminder, now)
    fired: list[Fired] = []
    failure: Exception | None = None
    consumed = 0  # occurrences enqueued (or found already enqueued)
    try:
        spec = get_spec(reminder.actor_type)
        while consumed < count:
            occurrence = reminder.occurrence + consumed + 1
            try:
                message = enqueue(
                    spec,
                    reminder.actor_id,
                    reminder.operation,
                    reminder.arguments,
                    delivery_mode="internal",
                    idempotency_key=f"reminder:{reminder.id}:{occurrence}",
                    using=alias,
                )
            except IdempotencyConflict:
                consumed += 1  # that occurrence's key is taken: it was delivered another way
                continue
            consumed += 1
            fired.append(
                Fired(
                    reminder.id,
                    reminder.actor_type,
                    reminder.actor_id,
                    reminder.name,
                    occurrence,
                    message.message_id,
                )
            )
    except TRANSIENT:
        raise
    except (SolidObjectsError, DatabaseError) as exc:
        failure = exc
    occurrence = reminder.occurrence + consumed
    if failure is not None and consumed == 0:
        logger.error(
            "reminder %s of %s/%s could not be enqueued, retrying in %ss: %s",
            reminder.name,
            reminder.actor_type,
            reminder.actor_id,
            ERROR_DELAY,
            failure,
        )
        later = now + timedelta(seconds=ERROR_DELAY)
        queries.advance(
            cursor,
            dialect,
            reminder.id,
            occurrence=occurrence,
            next_run_at=later,
            status="scheduled",
        )
    elif reminder.cron is not None:
        queries.advance(
            cursor,
            dialect,
            reminder.id,
            occurrence=occurrence,
            next_run_at=_next_cron_run(reminder, now, slots, consumed, failure is None),
            status="scheduled",
        )
    elif reminder.interval is None:
        queries.advance(
            cursor,
            dialect,
            reminder.id,
            occurrence=occurrence,
            next_run_at=reminder.next_run_at,
            status="completed",
        )
    else:
        advanced = slots if failure is None else consumed
        queries.advance(
            cursor,
            dialect,
            reminder.id,
            occurrence=occurrence,
            next_run_at=reminder.next_run_at + advanced * reminder.interval,
            status="scheduled",
        )
    return fired


def fire_due_reminders(
    using: str | None = None, *, now: datetime | None = None, limit: int = BATCH_SIZE
) -> list[Fired]:
    """One pass over up to ``limit`` due reminders; returns the messages enqueued.

    ``now`` replaces the database clock when deciding what is due (the test clock).
    """
    alias = using or get_settings().DATABASE
    connection = connections[alias]
    dialect = dialect_for(connection)
    with connection.cursor() as cursor:
        candidates = queries.due_candidates(cursor, dialect, now, limit)
    if not candidates:
        return []
    instance_ids = sorted({instance_id for _, instance_id in candidates})
    fired: list[Fired] = []
    with transaction.atomic(using=alias), connection.cursor() as cursor:
        locked = queries.lock_instances(cursor, dialect, instance_ids)
        if len(locked) < len(instance_ids):
            queries.delete_orphans(cursor, dialect, set(instance_ids) - locked)
        ids = [reminder_id for reminder_id, instance_id in candidates if instance_id in locked]
        if ids:
            reminders, clock = queries.due_rows(cursor, dialect, ids, now)
            for reminder in reminders:
                fired.extend(_fire(cursor, dialect, alias, reminder, clock))
    for item in fired:
        signals.send(
            signals.reminder_fired,
            actor_type=item.actor_type,
            actor_id=item.actor_id,
            reminder_id=item.reminder_id,
            name=item.name,
            occurrence=item.occurrence,
            message_id=item.message_id,
        )
    return fired


class ReminderRole(Role):
    """Turns due reminders into mailbox messages."""

    name = "reminders"
    kind = "reminder"
    doorbell_kind = "reminder"

    armed = False

    def run_once(self) -> bool:
        # A database error (a dropped connection included) backs the role's loop off.
        if not self.armed:  # the settings' schedules, once per scheduler start
            try:
                sync_schedules()
            except TRANSIENT:
                raise  # the loop backs off and this pass is tried again
            except (SolidObjectsError, DatabaseError) as exc:  # the checks report it too
                logger.error("the schedules of SOLID_OBJECTS['SCHEDULES'] were not armed: %s", exc)
            self.armed = True
        return bool(fire_due_reminders(self.alias))
