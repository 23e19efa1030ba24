"""Fixtures shared by the whole suite. Keep this file generic and small: fixtures for one
feature live next to its tests (``tests/<area>/conftest.py``).

Model factories are in :mod:`tests.factories`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from django.db import connection

from tests.support.processes import Commands
from tests.support.state import reset_runtime_state

# db_vendor marker (run a test on some databases only; deselected, not skipped, elsewhere)
# for plain `pytest` runs too; make/tox also pass `-p tests.plugins.fail_on_skip`.
pytest_plugins = ["tests.plugins.fail_on_skip", "solid_objects.pytest_plugin"]

# Children before parents: no delete depends on a cascade or hits a RESTRICT rule. Tests need
# no help to end: Django's flush deletes every table, in any order, while leases and claims are
# held (on SQLite the RESTRICT rules are checked at commit, migration 0003).
SOLID_OBJECTS_DELETE_ORDER = (
    "claimed_messages",
    "ready_messages",
    "effects",
    "broadcasts",
    "dead_letters",
    "reminders",
    "messages",
    "instances",
    "processes",
    "rate_limits",
    "shard_agreement",
)


@pytest.fixture
def vendor() -> str:
    """Django's vendor name of the default database: sqlite, postgresql or mysql."""
    return connection.vendor


@pytest.fixture
def solid_settings(settings: Any) -> Callable[..., dict[str, Any]]:
    """Override some ``SOLID_OBJECTS`` keys for one test, keeping the others::

    def test_x(solid_settings):
        solid_settings(MAX_ATTEMPTS=2)
    """

    def override(**values: Any) -> dict[str, Any]:
        settings.SOLID_OBJECTS = {**getattr(settings, "SOLID_OBJECTS", {}), **values}
        return settings.SOLID_OBJECTS

    return override


@pytest.fixture(autouse=True)
def _fresh_runtime_state() -> Iterator[None]:
    """Each test starts and ends without this process's cached caller registrations, warm
    activations or blocked test handlers (tables are emptied between tests)."""
    reset_runtime_state()
    yield
    reset_runtime_state()


@pytest.fixture
def commands(tmp_path: Path) -> Iterator[Commands]:
    """``tests/manage.py`` commands in subprocesses on the test database; every one still
    running is killed at the end, whatever happened."""
    started = Commands(tmp_path)
    try:
        yield started
    finally:
        started.kill_all()
