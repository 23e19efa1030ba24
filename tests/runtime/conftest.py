"""Fixtures of the runtime tests (real databases, real threads and worker processes)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from django.db import connection

from solid_objects.conf import get_settings
from solid_objects.runtime import processes
from solid_objects.sync import caller_cache
from tests.testapp.actors import core

from .helpers import WorkerProcesses


@pytest.fixture(autouse=True)
def _fresh_runtime() -> Iterator[None]:
    """Per-process runtime state must not leak between tests: flushed tables make a cached
    caller registration or warm activation point at rows that no longer exist."""

    def reset() -> None:
        caller_cache.clear()
        processes.callers.forget(get_settings().DATABASE)
        for event in core.holds.values():
            event.set()  # never leave a handler thread blocked
        core.holds.clear()
        core.entered.clear()

    reset()
    yield
    reset()


@pytest.fixture
def owner(db: None) -> str:
    """A registered worker process id, to lease activations under (like a worker would)."""
    return processes.register("worker", connection.alias)


@pytest.fixture
def second_owner(db: None) -> str:
    return processes.register("worker", connection.alias)


@pytest.fixture
def workers(tmp_path: Path) -> Iterator[WorkerProcesses]:
    """Worker subprocesses on the test database; killed at the end whatever happens."""
    started = WorkerProcesses(tmp_path)
    try:
        yield started
    finally:
        started.kill_all()
