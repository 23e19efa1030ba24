"""Counting the SQL statements an operation sends.

Two views of the same traffic, because the suite pins both:

- :func:`count_statements`: what Django logs for one connection of the
  calling thread (:class:`~django.test.utils.CaptureQueriesContext`), transaction control
  included where the backend logs it (the pinned per-operation counts are in this unit);
  :func:`capturing_statements` is the same log for a ``with`` block, its SQL readable;
- :func:`counting_statements`: every statement any thread sends through Django's cursors
  (a supervisor's idle cost, where the work happens in other threads).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from django.db import connection as default_connection
from django.db.backends import utils as backend_utils
from django.db.backends.base.base import BaseDatabaseWrapper
from django.test.utils import CaptureQueriesContext

#: Statements of transaction control, which Django logs on some backends and not on others.
TRANSACTION_CONTROL = ("BEGIN", "COMMIT", "ROLLBACK", "SAVEPOINT", "RELEASE SAVEPOINT")


def capturing_statements(
    connection: BaseDatabaseWrapper | None = None,
) -> CaptureQueriesContext:
    """The statements Django logs on ``connection`` (the default one) in this thread inside
    the ``with`` block: ``len()`` counts them (BEGIN and COMMIT included where the backend
    logs them), ``captured_queries`` holds their SQL."""
    return CaptureQueriesContext(connection or default_connection)


def count_statements(
    function: Callable[[], Any], connection: BaseDatabaseWrapper | None = None
) -> int:
    """How many entries Django logs on ``connection`` (the default one) while ``function``
    runs in this thread, BEGIN and COMMIT included."""
    with capturing_statements(connection) as queries:
        function()
    return len(queries.captured_queries)


def without_transaction_control(queries: CaptureQueriesContext) -> list[str]:
    """The SQL a ``CaptureQueriesContext`` saw, without BEGIN, COMMIT, SAVEPOINT..."""
    return [
        q["sql"]
        for q in queries.captured_queries
        if not q["sql"].upper().startswith(TRANSACTION_CONTROL)
    ]


class StatementCounter:
    """Every statement sent through Django's cursors, from any thread, while it counts."""

    def __init__(self) -> None:
        self.count = 0
        #: (thread name, SQL) of every statement, in the order they were sent.
        self.statements: list[tuple[str, str]] = []
        self._lock = threading.Lock()

    def record(self, sql: str) -> None:
        with self._lock:
            self.count += 1
            self.statements.append((threading.current_thread().name, sql))


@contextmanager
def counting_statements() -> Iterator[StatementCounter]:
    """Count every statement of every thread and connection inside the ``with`` block."""
    counter = StatementCounter()
    original_execute = backend_utils.CursorWrapper.execute
    original_executemany = backend_utils.CursorWrapper.executemany

    def execute(self: Any, sql: str, params: Any = None) -> Any:
        counter.record(sql)
        return original_execute(self, sql, params)

    def executemany(self: Any, sql: str, param_list: Any) -> Any:
        counter.record(sql)
        return original_executemany(self, sql, param_list)

    backend_utils.CursorWrapper.execute = execute  # type: ignore[method-assign]
    backend_utils.CursorWrapper.executemany = executemany  # type: ignore[method-assign]
    try:
        yield counter
    finally:
        backend_utils.CursorWrapper.execute = original_execute  # type: ignore[method-assign]
        backend_utils.CursorWrapper.executemany = original_executemany  # type: ignore[method-assign]
