"""Fixtures shared by the whole suite. Keep this file generic and small: fixtures for one
feature live next to its tests (``tests/<area>/conftest.py``).

Model factories are in :mod:`tests.factories`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from django.db import connection, connections

from solid_objects.conf import get_settings, table

# db_vendor marker (run a test on some databases only; deselected, not skipped, elsewhere)
# for plain `pytest` runs too; make/tox also pass `-p tests.plugins.fail_on_skip`.
pytest_plugins = ["tests.plugins.fail_on_skip"]

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


def empty_solid_objects_tables() -> None:
    """Delete every ``solid_objects`` row with plain SQL, children first."""
    database = connections[get_settings().DATABASE]
    with database.cursor() as cursor:
        for name in SOLID_OBJECTS_DELETE_ORDER:
            cursor.execute(f"DELETE FROM {database.ops.quote_name(table(name))}")


@pytest.fixture(autouse=True)
def _forget_process_local_runtime_state() -> Iterator[None]:
    """Each test starts without this process's cached caller registration and warm
    activations: tables are emptied between tests, so both would point at deleted rows."""
    from solid_objects.runtime.processes import callers
    from solid_objects.sync import caller_cache

    yield
    caller_cache.clear()
    for alias in connections:
        callers.forget(alias)
