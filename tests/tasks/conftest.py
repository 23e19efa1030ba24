"""Fixtures of the django.tasks backend tests: a registered worker process and a way to run
due tasks in the test process the way a worker's actor role picks them (oldest due first)."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from django.db import connection

from solid_objects.conf import get_settings
from solid_objects.db.vendors import dialect_for
from solid_objects.lease import acquire
from solid_objects.passes import run_pass
from solid_objects.runtime import processes


@pytest.fixture
def owner(db: None) -> str:
    return processes.register("worker", connection.alias)


@pytest.fixture
def run_tasks(owner: str) -> Callable[..., int]:
    """``run_tasks()`` runs activation passes until nothing is due; returns the turns run."""

    def run(max_passes: int = 200) -> int:
        alias = get_settings().DATABASE
        dialect = dialect_for(connection)
        turns = 0
        for _ in range(max_passes):
            with connection.cursor() as cursor:
                candidates = list(dialect.due_instances(cursor, 50))
            if not candidates:
                return turns
            activation = acquire(alias, owner, candidates)
            if activation is None:
                return turns
            turns += run_pass(activation).processed
        raise AssertionError(f"tasks were still due after {max_passes} passes")

    return run
