"""What ``manage.py solid_objects_status`` shows: processes, mailbox depth and lag, outbox
backlog, reminders and dead letters, as one JSON-ready dict.

Every figure comes from a grouped query over a small table (``ready_messages``,
``claimed_messages``, live processes) or an index-backed status filter (outboxes); history
tables are never counted in full. Lags are measured on the database clock: how long the
oldest due row has been waiting.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.db import connections

from .conf import get_settings
from .db.cursor import Cursor, single_row
from .db.dialect import Dialect, as_datetime
from .db.vendors import dialect_for

#: The ``processes.kind`` of a process that only makes sync calls (no role thread).
CALLER_KIND = "caller"


def _age(now: datetime, value: Any) -> float | None:
    moment = as_datetime(value)
    return None if moment is None else max((now - moment).total_seconds(), 0.0)


def _iso(value: Any) -> str | None:
    moment = as_datetime(value)
    return None if moment is None else moment.isoformat()


def collect(using: str | None = None, *, dead_letter_limit: int = 10) -> dict[str, Any]:
    settings = get_settings()
    alias = using or settings.DATABASE
    connection = connections[alias]
    d = dialect_for(connection)
    n = d.now
    with connection.cursor() as cursor:
        now = d.database_now(cursor)
        report: dict[str, Any] = {
            "database": {"alias": alias, "vendor": connection.vendor, "now": now.isoformat()},
            "processes": _processes(cursor, d, now, settings.PROCESS_ALIVE_THRESHOLD),
            "mailbox": _mailbox(cursor, d, n, now),
            "outbox": {
                "effects": _outbox(cursor, d.t_effects, n, now),
                "broadcasts": _outbox(cursor, d.t_broadcasts, n, now),
            },
            "reminders": _reminders(cursor, d, n, now),
            "dead_letters": _dead_letters(cursor, d, dead_letter_limit),
        }
    return report


def _processes(cursor: Cursor, d: Dialect, now: datetime, threshold: float) -> dict[str, Any]:
    cursor.execute(
        "SELECT id, kind, hostname, pid, started_at, last_heartbeat_at, shutdown_state "
        f"FROM {d.t_processes} WHERE shutdown_state <> 'stopped' ORDER BY kind, started_at",
        [],
    )
    live = []
    for process_id, kind, host, pid, started, heartbeat, state in cursor.fetchall():
        age = _age(now, heartbeat)
        silent = age is None or age > threshold
        # A caller (a web or script process that made sync calls) heartbeats only while it
        # calls: silence means idle, not crashed.
        caller = kind == CALLER_KIND
        live.append(
            {
                "id": process_id,
                "kind": kind,
                "hostname": host,
                "pid": int(pid),
                "started_at": _iso(started),
                "last_heartbeat_at": _iso(heartbeat),
                "heartbeat_age": age,
                "shutdown_state": state,
                "role": not caller,
                "stale": silent and not caller,
                "idle": silent and caller,
            }
        )
    cursor.execute(
        f"SELECT COUNT(*) FROM {d.t_processes} WHERE shutdown_state = 'stopped'",
        [],
    )
    return {"live": live, "stopped": int(single_row(cursor)[0])}


def _mailbox(cursor: Cursor, d: Dialect, n: str, now: datetime) -> dict[str, Any]:
    cursor.execute(
        "SELECT m.actor_type, COUNT(*), "
        f"SUM(CASE WHEN r.available_at <= {n} THEN 1 ELSE 0 END), "
        f"MIN(CASE WHEN r.available_at <= {n} THEN r.available_at END) "
        f"FROM {d.t_ready} r JOIN {d.t_messages} m ON m.id = r.message_id "
        "GROUP BY m.actor_type",
        [],
    )
    types: dict[str, dict[str, Any]] = {}
    for actor_type, ready, due, oldest in cursor.fetchall():
        types[actor_type] = {
            "actor_type": actor_type,
            "ready": int(ready),
            "due": int(due or 0),
            "lag_seconds": _age(now, oldest),
            "claimed": 0,
            "oldest_claim_seconds": None,
        }
    cursor.execute(
        "SELECT m.actor_type, COUNT(*), MIN(c.claimed_at) "
        f"FROM {d.t_claimed} c JOIN {d.t_messages} m ON m.id = c.message_id "
        "GROUP BY m.actor_type",
        [],
    )
    for actor_type, claimed, oldest in cursor.fetchall():
        entry = types.setdefault(
            actor_type,
            {"actor_type": actor_type, "ready": 0, "due": 0, "lag_seconds": None},
        )
        entry["claimed"] = int(claimed)
        entry["oldest_claim_seconds"] = _age(now, oldest)
    rows = sorted(types.values(), key=lambda row: row["actor_type"])
    lags = [row["lag_seconds"] for row in rows if row["lag_seconds"] is not None]
    return {
        "ready": sum(row["ready"] for row in rows),
        "due": sum(row["due"] for row in rows),
        "claimed": sum(row.get("claimed", 0) for row in rows),
        "lag_seconds": max(lags) if lags else None,
        "by_actor_type": rows,
    }


def _outbox(cursor: Cursor, table: str, n: str, now: datetime) -> dict[str, Any]:
    cursor.execute(
        f"SELECT status, COUNT(*), SUM(CASE WHEN available_at <= {n} THEN 1 ELSE 0 END), "
        f"MIN(CASE WHEN available_at <= {n} THEN available_at END) FROM {table} "
        "WHERE status IN ('pending', 'processing', 'dead') GROUP BY status",
        [],
    )
    result: dict[str, Any] = {"pending": 0, "due": 0, "processing": 0, "dead": 0}
    result["lag_seconds"] = None
    for status, count, due, oldest in cursor.fetchall():
        result[status] = int(count)
        if status == "pending":
            result["due"] = int(due or 0)
            result["lag_seconds"] = _age(now, oldest)
    return result


def _reminders(cursor: Cursor, d: Dialect, n: str, now: datetime) -> dict[str, Any]:
    cursor.execute(
        f"SELECT COUNT(*), SUM(CASE WHEN next_run_at <= {n} THEN 1 ELSE 0 END), "
        f"MIN(CASE WHEN next_run_at <= {n} THEN next_run_at END) FROM {d.t_reminders} "
        "WHERE status = 'scheduled'",
        [],
    )
    scheduled, due, oldest = single_row(cursor)
    return {
        "scheduled": int(scheduled or 0),
        "due": int(due or 0),
        "lag_seconds": _age(now, oldest),
    }


def _dead_letters(cursor: Cursor, d: Dialect, limit: int) -> dict[str, Any]:
    cursor.execute(
        "SELECT COUNT(*), SUM(CASE WHEN retried_message_id IS NULL THEN 1 ELSE 0 END) "
        f"FROM {d.t_dead}",
        [],
    )
    total, unretried = single_row(cursor)
    cursor.execute(
        "SELECT id, actor_type, actor_id, operation, attempts, exception_class, last_failed_at "
        f"FROM {d.t_dead} WHERE retried_message_id IS NULL "
        "ORDER BY last_failed_at DESC, id DESC LIMIT %s",
        [limit],
    )
    latest = [
        {
            "id": int(row[0]),
            "actor_type": row[1],
            "actor_id": row[2],
            "operation": row[3],
            "attempts": int(row[4]),
            "exception_class": row[5],
            "last_failed_at": _iso(row[6]),
        }
        for row in cursor.fetchall()
    ]
    return {"total": int(total or 0), "unretried": int(unretried or 0), "latest": latest}
