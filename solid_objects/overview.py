"""What the admin overview page shows, as one dict: live roles and processes, mailbox depth
and lag per actor type, outbox backlogs, reminders due, dead letters and dead outbox rows,
and per-minute throughput, wait and dead letters over the last hour.

Built from :func:`solid_objects.status.collect` (grouped queries over the small tables and
the status indexes) and :mod:`solid_objects.db.overview` (index ranges over the last hour):
no hot table is counted in full.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

WINDOW_MINUTES = 60


@dataclass(frozen=True)
class Series:
    """One value per minute of the window, oldest first (``None``: no data that minute)."""

    label: str
    unit: str
    values: list[float | None]

    @property
    def total(self) -> float:
        return sum(value or 0 for value in self.values)

    @property
    def peak(self) -> float:
        return max((value or 0 for value in self.values), default=0.0)


def build(using: str | None = None) -> dict[str, Any]:
    from django.db import connections

    from .conf import get_settings
    from .db import overview
    from .db.vendors import dialect_for
    from .status import collect

    alias = using or get_settings().DATABASE
    report = collect(alias, dead_letter_limit=8)
    connection = connections[alias]
    dialect = dialect_for(connection)
    with connection.cursor() as cursor:
        minutes = overview.last_hour(cursor, dialect, WINDOW_MINUTES * 60.0)
    now_minute = int(time.time() // 60)
    if minutes:  # the database clock decides what "now" is
        now_minute = max(now_minute, max(minutes))
    keys = range(now_minute - WINDOW_MINUTES + 1, now_minute + 1)
    throughput = Series(
        "Turns completed per minute",
        "turns",
        [float(minutes[k].completed) if k in minutes else 0.0 for k in keys],
    )
    wait = Series(
        "Mean wait from due to start",
        "s",
        [minutes[k].mean_wait if k in minutes else None for k in keys],
    )
    dead = Series(
        "Dead letters per minute",
        "dead letters",
        [float(minutes[k].dead_letters) if k in minutes else 0.0 for k in keys],
    )
    roles: dict[str, dict[str, int]] = {}
    for process in report["processes"]["live"]:
        state = "idle" if process["idle"] else "stale" if process["stale"] else "live"
        roles.setdefault(process["kind"], {"live": 0, "stale": 0, "idle": 0})[state] += 1
    return {
        **report,
        "roles": dict(sorted(roles.items())),
        "series": [throughput, wait, dead],
        "window_minutes": WINDOW_MINUTES,
    }
