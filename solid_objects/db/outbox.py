"""Every statement of the effect outbox protocol, in one place (used by ``outbox/effects.py``).

A claim moves due ``pending`` rows to ``processing`` (skipping rows another worker has
locked), counts the attempt and is committed before the handler runs. The outcome is
written with a *claim fence*: only while the row is still ``processing`` under this
process and this attempt, so a worker that was presumed dead (its effects handed back to
``pending`` and perhaps run again elsewhere) can never record a second outcome or enqueue a
second callback. Every function takes an open cursor of the caller's transaction.

The statements are named templates (see :mod:`solid_objects.db.sql`): braces name the
dialect's tables and fragments, ``%(name)s`` the parameters.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from .. import payloads
from .sql import in_list, render

if TYPE_CHECKING:
    from .cursor import Cursor
    from .dialect import Dialect

#: The effect that carries a message from one actor to another (``self.send``): the
#: effect worker enqueues it once per key.
ACTOR_MESSAGE = "__actor_message__"
#: The effect that carries a journal entry of a turn whose actor is not on the journal's
#: database (``self.record_activity``): written once per key by the effect worker.
RECORD_ACTIVITY = "__record_activity__"


@dataclass(slots=True)
class EffectRow:
    """A claimed effect with the identity of the actor that emitted it."""

    id: int
    effect_id: str
    name: str
    arguments: dict[str, Any]
    success_operation: str | None
    failure_operation: str | None
    attempt: int  # this attempt (counted by the claim)
    max_attempts: int
    instance_id: int
    message_id: int
    actor_type: str
    actor_id: str


#: The columns of an :class:`EffectRow`, effect ``e`` joined to its instance ``i``.
_COLUMNS = (
    "e.id, e.effect_id, e.name, e.arguments{as_text}, e.success_operation, "
    "e.failure_operation, e.attempt_count, e.max_attempts, e.instance_id, e.message_id, "
    "i.actor_type, i.actor_id"
)

#: The idle poll: is any pending effect due? One indexed, non-locking read.
ANY_DUE = "SELECT 1 FROM {t_effects} WHERE status = 'pending' AND available_at <= {now} LIMIT 1"

#: Due pending effects, oldest first, locked (skipping rows another claim holds).
DUE_CANDIDATES = (
    "SELECT id FROM {t_effects} WHERE status = 'pending' AND available_at <= {now} "
    "ORDER BY available_at, id LIMIT %(limit)s{skip_locked}"
)

#: PostgreSQL: the claim in one statement, rows returned joined to their instance.
CLAIM_RETURNING = (
    "UPDATE {t_effects} e SET status = 'processing', claimed_by = %(process_id)s, "
    "claimed_at = {now}, attempt_count = e.attempt_count + 1, updated_at = {now} "
    "FROM {t_instances} i WHERE i.id = e.instance_id AND e.id IN (" + DUE_CANDIDATES + ") "
    "RETURNING " + _COLUMNS
)

#: SQLite: the claim as the transaction's first statement (it takes the write lock there),
#: returning the ids claimed.
CLAIM_IDS_RETURNING = (
    "UPDATE {t_effects} SET status = 'processing', claimed_by = %(process_id)s, "
    "claimed_at = {now}, attempt_count = attempt_count + 1, updated_at = {now} "
    "WHERE id IN (" + DUE_CANDIDATES + ") RETURNING id"
)

#: MySQL/MariaDB: the locked candidates (:data:`DUE_CANDIDATES`) moved to ``processing``.
MARK_PROCESSING = (
    "UPDATE {t_effects} SET status = 'processing', claimed_by = %(process_id)s, "
    "claimed_at = {now}, attempt_count = attempt_count + 1, updated_at = {now} "
    "WHERE id IN ({ids})"
)

#: The claimed rows, read joined to their instance.
CLAIMED_ROWS = (
    "SELECT " + _COLUMNS + " FROM {t_effects} e JOIN {t_instances} i ON i.id = e.instance_id "
    "WHERE e.id IN ({ids}) ORDER BY e.id"
)

#: The claim fence: the row is still this process's claim of this attempt.
_FENCE = (
    "id = %(effect_row_id)s AND status = 'processing' AND claimed_by = %(process_id)s "
    "AND attempt_count = %(attempt)s"
)

#: Back to ``pending`` at a given time without counting the attempt (a rate limit's slot).
DEFER = (
    "UPDATE {t_effects} SET status = 'pending', claimed_by = NULL, claimed_at = NULL, "
    "attempt_count = attempt_count - 1, available_at = %(available_at)s, updated_at = {now} "
    "WHERE " + _FENCE
)

#: The final outcome of a success or a handled failure (``completed_at`` set).
FINISH_COMPLETED = (
    "UPDATE {t_effects} SET status = %(status)s, result = %(result)s{json_cast}, "
    "error = %(error)s{json_cast}, completed_at = {now}, updated_at = {now} WHERE " + _FENCE
)

#: The final outcome of a dead effect (no ``completed_at``).
FINISH_DEAD = (
    "UPDATE {t_effects} SET status = %(status)s, result = %(result)s{json_cast}, "
    "error = %(error)s{json_cast}, completed_at = NULL, updated_at = {now} WHERE " + _FENCE
)

#: An error stored on an effect whose outcome is already recorded (a failed callback).
NOTE_ERROR = (
    "UPDATE {t_effects} SET error = %(error)s{json_cast}, updated_at = {now} "
    "WHERE id = %(effect_row_id)s"
)

#: Back to ``pending`` after a retry delay, keeping the error of this attempt.
RESCHEDULE = (
    "UPDATE {t_effects} SET status = 'pending', available_at = {later:retry_in}, "
    "error = %(error)s{json_cast}, claimed_by = NULL, claimed_at = NULL, updated_at = {now} "
    "WHERE " + _FENCE
)

#: SQLite: lock the emitting instance by taking the database write lock with a no-op write.
LOCK_INSTANCE_BY_WRITE = "UPDATE {t_instances} SET id = id WHERE id = %(instance_id)s"

#: Lock the emitting instance row, waiting for its lock.
LOCK_INSTANCE = "SELECT id FROM {t_instances} WHERE id = %(instance_id)s{for_update}"


def _row(row: Any) -> EffectRow:
    arguments = payloads.decode(row[3])
    return EffectRow(
        id=int(row[0]),
        effect_id=row[1],
        name=row[2],
        arguments=arguments if isinstance(arguments, dict) else {},
        success_operation=row[4],
        failure_operation=row[5],
        attempt=int(row[6]),
        max_attempts=int(row[7]),
        instance_id=int(row[8]),
        message_id=int(row[9]),
        actor_type=row[10],
        actor_id=row[11],
    )


def any_due(cursor: Cursor, dialect: Dialect) -> bool:
    """A non-locking probe (outside any transaction): is there a due pending effect?"""
    cursor.execute(render(dialect, ANY_DUE), {})
    return cursor.fetchone() is not None


def claim(cursor: Cursor, dialect: Dialect, process_id: str, limit: int) -> list[EffectRow]:
    """Move up to ``limit`` due pending effects to ``processing`` for ``process_id``."""
    params: dict[str, Any] = {"process_id": process_id, "limit": limit}
    if dialect.update_from_returning:
        cursor.execute(render(dialect, CLAIM_RETURNING), params)
        return sorted((_row(row) for row in cursor.fetchall()), key=lambda r: r.id)
    if dialect.write_lock_first:
        # Start the transaction with a write: SQLite takes its write lock there, never
        # upgrading a read lock (which could fail at once instead of waiting).
        cursor.execute(render(dialect, CLAIM_IDS_RETURNING), params)
        ids = [int(row[0]) for row in cursor.fetchall()]
    else:
        cursor.execute(render(dialect, DUE_CANDIDATES), {"limit": limit})
        ids = [int(row[0]) for row in cursor.fetchall()]
        if ids:
            marks, id_params = in_list("id", ids)
            cursor.execute(
                render(dialect, MARK_PROCESSING, ids=marks),
                {**id_params, "process_id": process_id},
            )
    if not ids:
        return []
    marks, id_params = in_list("id", ids)
    cursor.execute(render(dialect, CLAIMED_ROWS, ids=marks), id_params)
    return [_row(row) for row in cursor.fetchall()]


def _fence(row: EffectRow, process_id: str) -> dict[str, Any]:
    return {"effect_row_id": row.id, "process_id": process_id, "attempt": row.attempt}


def defer(
    cursor: Cursor, dialect: Dialect, row: EffectRow, process_id: str, available_at: datetime
) -> bool:
    """Hand a claimed effect back, due at ``available_at``, without counting an attempt
    (its rate limit has no slot before then). ``False``: the claim is gone."""
    params = {**_fence(row, process_id), "available_at": dialect.adapt_datetime(available_at)}
    cursor.execute(render(dialect, DEFER), params)
    return bool(cursor.rowcount == 1)


def finish(
    cursor: Cursor,
    dialect: Dialect,
    row: EffectRow,
    process_id: str,
    *,
    status: str,
    result: str | None = None,
    error: str | None = None,
) -> bool:
    """Record the final outcome (``completed``, ``handled`` or ``dead``). ``False``: the
    claim is gone."""
    statement = FINISH_COMPLETED if status in ("completed", "handled") else FINISH_DEAD
    params = {**_fence(row, process_id), "status": status, "result": result, "error": error}
    cursor.execute(render(dialect, statement), params)
    return cursor.rowcount == 1


def note_error(cursor: Cursor, dialect: Dialect, effect_row_id: int, error: str) -> None:
    """Store an error on an effect whose outcome is already recorded (a failed callback)."""
    cursor.execute(render(dialect, NOTE_ERROR), {"error": error, "effect_row_id": effect_row_id})


def reschedule(
    cursor: Cursor, dialect: Dialect, row: EffectRow, process_id: str, *, error: str, delay: float
) -> bool:
    """Back to ``pending`` after ``delay`` seconds, keeping the error of this attempt."""
    params = {**_fence(row, process_id), "error": error, "retry_in": dialect.interval(delay)}
    cursor.execute(render(dialect, RESCHEDULE), params)
    return cursor.rowcount == 1


def lock_instance(cursor: Cursor, dialect: Dialect, instance_id: int) -> bool:
    """Lock the emitting instance row (by id: this incarnation only); ``False`` if gone.

    Taken before the effect row, in the order every other writer uses (instance first). On
    SQLite a no-op ``UPDATE`` takes the database write lock up front instead.
    """
    if dialect.write_lock_first:
        cursor.execute(render(dialect, LOCK_INSTANCE_BY_WRITE), {"instance_id": instance_id})
        return cursor.rowcount == 1
    cursor.execute(render(dialect, LOCK_INSTANCE), {"instance_id": instance_id})
    return cursor.fetchone() is not None
