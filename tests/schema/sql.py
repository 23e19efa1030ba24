"""Raw SQL helpers for the schema tests: they bypass the ORM on purpose."""

from __future__ import annotations

from typing import Any

from django.db import connection

from solid_objects.conf import table


def quote(name: str) -> str:
    return connection.ops.quote_name(name)


def execute(sql: str, params: Any = ()) -> int:
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.rowcount


def scalar(sql: str, params: Any = ()) -> Any:
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        row = cursor.fetchone()
    return None if row is None else row[0]


def delete(name: str, pk: Any) -> int:
    """``DELETE FROM <prefix><name> WHERE id = pk``; the number of rows deleted."""
    return execute(f"DELETE FROM {quote(table(name))} WHERE {quote('id')} = %s", [pk])


def update(name: str, pk: Any, column: str, value: Any) -> int:
    return execute(
        f"UPDATE {quote(table(name))} SET {quote(column)} = %s WHERE {quote('id')} = %s",
        [value, pk],
    )


def count(name: str, column: str, value: Any) -> int:
    return scalar(f"SELECT COUNT(*) FROM {quote(table(name))} WHERE {quote(column)} = %s", [value])


def value(name: str, pk: Any, column: str) -> Any:
    return scalar(
        f"SELECT {quote(column)} FROM {quote(table(name))} WHERE {quote('id')} = %s", [pk]
    )
