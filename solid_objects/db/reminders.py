"""The reminder scheduler, statement by statement (the protocol: ``reminders.py``).

Where the database has row locks, the instances of due reminders are locked with
``{skip_locked}`` and the reminders re-read ``{for_update}``; SQLite (``write_lock_first``)
takes the database write lock with a no-op ``UPDATE`` of the instances instead. ``{clock}``
is the database clock (``{now}``), or the ``%(now)s`` parameter when a test passes its own.
Each function takes a cursor of the caller's transaction and opens none itself.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

from .. import payloads
from .dialect import Dialect, as_datetime
from .sql import in_list, render

#: Due reminders, oldest first: a non-locking probe on the due index.
DUE_CANDIDATES = (
    "SELECT id, instance_id FROM {t_reminders} WHERE status = 'scheduled' "
    "AND next_run_at <= {clock} ORDER BY next_run_at, id LIMIT %(limit)s"
)

#: Lock the instance rows that exist and nobody else holds (instance first: the order every
#: other writer uses).
LOCK_INSTANCES = "SELECT id FROM {t_instances} WHERE id IN ({ids}) ORDER BY id{skip_locked}"

#: The same where a transaction must write first: the database write lock, taken up front.
LOCK_INSTANCES_BY_WRITING = "UPDATE {t_instances} SET id = id WHERE id IN ({ids}) RETURNING id"

#: Which of some instances exist (a locked row counts: it was skipped, not missing).
EXISTING_INSTANCES = "SELECT id FROM {t_instances} WHERE id IN ({ids})"

#: Reminders of instances that no longer exist (only where the database does not cascade:
#: constraints stripped, or MySQL non-InnoDB tables).
DELETE_OF_INSTANCES = "DELETE FROM {t_reminders} WHERE instance_id IN ({ids})"

#: The reminders among some ids that are still due, locked, with the database clock.
DUE_ROWS = (
    "SELECT id, instance_id, actor_type, actor_id, name, operation, arguments{as_text}, "
    "next_run_at, interval_seconds, occurrence, missed_policy, cron, time_zone, {now} "
    "FROM {t_reminders} WHERE id IN ({ids}) AND status = 'scheduled' "
    "AND next_run_at <= {clock} ORDER BY next_run_at, id{for_update}"
)

#: A fired reminder: its occurrence counter, next run and status (``scheduled`` or
#: ``completed``).
ADVANCE = (
    "UPDATE {t_reminders} SET occurrence = %(occurrence)s, next_run_at = %(next_run_at)s, "
    "status = %(status)s, claimed_by = NULL, claimed_at = NULL, updated_at = {now} "
    "WHERE id = %(id)s"
)


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
    cron: str | None = None
    time_zone: str | None = None


def _clock(dialect: Dialect, now: datetime | None) -> tuple[str, dict[str, Any]]:
    if now is None:
        return dialect.now, {}
    return "%(now)s", {"now": dialect.adapt_datetime(now)}


def due_candidates(
    cursor: Any, dialect: Dialect, now: datetime | None, limit: int
) -> list[tuple[int, int]]:
    """``(id, instance_id)`` of up to ``limit`` due reminders."""
    clock, params = _clock(dialect, now)
    cursor.execute(render(dialect, DUE_CANDIDATES, clock=clock), {**params, "limit": limit})
    return [(int(row[0]), int(row[1])) for row in cursor.fetchall()]


def lock_instances(cursor: Any, dialect: Dialect, instance_ids: Sequence[int]) -> set[int]:
    """Lock the instance rows that exist and nobody else holds; return their ids."""
    marks, params = in_list("id", instance_ids)
    template = LOCK_INSTANCES_BY_WRITING if dialect.write_lock_first else LOCK_INSTANCES
    cursor.execute(render(dialect, template, ids=marks), params)
    return {int(row[0]) for row in cursor.fetchall()}


def delete_orphans(cursor: Any, dialect: Dialect, instance_ids: Collection[int]) -> None:
    """Delete the reminders of those of ``instance_ids`` that do not exist (locking had
    missed them)."""
    missing = set(instance_ids)
    if dialect.skip_locked:  # a missing id may just have been locked (and skipped)
        marks, params = in_list("id", sorted(missing))
        cursor.execute(render(dialect, EXISTING_INSTANCES, ids=marks), params)
        missing -= {int(row[0]) for row in cursor.fetchall()}
        if not missing:
            return
    marks, params = in_list("id", sorted(missing))
    cursor.execute(render(dialect, DELETE_OF_INSTANCES, ids=marks), params)


def due_rows(
    cursor: Any, dialect: Dialect, ids: Sequence[int], now: datetime | None
) -> tuple[list[DueReminder], datetime]:
    """The reminders among ``ids`` that are still due, locked, and the clock (``now``, or
    the database's)."""
    clock, params = _clock(dialect, now)
    marks, id_params = in_list("id", ids)
    sql = render(dialect, DUE_ROWS, ids=marks, clock=clock)
    cursor.execute(sql, {**id_params, **params})
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
            cron=row[11],
            time_zone=row[12],
        )
        for row in rows
    ]
    if now is None:
        now = _aware(rows[0][13]) if rows else datetime.now(UTC)
    return reminders, now


def advance(
    cursor: Any,
    dialect: Dialect,
    reminder_id: int,
    *,
    occurrence: int,
    next_run_at: datetime,
    status: str,
) -> None:
    cursor.execute(
        render(dialect, ADVANCE),
        {
            "id": reminder_id,
            "occurrence": occurrence,
            "next_run_at": dialect.adapt_datetime(next_run_at),
            "status": status,
        },
    )


def _aware(value: Any) -> datetime:
    parsed = as_datetime(value)
    assert parsed is not None
    return parsed


def _interval(value: Any) -> timedelta | None:
    if value is None:
        return None
    return timedelta(microseconds=int(Decimal(str(value)) * 1_000_000))
