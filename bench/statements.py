"""Count every statement a process sends, on every connection of every thread.

Counted as Django logs them (``BEGIN``/``COMMIT``/``ROLLBACK`` included, as in
``tests/runtime/test_statements.py``), by wrapping the cursor methods and Django's
transaction hook once per process. The benchmark installs it in its own process; worker and
caller processes install it from :class:`bench.apps.BenchConfig` when
``BENCH_STATEMENTS_DIR`` is set and write their total to ``<dir>/<pid>.json`` at exit.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

_lock = threading.Lock()
_total = 0
_installed = False


def count() -> int:
    """Statements sent by this process since :func:`install`."""
    with _lock:
        return _total


def _tick() -> None:
    global _total
    with _lock:
        _total += 1


def install() -> None:
    global _installed
    if _installed:
        return
    _installed = True
    from django.db.backends import utils
    from django.db.backends.base import base

    execute = utils.CursorWrapper.execute
    executemany = utils.CursorWrapper.executemany
    callproc = utils.CursorWrapper.callproc
    transaction_hook = base.debug_transaction

    def counted_execute(self: Any, sql: Any, params: Any = None) -> Any:
        _tick()
        return execute(self, sql, params)

    def counted_executemany(self: Any, sql: Any, param_list: Any) -> Any:
        _tick()
        return executemany(self, sql, param_list)

    def counted_callproc(self: Any, *args: Any, **kwargs: Any) -> Any:
        _tick()
        return callproc(self, *args, **kwargs)

    @contextlib.contextmanager
    def counted_transaction(connection: Any, sql: str) -> Iterator[None]:
        _tick()
        with transaction_hook(connection, sql):
            yield

    utils.CursorWrapper.execute = counted_execute  # type: ignore[method-assign]
    utils.CursorWrapper.executemany = counted_executemany  # type: ignore[method-assign]
    utils.CursorWrapper.callproc = counted_callproc  # type: ignore[method-assign]
    base.debug_transaction = counted_transaction  # type: ignore[assignment]


def install_from_environment() -> None:
    folder = os.environ.get("BENCH_STATEMENTS_DIR")
    if not folder:
        return
    install()
    path = Path(folder) / f"{os.getpid()}.json"

    def write() -> None:
        path.write_text(json.dumps({"pid": os.getpid(), "statements": count()}))

    atexit.register(write)


def collect(folder: Path) -> int:
    """The statements every process that wrote into ``folder`` sent (all of them exited)."""
    return sum(int(json.loads(p.read_text())["statements"]) for p in folder.glob("*.json"))
