"""Pick the SQL dialect for a Django connection."""

from __future__ import annotations

from typing import Any

from .dialect import Dialect

_cache: dict[str, Dialect] = {}


def dialect_for(connection: Any) -> Dialect:
    """The dialect of ``connection``, cached per alias.

    A dialect only renders SQL and adapts parameters, which is the same for every thread's
    connection of one alias; statements always run on the cursor the caller passes.
    """
    key = connection.alias
    dialect = _cache.get(key)
    if dialect is None:
        dialect = _build(connection)
        _cache[key] = dialect
    return dialect


def _build(connection: Any) -> Dialect:
    vendor = connection.vendor
    if vendor == "postgresql":
        from .postgresql import PostgreSQLDialect

        return PostgreSQLDialect(connection)
    if vendor == "mysql":
        from .mysql import MySQLDialect

        return MySQLDialect(connection)
    if vendor == "sqlite":
        from .sqlite import SQLiteDialect

        return SQLiteDialect(connection)
    raise NotImplementedError(f"solid_objects does not support the {vendor!r} database")
