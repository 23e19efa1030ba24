"""What ``manage.py solid_objects_status`` shows: processes, mailbox depth and lag, outbox
backlog, reminders and dead letters, as one JSON-ready dict.

:func:`report` is what the operator surfaces read: the figures of one alias (``using``), or
with shards (``SOLID_OBJECTS["DATABASES"]``) the totals over every alias holding the tables,
with each alias's own figures under ``"shards"``. :func:`collect` reads one alias.

Every figure comes from a grouped query over a small table (``ready_messages``,
``claimed_messages``, live processes) or an index-backed status filter (outboxes); history
tables are never counted in full. Lags are measured on the database clock: how long the
oldest due row has been waiting.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from django.db import connections

from .conf import get_settings
from .db.cursor import Cursor, single_row
from .db.dialect import Dialect, as_datetime
from .db.vendors import dialect_for
from .tasks.naming import RUN_OPERATION, TASK_ACTOR_TYPE, operation_label

#: The ``processes.kind`` of a process that only makes sync calls (no role thread).
CALLER_KIND = "caller"


def _age(now: datetime, value: Any) -> float | None:
    moment = as_datetime(value)
    return None if moment is None else max((now - moment).total_seconds(), 0.0)


def _iso(value: Any) -> str | None:
    moment = as_datetime(value)
    return None if moment is None else moment.isoformat()


def _json(value: Any) -> Any:
    """A JSON column read through a raw cursor (text on most drivers)."""
    if isinstance(value, bytes | str):
        try:
            return json.loads(value)
        except ValueError:
            return None
    return value


def report(using: str | None = None, *, dead_letter_limit: int = 10) -> dict[str, Any]:
    """The status of ``using`` alone, or (``None``) of every alias that holds actors.

    Unsharded this is :func:`collect` of ``DATABASE``. Sharded, the top-level figures are
    totals over the aliases (:func:`combine`) and ``"shards"`` maps each alias to its own
    :func:`collect`. An alias holding no ``solid_objects`` tables raises
    :class:`~solid_objects.errors.UnknownDatabase` before any query.
    """
    from .routers import actor_aliases, require_actor_alias

    aliases = (require_actor_alias(using),) if using is not None else actor_aliases()
    if len(aliases) == 1:
        return collect(aliases[0], dead_letter_limit=dead_letter_limit)
    return combine(
        {alias: collect(alias, dead_letter_limit=dead_letter_limit) for alias in aliases},
        dead_letter_limit=dead_letter_limit,
    )


def collect(using: str | None = None, *, dead_letter_limit: int = 10) -> dict[str, Any]:
    """The status of one alias (``None``: ``DATABASE``)."""
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
            "dead_letters": _dead_letters(cursor, d, dead_letter_limit, alias),
        }
    return report


def combine(shards: dict[str, dict[str, Any]], *, dead_letter_limit: int = 10) -> dict[str, Any]:
    """One report over several aliases' :func:`collect` reports (``{alias: report}``).

    Counts add up; lags are the worst of any alias; a process registered on several aliases
    (a worker serving every shard) is listed once, with the aliases it is registered on and
    its freshest heartbeat; the latest dead letters are merged newest first, each naming its
    ``database``.
    """
    parts = list(shards.values())
    return {
        "databases": [part["database"] for part in parts],
        "processes": _combined_processes([part["processes"] for part in parts], list(shards)),
        "mailbox": _combined_mailbox([part["mailbox"] for part in parts]),
        "outbox": {
            name: _combined_backlog([part["outbox"][name] for part in parts])
            for name in ("effects", "broadcasts")
        },
        "reminders": _combined_backlog([part["reminders"] for part in parts]),
        "dead_letters": _combined_dead_letters(
            [part["dead_letters"] for part in parts], dead_letter_limit
        ),
        "shards": shards,
    }


def _worst(values: list[float | None]) -> float | None:
    known = [value for value in values if value is not None]
    return max(known) if known else None


def _combined_processes(parts: list[dict[str, Any]], aliases: list[str]) -> dict[str, Any]:
    merged: dict[str, dict[str, Any]] = {}
    for alias, part in zip(aliases, parts, strict=True):
        for process in part["live"]:
            seen = merged.get(process["id"])
            if seen is None:
                merged[process["id"]] = {**process, "databases": [alias]}
                continue
            seen["databases"].append(alias)
            fresher = process["heartbeat_age"] is not None and (
                seen["heartbeat_age"] is None or process["heartbeat_age"] < seen["heartbeat_age"]
            )
            if fresher:
                merged[process["id"]] = {**process, "databases": seen["databases"]}
    live = sorted(merged.values(), key=lambda p: (p["kind"], p["started_at"] or "", p["id"]))
    return {"live": live, "stopped": sum(part["stopped"] for part in parts)}


def _combined_mailbox(parts: list[dict[str, Any]]) -> dict[str, Any]:
    types: dict[str, dict[str, Any]] = {}
    for part in parts:
        for row in part["by_actor_type"]:
            entry = types.setdefault(
                row["actor_type"],
                {
                    "actor_type": row["actor_type"],
                    "ready": 0,
                    "due": 0,
                    "lag_seconds": None,
                    "claimed": 0,
                    "oldest_claim_seconds": None,
                },
            )
            for key in ("ready", "due", "claimed"):
                entry[key] += row.get(key, 0)
            for key in ("lag_seconds", "oldest_claim_seconds"):
                entry[key] = _worst([entry[key], row.get(key)])
    return {
        "ready": sum(part["ready"] for part in parts),
        "due": sum(part["due"] for part in parts),
        "claimed": sum(part["claimed"] for part in parts),
        "lag_seconds": _worst([part["lag_seconds"] for part in parts]),
        "by_actor_type": sorted(types.values(), key=lambda row: row["actor_type"]),
    }


def _combined_backlog(parts: list[dict[str, Any]]) -> dict[str, Any]:
    """Outbox or reminder figures: every count adds up, the lag is the worst."""
    result: dict[str, Any] = {}
    for key in parts[0]:
        values = [part[key] for part in parts]
        result[key] = _worst(values) if key == "lag_seconds" else sum(values)
    return result


def _combined_dead_letters(parts: list[dict[str, Any]], limit: int) -> dict[str, Any]:
    latest = sorted(
        (row for part in parts for row in part["latest"]),
        key=lambda row: (row["last_failed_at"] or "", row["id"]),
        reverse=True,
    )
    return {
        "total": sum(part["total"] for part in parts),
        "unretried": sum(part["unretried"] for part in parts),
        "latest": latest[:limit],
    }


def _processes(cursor: Cursor, d: Dialect, now: datetime, threshold: float) -> dict[str, Any]:
    cursor.execute(
        "SELECT id, kind, hostname, pid, started_at, last_heartbeat_at, shutdown_state, "
        f"metadata FROM {d.t_processes} WHERE shutdown_state <> 'stopped' "
        "ORDER BY kind, started_at",
        [],
    )
    live = []
    for process_id, kind, host, pid, started, heartbeat, state, meta in cursor.fetchall():
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
                # The database sessions of the process's named threads (their server ids).
                "sessions": _sessions(meta),
            }
        )
    cursor.execute(
        f"SELECT COUNT(*) FROM {d.t_processes} WHERE shutdown_state = 'stopped'",
        [],
    )
    return {"live": live, "stopped": int(single_row(cursor)[0])}


def _sessions(metadata: Any) -> list[dict[str, Any]]:
    """``metadata["sessions"]`` of a process row: ``[{"name": role, "id": session id}]``
    (runtime/connection_names.py writes it)."""
    from .db.session_names import SESSIONS_KEY, decoded

    found = decoded(metadata).get(SESSIONS_KEY)
    return [
        {"name": str(entry["name"]), "id": int(entry["id"])}
        for entry in found or []
        if isinstance(entry, dict) and "name" in entry and "id" in entry
    ]


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


def _dead_letters(cursor: Cursor, d: Dialect, limit: int, alias: str) -> dict[str, Any]:
    cursor.execute(
        "SELECT COUNT(*), SUM(CASE WHEN retried_message_id IS NULL THEN 1 ELSE 0 END) "
        f"FROM {d.t_dead}",
        [],
    )
    total, unretried = single_row(cursor)
    # A task's arguments name it and its queue ("label"); nobody else's are read.
    cursor.execute(
        "SELECT id, actor_type, actor_id, operation, attempts, exception_class, last_failed_at, "
        "CASE WHEN actor_type = %s AND operation = %s THEN arguments END "
        f"FROM {d.t_dead} WHERE retried_message_id IS NULL "
        "ORDER BY last_failed_at DESC, id DESC LIMIT %s",
        [TASK_ACTOR_TYPE, RUN_OPERATION, limit],
    )
    latest = [
        {
            "id": int(row[0]),
            "actor_type": row[1],
            "actor_id": row[2],
            "operation": row[3],
            "label": operation_label(row[1], row[2], row[3], _json(row[7])),
            "attempts": int(row[4]),
            "exception_class": row[5],
            "last_failed_at": _iso(row[6]),
            "database": alias,
        }
        for row in cursor.fetchall()
    ]
    return {"total": int(total or 0), "unretried": int(unretried or 0), "latest": latest}
