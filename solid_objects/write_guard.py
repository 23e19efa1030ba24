"""Refuse database writes from actor handler code.

A handler's direct ORM write could commit even though the turn later fails or is fenced
out. While user code runs, every connection of the thread gets an execute wrapper that
raises :class:`ApplicationWriteForbidden` for any statement that writes or locks.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from typing import Any

from django.db import connections

from .errors import ApplicationWriteForbidden

_WRITE = re.compile(
    r"^\s*(?:WITH\b.*?\b)?(INSERT|UPDATE|DELETE|REPLACE|MERGE|UPSERT|CREATE|ALTER|DROP|"
    r"TRUNCATE|GRANT|REVOKE|LOCK|CALL|COPY)\b|\bFOR\s+(?:NO\s+KEY\s+)?UPDATE\b|\bFOR\s+SHARE\b",
    re.IGNORECASE | re.DOTALL,
)

_state = threading.local()


def inside_turn() -> bool:
    """True while this thread runs actor handler code."""
    return getattr(_state, "depth", 0) > 0


def _guard(
    execute: Callable[..., Any], sql: str, params: Any, many: bool, context: dict[str, Any]
) -> Any:
    if _WRITE.search(sql):
        _state.violated = True
        raise ApplicationWriteForbidden(
            "actor handlers must not write to the database directly; use "
            "self.commit_action(...) for writes that commit with the turn or self.emit(...) "
            "for external effects"
        )
    return execute(sql, params, many, context)


@contextmanager
def handler_code() -> Iterator[None]:
    """Run the enclosed block as user actor code: database writes are refused."""
    _state.depth = getattr(_state, "depth", 0) + 1
    _state.violated = False
    with ExitStack() as stack:
        for alias in connections:
            stack.enter_context(connections[alias].execute_wrapper(_guard))
        try:
            yield
        finally:
            _state.depth -= 1


@contextmanager
def application_code() -> Iterator[None]:
    """Inside :func:`handler_code`, run the enclosed block as ordinary application code: its
    writes are allowed and it may call actors. The ``django.tasks`` backend runs task
    functions this way (a task, unlike a turn, writes outside any fenced commit and is
    retried as a whole; see ``docs/tasks.md``)."""
    depth = getattr(_state, "depth", 0)
    _state.depth = 0
    saved: list[tuple[list[Any], list[Any]]] = []
    for alias in connections:
        wrappers = connections[alias].execute_wrappers
        saved.append((wrappers, list(wrappers)))
        wrappers[:] = [wrapper for wrapper in wrappers if wrapper is not _guard]
    try:
        yield
    finally:
        for wrappers, before in saved:
            wrappers[:] = before
        _state.depth = depth
        _state.violated = False


def write_was_attempted() -> bool:
    """Whether the last :func:`handler_code` block tried a write (even if it caught the error)."""
    return bool(getattr(_state, "violated", False))
