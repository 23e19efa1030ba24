"""Naming a database session after the role that uses it, so the server's own views tell
the connections of a worker apart: ``application_name`` on PostgreSQL (``pg_stat_activity``),
a session variable ``@solid_objects_role`` on MySQL/MariaDB (MySQL 8 shows it in
``performance_schema.user_variables_by_thread``; the processlist itself has no free-text
column). SQLite has no server: nothing to name."""

from __future__ import annotations

from typing import Any

#: PostgreSQL keeps the first 63 bytes of ``application_name``.
MAX_NAME = 63

SET_APPLICATION_NAME = "SELECT set_config('application_name', %s, false)"  # session-wide
SET_MYSQL_ROLE = "SET @solid_objects_role = %s"  # read by performance_schema


def name_session(connection: Any, name: str) -> None:
    """Give the open session of ``connection`` (a Django connection) the name ``name``."""
    name = name.encode()[:MAX_NAME].decode(errors="ignore")
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute(SET_APPLICATION_NAME, [name])
        elif connection.vendor == "mysql":
            cursor.execute(SET_MYSQL_ROLE, [name])
