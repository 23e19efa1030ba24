"""Figures over the last hour for the admin overview page and the Prometheus metrics:
throughput and lag per minute, dead letters per minute, recent throughput and failures per
actor type.

Every statement reads an index range (``completed_at`` of messages, ``last_failed_at`` of
dead letters, the status of effects) or a small table; none counts a hot table in full.
Minutes are epoch minutes on the database clock; the epoch of a column is the one vendor
difference, kept here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .dialect import Dialect

#: Completed turns per minute over the window, with the mean wait from due to start.
THROUGHPUT = (
    "SELECT FLOOR({completed} / 60) AS minute, COUNT(*), "
    "AVG({started} - {available}) FROM {t_messages} "
    "WHERE completed_at >= {since} GROUP BY FLOOR({completed} / 60)"
)
#: Dead letters per minute over the window.
DEAD_LETTERS = (
    "SELECT FLOOR({failed} / 60) AS minute, COUNT(*) FROM {t_dead} "
    "WHERE last_failed_at >= {since} GROUP BY FLOOR({failed} / 60)"
)
#: Completed turns per actor type over a (short) window.
COMPLETED_BY_TYPE = (
    "SELECT actor_type, COUNT(*) FROM {t_messages} WHERE completed_at >= {since} "
    "GROUP BY actor_type"
)
#: Dead letters not retried, per actor type (dead letters are few: a table of failures).
DEAD_BY_TYPE = (
    "SELECT actor_type, COUNT(*) FROM {t_dead} WHERE retried_message_id IS NULL GROUP BY actor_type"
)
#: Dead effects per effect name (the status index).
DEAD_EFFECTS_BY_NAME = "SELECT name, COUNT(*) FROM {t_effects} WHERE status = 'dead' GROUP BY name"


def epoch(dialect: Dialect, column: str) -> str:
    """Seconds since 1970 (UTC) of a datetime column, as SQL."""
    if dialect.vendor == "postgresql":
        return f"EXTRACT(EPOCH FROM {column})"
    if dialect.vendor == "sqlite":  # text in UTC
        return f"((julianday({column}) - 2440587.5) * 86400.0)"
    # MySQL/MariaDB: DATETIME in UTC; TIMESTAMPDIFF ignores the session time zone.
    return f"(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', {column}) / 1000000.0)"


@dataclass(frozen=True)
class Minute:
    """One minute of the window: ``minute`` is the epoch minute."""

    minute: int
    completed: int = 0
    mean_wait: float | None = None
    dead_letters: int = 0


def _since(dialect: Dialect, seconds: float) -> tuple[str, list[Any]]:
    return dialect.now_plus(-seconds)


def _fill(dialect: Dialect, template: str, since: str, **columns: str) -> str:
    return template.format(
        t_messages=dialect.t_messages,
        t_dead=dialect.t_dead,
        t_effects=dialect.t_effects,
        since=since,
        **columns,
    )


def last_hour(cursor: Any, dialect: Dialect, seconds: float = 3600.0) -> dict[int, Minute]:
    """``{epoch minute: Minute}`` for the minutes of the window that saw any work."""
    since, params = _since(dialect, seconds)
    completed = epoch(dialect, "completed_at")
    sql = _fill(
        dialect,
        THROUGHPUT,
        since,
        completed=completed,
        started=epoch(dialect, "COALESCE(started_at, completed_at)"),
        available=epoch(dialect, "available_at"),
    )
    cursor.execute(sql, params)
    minutes = {
        int(minute): Minute(int(minute), int(count), None if wait is None else float(wait))
        for minute, count, wait in cursor.fetchall()
    }
    since, params = _since(dialect, seconds)
    cursor.execute(
        _fill(dialect, DEAD_LETTERS, since, failed=epoch(dialect, "last_failed_at")), params
    )
    for minute, count in cursor.fetchall():
        key = int(minute)
        previous = minutes.get(key, Minute(key))
        minutes[key] = Minute(key, previous.completed, previous.mean_wait, int(count))
    return minutes


def completed_by_type(cursor: Any, dialect: Dialect, seconds: float) -> dict[str, int]:
    since, params = _since(dialect, seconds)
    cursor.execute(_fill(dialect, COMPLETED_BY_TYPE, since), params)
    return {str(name): int(count) for name, count in cursor.fetchall()}


def dead_by_type(cursor: Any, dialect: Dialect) -> dict[str, int]:
    cursor.execute(_fill(dialect, DEAD_BY_TYPE, ""), [])
    return {str(name): int(count) for name, count in cursor.fetchall()}


def dead_effects_by_name(cursor: Any, dialect: Dialect) -> dict[str, int]:
    cursor.execute(_fill(dialect, DEAD_EFFECTS_BY_NAME, ""), [])
    return {str(name): int(count) for name, count in cursor.fetchall()}
