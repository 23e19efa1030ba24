"""Fixtures of the soak: worker subprocesses that never outlive the test."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.runtime.helpers import WorkerProcesses


@pytest.fixture
def soak_workers(tmp_path: Path) -> Iterator[WorkerProcesses]:
    """Worker subprocesses on the test database; every one still running is killed at the
    end, whatever happened."""
    started = WorkerProcesses(tmp_path)
    try:
        yield started
    finally:
        started.kill_all()
