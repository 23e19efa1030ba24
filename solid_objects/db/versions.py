"""Which database server a connection talks to, and its version."""

from __future__ import annotations

import sqlite3
from typing import Any


def database_version(connection: Any) -> tuple[str, tuple[int, ...]]:
    """``(flavour, version)``: flavour is postgresql, mysql, mariadb or sqlite (or the
    vendor of an unsupported backend, with an empty version). Opens the connection."""
    connection.ensure_connection()
    if connection.vendor == "postgresql":
        number = connection.pg_version  # e.g. 150004
        return "postgresql", (number // 10000, number % 10000)
    if connection.vendor == "mysql":
        flavour = "mariadb" if connection.mysql_is_mariadb else "mysql"
        return flavour, tuple(connection.mysql_version)
    if connection.vendor == "sqlite":
        return "sqlite", tuple(sqlite3.sqlite_version_info)
    return str(connection.vendor), ()
