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

from .db.overview import Minute

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
    """The overview of ``using``, or (``None``) of every alias holding actors: the status
    totals (:func:`solid_objects.status.report`, with ``"shards"`` when sharded) and the
    last hour added up minute by minute over the aliases."""
    from django.db import connections

    from .db import overview
    from .db.vendors import dialect_for
    from .routers import actor_aliases, require_actor_alias
    from .status import report as status_report

    aliases = (require_actor_alias(using),) if using is not None else actor_aliases()
    report = status_report(using, dead_letter_limit=8)
    per_alias = []
    for alias in aliases:
        connection = connections[alias]
        with connection.cursor() as cursor:
            per_alias.append(
                overview.last_hour(cursor, dialect_for(connection), WINDOW_MINUTES * 60.0)
            )
    minutes = _add_up(per_alias)
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


def _add_up(parts: list[dict[int, Minute]]) -> dict[int, Minute]:
    """The minutes of several aliases as one: counts add up, the mean wait is weighted by
    each alias's completed turns."""
    if len(parts) == 1:
        return parts[0]
    result: dict[int, Minute] = {}
    for part in parts:
        for key, minute in part.items():
            seen = result.get(key, Minute(key))
            completed = seen.completed + minute.completed
            waits = [(m.mean_wait, m.completed) for m in (seen, minute) if m.mean_wait is not None]
            weight = sum(count for _, count in waits)
            mean_wait = (
                sum(w * count for w, count in waits) / weight
                if weight
                else (waits[0][0] if waits else None)
            )
            result[key] = Minute(key, completed, mean_wait, seen.dead_letters + minute.dead_letters)
    return result
