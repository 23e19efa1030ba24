"""Figures over the last hour for the admin overview page and the Prometheus metrics:
throughput and lag per minute, dead letters per minute, recent throughput and failures per
actor type.

Every statement reads an index range (``completed_at`` of messages, ``last_failed_at`` of
dead letters, the status of effects) or a small table; none counts a hot table in full.
Minutes are epoch minutes on the database clock (:meth:`Dialect.epoch` of a column).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .dialect import Dialect
from .sql import render

#: Completed turns per minute over the window, with the mean wait from due to start.
THROUGHPUT = (
    "SELECT FLOOR({completed} / 60) AS minute, COUNT(*), "
    "AVG({started} - {available}) FROM {t_messages} "
    "WHERE completed_at >= {later:since} GROUP BY FLOOR({completed} / 60)"
)
#: Dead letters per minute over the window.
DEAD_LETTERS = (
    "SELECT FLOOR({failed} / 60) AS minute, COUNT(*) FROM {t_dead} "
    "WHERE last_failed_at >= {later:since} GROUP BY FLOOR({failed} / 60)"
)
#: Completed turns per actor type over a (short) window.
COMPLETED_BY_TYPE = (
    "SELECT actor_type, COUNT(*) FROM {t_messages} WHERE completed_at >= {later:since} "
    "GROUP BY actor_type"
)
#: Dead letters not retried, per actor type (dead letters are few: a table of failures).
DEAD_BY_TYPE = (
    "SELECT actor_type, COUNT(*) FROM {t_dead} WHERE retried_message_id IS NULL GROUP BY actor_type"
)
#: Dead effects per effect name (the status index).
DEAD_EFFECTS_BY_NAME = "SELECT name, COUNT(*) FROM {t_effects} WHERE status = 'dead' GROUP BY name"


@dataclass(frozen=True)
class Minute:
    """One minute of the window: ``minute`` is the epoch minute."""

    minute: int
    completed: int = 0
    mean_wait: float | None = None
    dead_letters: int = 0


def _since(dialect: Dialect, seconds: float) -> dict[str, Any]:
    """The parameter of ``{later:since}``: the start of a window ``seconds`` long."""
    return {"since": dialect.interval(-seconds)}


def last_hour(cursor: Any, dialect: Dialect, seconds: float = 3600.0) -> dict[int, Minute]:
    """``{epoch minute: Minute}`` for the minutes of the window that saw any work."""
    sql = render(
        dialect,
        THROUGHPUT,
        completed=dialect.epoch("completed_at"),
        started=dialect.epoch("COALESCE(started_at, completed_at)"),
        available=dialect.epoch("available_at"),
    )
    cursor.execute(sql, _since(dialect, seconds))
    minutes = {
        int(minute): Minute(int(minute), int(count), None if wait is None else float(wait))
        for minute, count, wait in cursor.fetchall()
    }
    cursor.execute(
        render(dialect, DEAD_LETTERS, failed=dialect.epoch("last_failed_at")),
        _since(dialect, seconds),
    )
    for minute, count in cursor.fetchall():
        key = int(minute)
        previous = minutes.get(key, Minute(key))
        minutes[key] = Minute(key, previous.completed, previous.mean_wait, int(count))
    return minutes


def completed_by_type(cursor: Any, dialect: Dialect, seconds: float) -> dict[str, int]:
    cursor.execute(render(dialect, COMPLETED_BY_TYPE), _since(dialect, seconds))
    return {str(name): int(count) for name, count in cursor.fetchall()}


def dead_by_type(cursor: Any, dialect: Dialect) -> dict[str, int]:
    cursor.execute(render(dialect, DEAD_BY_TYPE), {})
    return {str(name): int(count) for name, count in cursor.fetchall()}


def dead_effects_by_name(cursor: Any, dialect: Dialect) -> dict[str, int]:
    cursor.execute(render(dialect, DEAD_EFFECTS_BY_NAME), {})
    return {str(name): int(count) for name, count in cursor.fetchall()}
