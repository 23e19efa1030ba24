"""Reminders: due rows of the ``reminders`` table become ordinary internal messages.

A turn upserts reminders by ``(instance, name)`` in its fenced commit (``self.schedule`` /
``self.unschedule``, see :mod:`solid_objects.commit_writes`). The scheduler, per batch and
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
passes ``now`` (:func:`solid_objects.testing.run_due_reminders`).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

from django.db import DatabaseError, InterfaceError, OperationalError, connections, transaction

from . import payloads, signals
from .conf import get_settings
from .db.dialect import Dialect, as_datetime
from .db.vendors import dialect_for
from .errors import IdempotencyConflict, SolidObjectsError
from .mailbox import enqueue
from .registry import get_spec
from .runtime.roles import Role

logger = logging.getLogger("solid_objects")

#: Messages one recurring ``missed="all"`` reminder may enqueue per pass.
MAX_CATCH_UP = 1000
#: Due reminders handled per transaction.
BATCH_SIZE = 100
#: A reminder whose message cannot be enqueued (mailbox full, unknown actor type or
#: operation) is tried again this many seconds later.
ERROR_DELAY = 30.0

TRANSIENT = (OperationalError, InterfaceError)


@dataclass(slots=True)
class DueReminder:
    id: int
    instance_id: int
    actor_type: str
    actor_id: str
    name: str
    operation: str
    arguments: dict[str, Any]
    next_run_at: datetime
    interval: timedelta | None
    occurrence: int
    missed_policy: str


@dataclass(frozen=True, slots=True)
class Fired:
    """One message a reminder enqueued."""

    reminder_id: int
    actor_type: str
    actor_id: str
    name: str
    occurrence: int
    message_id: int


# -- statements ------------------------------------------------------------------------------
def _clock(dialect: Dialect, now: datetime | None) -> tuple[str, list[Any]]:
    return (dialect.now, []) if now is None else ("%s", [dialect.adapt_datetime(now)])


def _candidates(
    cursor: Any, dialect: Dialect, now: datetime | None, limit: int
) -> list[tuple[int, int]]:
    """Due reminders ``(id, instance_id)``: a non-locking probe on the due index."""
    clock, params = _clock(dialect, now)
    cursor.execute(
        f"SELECT id, instance_id FROM {dialect.t_reminders} WHERE status = 'scheduled' "
        f"AND next_run_at <= {clock} ORDER BY next_run_at, id LIMIT %s",
        [*params, limit],
    )
    return [(int(row[0]), int(row[1])) for row in cursor.fetchall()]


def _lock_instances(cursor: Any, dialect: Dialect, instance_ids: list[int]) -> set[int]:
    """Lock the instance rows that exist and nobody else holds; return their ids."""
    marks = ", ".join(["%s"] * len(instance_ids))
    if dialect.write_lock_first:  # a write first: the database lock, taken up front
        cursor.execute(
            f"UPDATE {dialect.t_instances} SET id = id WHERE id IN ({marks}) RETURNING id",
            instance_ids,
        )
    else:
        cursor.execute(
            f"SELECT id FROM {dialect.t_instances} WHERE id IN ({marks}) "
            f"ORDER BY id{dialect.skip_locked}",
            instance_ids,
        )
    return {int(row[0]) for row in cursor.fetchall()}


def _delete_orphans(cursor: Any, dialect: Dialect, instance_ids: set[int]) -> None:
    """Reminders of instances that no longer exist (only where the database does not
    cascade: constraints stripped, or MySQL non-InnoDB tables)."""
    marks = ", ".join(["%s"] * len(instance_ids))
    if dialect.skip_locked:  # a missing id may just have been locked (and skipped)
        cursor.execute(
            f"SELECT id FROM {dialect.t_instances} WHERE id IN ({marks})", list(instance_ids)
        )
        instance_ids = instance_ids - {int(row[0]) for row in cursor.fetchall()}
        if not instance_ids:
            return
        marks = ", ".join(["%s"] * len(instance_ids))
    cursor.execute(
        f"DELETE FROM {dialect.t_reminders} WHERE instance_id IN ({marks})", list(instance_ids)
    )


def _due_rows(
    cursor: Any, dialect: Dialect, ids: list[int], now: datetime | None
) -> tuple[list[DueReminder], datetime]:
    """The reminders among ``ids`` that are still due, locked, and the clock."""
    arguments = dialect.json_text("arguments")
    clock, params = _clock(dialect, now)
    marks = ", ".join(["%s"] * len(ids))
    cursor.execute(
        f"SELECT id, instance_id, actor_type, actor_id, name, operation, {arguments}, "
        f"next_run_at, interval_seconds, occurrence, missed_policy, {dialect.now} "
        f"FROM {dialect.t_reminders} WHERE id IN ({marks}) AND status = 'scheduled' "
        f"AND next_run_at <= {clock} ORDER BY next_run_at, id{dialect.for_update}",
        [*ids, *params],
    )
    rows = cursor.fetchall()
    reminders = [
        DueReminder(
            id=int(row[0]),
            instance_id=int(row[1]),
            actor_type=row[2],
            actor_id=row[3],
            name=row[4],
            operation=row[5],
            arguments=payloads.decode(row[6]) or {},
            next_run_at=_aware(row[7]),
            interval=_interval(row[8]),
            occurrence=int(row[9]),
            missed_policy=row[10],
        )
        for row in rows
    ]
    if now is None:
        now = _aware(rows[0][11]) if rows else datetime.now(UTC)
    return reminders, now


def _aware(value: Any) -> datetime:
    parsed = as_datetime(value)
    assert parsed is not None
    return parsed


def _interval(value: Any) -> timedelta | None:
    if value is None:
        return None
    return timedelta(microseconds=int(Decimal(str(value)) * 1_000_000))


def _advance(
    cursor: Any,
    dialect: Dialect,
    reminder: DueReminder,
    *,
    occurrence: int,
    next_run_at: datetime,
    status: str,
) -> None:
    cursor.execute(
        f"UPDATE {dialect.t_reminders} SET occurrence = %s, next_run_at = %s, status = %s, "
        f"claimed_by = NULL, claimed_at = NULL, updated_at = {dialect.now} WHERE id = %s",
        [occurrence, dialect.adapt_datetime(next_run_at), status, reminder.id],
    )


# -- firing ----------------------------------------------------------------------------------
def plan(reminder: DueReminder, now: datetime) -> tuple[int, int]:
    """``(messages to enqueue, slots the schedule advances)`` for a due reminder."""
    if reminder.interval is None:
        return 1, 1
    slots = (now - reminder.next_run_at) // reminder.interval + 1
    if reminder.missed_policy == "all":
        count = min(slots, MAX_CATCH_UP)
        return count, count
    return 1, slots


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
        _advance(
            cursor, dialect, reminder, occurrence=occurrence, next_run_at=later, status="scheduled"
        )
    elif reminder.interval is None:
        _advance(
            cursor,
            dialect,
            reminder,
            occurrence=occurrence,
            next_run_at=reminder.next_run_at,
            status="completed",
        )
    else:
        advanced = slots if failure is None else consumed
        _advance(
            cursor,
            dialect,
            reminder,
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
        candidates = _candidates(cursor, dialect, now, limit)
    if not candidates:
        return []
    instance_ids = sorted({instance_id for _, instance_id in candidates})
    fired: list[Fired] = []
    with transaction.atomic(using=alias), connection.cursor() as cursor:
        locked = _lock_instances(cursor, dialect, instance_ids)
        if len(locked) < len(instance_ids):
            _delete_orphans(cursor, dialect, set(instance_ids) - locked)
        ids = [reminder_id for reminder_id, instance_id in candidates if instance_id in locked]
        if ids:
            reminders, clock = _due_rows(cursor, dialect, ids, now)
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

    def run_once(self) -> bool:
        try:
            return bool(fire_due_reminders(self.alias))
        except InterfaceError as exc:  # a dropped connection: back off like other DB errors
            raise DatabaseError(str(exc)) from exc
