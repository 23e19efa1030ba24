"""Every statement of the effect outbox protocol, in one place (used by ``outbox/effects.py``).

A claim moves due ``pending`` rows to ``processing`` (skipping rows another worker has
locked), counts the attempt and is committed before the handler runs. The outcome is
written with a *claim fence*: only while the row is still ``processing`` under this
process and this attempt, so a worker that was presumed dead (its effects handed back to
``pending`` and perhaps run again elsewhere) can never record a second outcome or enqueue a
second callback. Every function takes an open cursor of the caller's transaction.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from .. import payloads

if TYPE_CHECKING:
    from .cursor import Cursor
    from .dialect import Dialect

ACTOR_MESSAGE = "__actor_message__"


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


def _columns(dialect: Dialect) -> str:
    arguments = dialect.json_text("e.arguments")
    return (
        f"e.id, e.effect_id, e.name, {arguments}, e.success_operation, e.failure_operation, "
        "e.attempt_count, e.max_attempts, e.instance_id, e.message_id, i.actor_type, i.actor_id"
    )


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


_DUE = "status = 'pending' AND available_at <= {now}"


def any_due(cursor: Cursor, dialect: Dialect) -> bool:
    """A non-locking probe (outside any transaction): is there a due pending effect?"""
    cursor.execute(
        f"SELECT 1 FROM {dialect.t_effects} WHERE {_DUE.format(now=dialect.now)} LIMIT 1", []
    )
    return cursor.fetchone() is not None


def claim(cursor: Cursor, dialect: Dialect, process_id: str, limit: int) -> list[EffectRow]:
    """Move up to ``limit`` due pending effects to ``processing`` for ``process_id``."""
    n = dialect.now
    due = (
        f"SELECT id FROM {dialect.t_effects} WHERE {_DUE.format(now=n)} "
        f"ORDER BY available_at, id LIMIT %s{dialect.skip_locked}"
    )
    sets = (
        f"status = 'processing', claimed_by = %s, claimed_at = {n}, "
        f"attempt_count = e.attempt_count + 1, updated_at = {n}"
    )
    if dialect.update_from_returning:
        cursor.execute(
            f"UPDATE {dialect.t_effects} e SET {sets} FROM {dialect.t_instances} i "
            f"WHERE i.id = e.instance_id AND e.id IN ({due}) RETURNING {_columns(dialect)}",
            [process_id, limit],
        )
        return sorted((_row(row) for row in cursor.fetchall()), key=lambda r: r.id)
    sets = sets.replace("e.attempt_count", "attempt_count")
    if dialect.write_lock_first:
        # Start the transaction with a write: SQLite takes its write lock there, never
        # upgrading a read lock (which could fail at once instead of waiting).
        cursor.execute(
            f"UPDATE {dialect.t_effects} SET {sets} WHERE id IN ({due}) RETURNING id",
            [process_id, limit],
        )
        ids = [int(row[0]) for row in cursor.fetchall()]
    else:
        cursor.execute(due, [limit])
        ids = [int(row[0]) for row in cursor.fetchall()]
        if ids:
            marks = ", ".join(["%s"] * len(ids))
            cursor.execute(
                f"UPDATE {dialect.t_effects} SET {sets} WHERE id IN ({marks})", [process_id, *ids]
            )
    if not ids:
        return []
    marks = ", ".join(["%s"] * len(ids))
    cursor.execute(
        f"SELECT {_columns(dialect)} FROM {dialect.t_effects} e "
        f"JOIN {dialect.t_instances} i ON i.id = e.instance_id WHERE e.id IN ({marks}) "
        "ORDER BY e.id",
        ids,
    )
    return [_row(row) for row in cursor.fetchall()]


_FENCE = "id = %s AND status = 'processing' AND claimed_by = %s AND attempt_count = %s"


def _fence_params(row: EffectRow, process_id: str) -> list[Any]:
    return [row.id, process_id, row.attempt]


def defer(
    cursor: Cursor, dialect: Dialect, row: EffectRow, process_id: str, available_at: datetime
) -> bool:
    """Hand a claimed effect back, due at ``available_at``, without counting an attempt
    (its rate limit has no slot before then). ``False``: the claim is gone."""
    n = dialect.now
    cursor.execute(
        f"UPDATE {dialect.t_effects} SET status = 'pending', claimed_by = NULL, "
        f"claimed_at = NULL, attempt_count = attempt_count - 1, available_at = %s, "
        f"updated_at = {n} WHERE {_FENCE}",
        [dialect.adapt_datetime(available_at), *_fence_params(row, process_id)],
    )
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
    n = dialect.now
    completed_at = n if status in ("completed", "handled") else "NULL"
    cursor.execute(
        f"UPDATE {dialect.t_effects} SET status = %s, result = {dialect.json}, "
        f"error = {dialect.json}, completed_at = {completed_at}, updated_at = {n} "
        f"WHERE {_FENCE}",
        [status, result, error, *_fence_params(row, process_id)],
    )
    return cursor.rowcount == 1


def note_error(cursor: Cursor, dialect: Dialect, effect_row_id: int, error: str) -> None:
    """Store an error on an effect whose outcome is already recorded (a failed callback)."""
    cursor.execute(
        f"UPDATE {dialect.t_effects} SET error = {dialect.json}, updated_at = {dialect.now} "
        "WHERE id = %s",
        [error, effect_row_id],
    )


def reschedule(
    cursor: Cursor, dialect: Dialect, row: EffectRow, process_id: str, *, error: str, delay: float
) -> bool:
    """Back to ``pending`` after ``delay`` seconds, keeping the error of this attempt."""
    at_sql, at_params = dialect.now_plus(delay)
    n = dialect.now
    cursor.execute(
        f"UPDATE {dialect.t_effects} SET status = 'pending', available_at = {at_sql}, "
        f"error = {dialect.json}, claimed_by = NULL, claimed_at = NULL, updated_at = {n} "
        f"WHERE {_FENCE}",
        [*at_params, error, *_fence_params(row, process_id)],
    )
    return cursor.rowcount == 1


def lock_instance(cursor: Cursor, dialect: Dialect, instance_id: int) -> bool:
    """Lock the emitting instance row (by id: this incarnation only); ``False`` if gone.

    Taken before the effect row, in the order every other writer uses (instance first). On
    SQLite a no-op ``UPDATE`` takes the database write lock up front instead.
    """
    if dialect.write_lock_first:
        cursor.execute(f"UPDATE {dialect.t_instances} SET id = id WHERE id = %s", [instance_id])
        return cursor.rowcount == 1
    cursor.execute(
        f"SELECT id FROM {dialect.t_instances} WHERE id = %s{dialect.for_update}", [instance_id]
    )
    return cursor.fetchone() is not None
