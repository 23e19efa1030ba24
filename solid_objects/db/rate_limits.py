"""The statements of the effect rate limits (``@effect(name, rate="10/s")``).

A slot is taken under the row lock of the name's ``rate_limits`` row, in the database's
clock: ``slot = max(next_slot_at, now)``; when the slot is close enough the attempt takes it
(``next_slot_at := slot + interval``) and waits for it; otherwise nothing is taken and the
effect is handed back, due at the slot.

The row of a name is created by :func:`create` in a transaction of its own, never inside the
transaction that locks it: on InnoDB two workers whose inserts of the same new key collided
would each keep a shared lock on it and deadlock when they then lock the row for update.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from .dialect import Dialect, as_datetime
from .sql import render

#: The name's next free slot and the database clock, the row locked until the transaction ends.
LOCK_NEXT_SLOT = "SELECT next_slot_at, {now} FROM {t_rate_limits} WHERE name = %(name)s{for_update}"

#: The row of a name seen for the first time (its first slot is now).
CREATE = (
    "INSERT INTO {t_rate_limits} (name, next_slot_at, created_at, updated_at) "
    "VALUES (%(name)s, {now}, {now}, {now})"
)

#: A slot taken: the next one is an interval after it.
TAKE = (
    "UPDATE {t_rate_limits} SET next_slot_at = %(next_slot_at)s, updated_at = {now} "
    "WHERE name = %(name)s"
)


def take_slot(
    cursor: Any, dialect: Dialect, name: str, interval: float, max_wait: float
) -> tuple[bool, float, datetime] | None:
    """``(taken, wait_seconds, slot)`` for one attempt of the effect ``name`` (inside the
    caller's transaction, which holds the row lock until it ends); ``None`` when the name
    has no row yet (:func:`create` it, then try again)."""
    cursor.execute(render(dialect, LOCK_NEXT_SLOT), {"name": name})
    row = cursor.fetchone()
    if row is None:
        return None
    next_slot, now = as_datetime(row[0]), as_datetime(row[1])
    assert next_slot is not None and now is not None
    slot = max(next_slot, now)
    wait = (slot - now).total_seconds()
    if wait > max_wait:
        return False, wait, slot
    cursor.execute(
        render(dialect, TAKE),
        {"next_slot_at": dialect.adapt_datetime(slot + timedelta(seconds=interval)), "name": name},
    )
    return True, wait, slot


def create(cursor: Any, dialect: Dialect, name: str) -> None:
    """Insert the row of ``name`` (raises ``IntegrityError`` if another worker did first).
    Run it in a transaction of its own."""
    cursor.execute(render(dialect, CREATE), {"name": name})
