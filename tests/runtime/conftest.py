"""Fixtures of the runtime tests (real databases, real threads and worker processes)."""

from __future__ import annotations

import pytest
from django.db import connection

from solid_objects.runtime import processes


@pytest.fixture
def owner(db: None) -> str:
    """A registered worker process id, to lease activations under (like a worker would)."""
    return processes.register("worker", connection.alias)


@pytest.fixture
def second_owner(db: None) -> str:
    return processes.register("worker", connection.alias)
