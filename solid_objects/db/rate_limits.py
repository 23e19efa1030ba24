"""The statements of the effect rate limits (``@effect(name, rate="10/s")``).

A slot is taken under the row lock of the name's ``rate_limits`` row, in the database's
clock: ``slot = max(next_slot_at, now)``; when the slot is close enough the attempt takes it
(``next_slot_at := slot + interval``) and waits for it; otherwise nothing is taken and the
effect is handed back, due at the slot.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from django.db import IntegrityError, transaction

from ..conf import table
from .dialect import Dialect, as_datetime


def _table(dialect: Dialect) -> str:
    return dialect.qn(table("rate_limits"))


def take_slot(
    cursor: Any, dialect: Dialect, alias: str, name: str, interval: float, max_wait: float
) -> tuple[bool, float, datetime]:
    """``(taken, wait_seconds, slot)`` for one attempt of the effect ``name`` (inside the
    caller's transaction, which holds the row lock until it ends)."""
    t = _table(dialect)
    select = f"SELECT next_slot_at, {dialect.now} FROM {t} WHERE name = %s{dialect.for_update}"
    cursor.execute(select, [name])
    row = cursor.fetchone()
    if row is None:
        try:
            with transaction.atomic(using=alias):
                cursor.execute(
                    f"INSERT INTO {t} (name, next_slot_at, created_at, updated_at) "
                    f"VALUES (%s, {dialect.now}, {dialect.now}, {dialect.now})",
                    [name],
                )
        except IntegrityError:
            pass  # another worker created it first
        cursor.execute(select, [name])
        row = cursor.fetchone()
    next_slot, now = as_datetime(row[0]), as_datetime(row[1])
    assert next_slot is not None and now is not None
    slot = max(next_slot, now)
    wait = (slot - now).total_seconds()
    if wait > max_wait:
        return False, wait, slot
    cursor.execute(
        f"UPDATE {t} SET next_slot_at = %s, updated_at = {dialect.now} WHERE name = %s",
        [dialect.adapt_datetime(slot + timedelta(seconds=interval)), name],
    )
    return True, wait, slot
