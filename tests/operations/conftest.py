"""Fixtures of the operations tests, also registered by tests/broadcasts and tests/wakeup."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.operations.support import Children, release_restrictive_references, reset_runtime


@pytest.fixture(autouse=True)
def _fresh_runtime(request: pytest.FixtureRequest) -> Iterator[None]:
    """Per-process runtime state must not leak between tests, and the flush after a test
    must not trip over the RESTRICT references to ``processes`` (its table order is
    arbitrary): leases and claims are cleared first (this fixture's teardown runs before
    the database's)."""
    uses_db = request.node.get_closest_marker("django_db") is not None
    if uses_db:
        request.getfixturevalue("db")
    reset_runtime()
    yield
    if uses_db:
        release_restrictive_references()
    reset_runtime()


@pytest.fixture
def children(tmp_path: Path) -> Iterator[Children]:
    """Command subprocesses on the test database, killed at the end whatever happens."""
    started = Children(tmp_path)
    try:
        yield started
    finally:
        started.kill_all()
