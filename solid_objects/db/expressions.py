"""Query expressions for the ORM side of the package (operator verbs on the models)."""

from __future__ import annotations

from typing import Any

from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.models import DateTimeField, Func
from django.db.models.sql.compiler import SQLCompiler

from .vendors import dialect_for


class DatabaseNow(Func):
    """The database clock, exactly as the runtime's statements read it (``Dialect.now``):
    a pause or a retry is timed like the leases and claims it interacts with, never by
    this process's clock. (Django's ``Now()`` reads MySQL's session time zone, and
    PostgreSQL's statement time instead of the transaction's.)"""

    output_field = DateTimeField()

    def as_sql(
        self,
        compiler: SQLCompiler,
        connection: BaseDatabaseWrapper,
        function: str | None = None,
        template: str | None = None,
        arg_joiner: str | None = None,
        **extra_context: Any,
    ) -> tuple[str, tuple[Any, ...]]:
        return dialect_for(connection).now, ()
