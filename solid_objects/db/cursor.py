"""The DB-API cursor, as the statements of ``db/`` use it.

Django's ``CursorWrapper`` forwards these to the driver's cursor, so django-stubs types them
``Any``; annotating a cursor with this protocol gives the row counts and rows their types
(any Django cursor satisfies it).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from django.db import DatabaseError

__all__ = ["Cursor", "single_row"]


class Cursor(Protocol):
    @property
    def rowcount(self) -> int:
        """Rows the last statement changed (or returned, for a ``SELECT`` on some drivers)."""

    @property
    def lastrowid(self) -> int | None:
        """The id the last ``INSERT`` generated, where the driver reports one."""

    def execute(
        self, sql: str, params: Sequence[Any] | Mapping[str, Any] | None = None
    ) -> object: ...

    def fetchone(self) -> tuple[Any, ...] | None: ...

    def fetchall(self) -> list[tuple[Any, ...]]: ...


def single_row(cursor: Cursor) -> tuple[Any, ...]:
    """The row of a statement that always returns exactly one (``COUNT(*)``, ``MAX(...)``
    without ``GROUP BY``)."""
    row = cursor.fetchone()
    if row is None:
        raise DatabaseError("an aggregate statement returned no row")
    return row
