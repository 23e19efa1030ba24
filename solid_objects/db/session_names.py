"""Naming a database session after the role that uses it, so the server's own views tell
the connections of a worker apart: ``application_name`` on PostgreSQL (``pg_stat_activity``),
a session variable ``@solid_objects_role`` on MySQL/MariaDB (MySQL 8 shows it in
``performance_schema.user_variables_by_thread``; the processlist itself has no free-text
column). SQLite has no server: nothing to name.

Naming a session also gives its server-side id (PostgreSQL's backend pid, the MySQL/MariaDB
connection id that ``SHOW PROCESSLIST`` and ``information_schema.PROCESSLIST`` show as
``ID``), read from the driver, which has it since the connection opened: no statement. The
worker records these ids in its process rows (``metadata["sessions"]``), which is how a DBA
matches a MariaDB processlist entry to its process and role."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from .dialect import Dialect
from .sql import in_list, render

#: PostgreSQL keeps the first 63 bytes of ``application_name``.
MAX_NAME = 63
#: The ``application_name`` of the PostgreSQL wake-up listener's own connection.
LISTENER_NAME = "solid_objects listener"

#: PostgreSQL: name the session (session-wide, not just the transaction).
SET_APPLICATION_NAME = "SELECT set_config('application_name', %(name)s, false)"

#: MySQL/MariaDB: name the session in a variable (read by ``performance_schema``).
SET_MYSQL_ROLE = "SET @solid_objects_role = %(name)s"

#: The metadata of a process's rows (``{ids}``), to merge its sessions into.
PROCESS_METADATA = "SELECT id, metadata FROM {t_processes} WHERE id IN ({ids})"
#: One process row's metadata rewritten.
SET_PROCESS_METADATA = (
    "UPDATE {t_processes} SET metadata = %(metadata)s{json_cast} WHERE id = %(id)s"
)
#: The key of a process row's ``metadata`` that lists the process's sessions.
SESSIONS_KEY = "sessions"


def name_session(connection: Any, name: str) -> int | None:
    """Give the open session of ``connection`` (a Django connection) the name ``name``;
    the session's server-side id (:func:`session_id`)."""
    name = name.encode()[:MAX_NAME].decode(errors="ignore")
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute(SET_APPLICATION_NAME, {"name": name})
        elif connection.vendor == "mysql":
            cursor.execute(SET_MYSQL_ROLE, {"name": name})
    return session_id(connection)


def session_id(connection: Any) -> int | None:
    """The server's id of the open session of ``connection`` (a Django connection), as the
    driver knows it (no statement): PostgreSQL's ``pg_backend_pid()``, MySQL/MariaDB's
    ``CONNECTION_ID()``; ``None`` on SQLite or when it is not connected."""
    raw = getattr(connection, "connection", None)
    if raw is None:
        return None
    if connection.vendor == "postgresql":
        return backend_pid(raw)
    if connection.vendor == "mysql":
        return int(raw.thread_id())  # mysql_thread_id(): the server's connection id
    return None


def backend_pid(raw: Any) -> int:
    """The backend pid of a psycopg (``info.backend_pid``) or psycopg2 connection."""
    info = getattr(raw, "info", None)
    if info is not None and hasattr(info, "backend_pid"):
        return int(info.backend_pid)
    return int(raw.get_backend_pid())


def record_sessions(
    dialect: Dialect, cursor: Any, process_ids: Sequence[str], sessions: list[dict[str, Any]]
) -> None:
    """Set ``metadata["sessions"]`` of the process rows ``process_ids`` to ``sessions``
    (``[{"name": role, "id": session id}]``), keeping their other keys. Only the process
    that owns the rows writes their metadata, so reading then writing it is safe."""
    if not process_ids:
        return
    ids, params = in_list("id", process_ids)
    cursor.execute(render(dialect, PROCESS_METADATA, ids=ids), params)
    for process_id, metadata in cursor.fetchall():
        merged = {**decoded(metadata), SESSIONS_KEY: sessions}
        cursor.execute(
            render(dialect, SET_PROCESS_METADATA),
            {"id": process_id, "metadata": json.dumps(merged)},
        )


def decoded(metadata: Any) -> dict[str, Any]:
    """A ``metadata`` value as a cursor returns it (JSON text, or already decoded)."""
    if isinstance(metadata, bytes | str):
        try:
            metadata = json.loads(metadata)
        except ValueError:
            return {}
    return metadata if isinstance(metadata, dict) else {}
