"""SQLite: ``INSERT OR IGNORE``, and serialised writers (no evidence needed).

SQLite lets one writer at a time hold the write lock, from its first write until it commits
or rolls back, and an AUTOINCREMENT position is allocated under that lock. Every position
below the highest committed one therefore belongs to a writer that has already finished: a
missing position is dead the moment it is seen. (A rolled-back insert does not even leave a
hole: SQLite rolls ``sqlite_sequence`` back with it. Holes come from deleted rows, or from an
ignored duplicate of a plain ``INSERT OR IGNORE``, which is why the insert below selects only
drafts whose key is not there yet.)

Locking a checkpoint is an ``UPDATE ... RETURNING`` (SQLite has no ``SELECT FOR UPDATE``): the
write takes the database's write lock, even in a DEFERRED transaction, so two runners
serialise on it and the second reads the first one's committed checkpoint.

Datetimes are read as text (``CAST``), not through the sqlite3 converters Django registers,
so a malformed stored date raises :class:`UnexpectedValueError` for its column.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from datetime import datetime
from functools import cached_property
from typing import ClassVar

from django.db.models import F, TextField
from django.db.models.expressions import Combinable
from django.db.models.functions import Cast

from ..records import COLUMNS
from ..validation import Draft
from .base import Backend, GapStrategy, InsertOutcome

DATETIME_COLUMNS = ("occurred_at", "recorded_at")


class SQLiteBackend(Backend):
    vendor: ClassVar[str] = "sqlite"
    gap_strategy: ClassVar[GapStrategy] = "serialised"
    lock_checkpoint_sql: ClassVar[str] = (
        "UPDATE {table} SET position = position WHERE projection = %s RETURNING position"
    )

    @cached_property
    def select_list(self) -> str:
        return ", ".join(
            f"CAST({quoted} AS TEXT)" if name in DATETIME_COLUMNS else quoted
            for name, quoted in zip(COLUMNS, self.columns, strict=True)
        )

    def select_fields(self) -> list[str | Combinable]:
        return [
            Cast(name, TextField()) if name in DATETIME_COLUMNS else F(name) for name in COLUMNS
        ]

    def max_rows_per_statement(self, params_per_row: int) -> int | None:
        self.connection.ensure_connection()
        limit: int = self.connection.connection.getlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER)
        return max(1, limit // params_per_row)

    @cached_property
    def _returning(self) -> str:
        return f"RETURNING {self.columns[0]}, {self.columns[1]}, {self.columns[2]}"

    def _absent(self, key: str, kind: str) -> str:
        return (
            f"NOT EXISTS (SELECT 1 FROM {self.entry_table} AS e "
            f"WHERE e.{self.columns[2]} = {key} AND e.{self.columns[1]} = {kind})"
        )

    @cached_property
    def _insert_one_sql(self) -> str:
        return (
            f"INSERT OR IGNORE INTO {self.entry_table} ({self.insert_columns}) "
            f"SELECT {', '.join(['%s'] * 9)} "
            f"WHERE {self._absent('%s', '%s')} {self._returning}"
        )

    def insert_once(self, drafts: Sequence[Draft]) -> InsertOutcome:
        if len(drafts) == 1:
            draft = drafts[0]
            sql = self._insert_one_sql
            params = [*self.draft_params(draft), draft.idempotency_key, draft.kind]
        else:
            row = "(" + ", ".join(["%s"] * 10) + ")"
            params = []
            for index, draft in enumerate(drafts):
                params.append(index)
                params.extend(self.draft_params(draft))
            # VALUES columns: column1 = order, column2..column10 = the insert columns.
            picked = ", ".join(f"draft.column{i}" for i in range(2, 11))
            sql = (
                f"INSERT OR IGNORE INTO {self.entry_table} ({self.insert_columns}) "
                f"SELECT {picked} FROM (VALUES {', '.join([row] * len(drafts))}) AS draft "
                f"WHERE {self._absent('draft.column3', 'draft.column2')} "
                f"ORDER BY draft.column1 {self._returning}"
            )
        outcome = InsertOutcome()
        with self.connection.cursor() as cursor:
            cursor.execute(sql, params)
            for position, kind, key in cursor.fetchall():
                outcome.created[(key, kind)] = position
        return outcome

    def create_checkpoint(self, name: str, now: datetime) -> None:
        with self.connection.cursor() as cursor:
            cursor.execute(
                f"INSERT OR IGNORE INTO {self.checkpoint_table} (projection, position, "
                "updated_at) VALUES (%s, 0, %s)",
                [name, self.adapt_datetime(now)],
            )
