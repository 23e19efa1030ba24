"""A regression guard for the cost of a hot actor's drain, not a benchmark (that is
``python -m bench``, and no test here asserts on time: machine load would trip it).

It drains 600 turns of one hot actor through the worker's pass and fails when the
statements the drain sends per turn rise far above what grouped commits cost: an
accidental extra round trip per turn or lost grouping shows up here long before it reaches
a release. The throughput beside the raw single-row ``UPDATE`` commit loop is recorded as a
test property (``grouped_turns_per_raw_commit``) for the curious, never asserted.
"""

from __future__ import annotations

import time

import pytest
from django.db import connection

from solid_objects.activation import ActivationCache
from solid_objects.lease import acquire
from solid_objects.passes import run_pass
from tests.support.statements import count_statements
from tests.testapp.actors.core import Counter

from .helpers import alias

pytestmark = pytest.mark.django_db(transaction=True)

#: Statements per turn over the whole drain, per vendor: generous ceilings over what grouped
#: commits send (about 0.2 on PostgreSQL, 1 on MariaDB and SQLite; one commit per turn would
#: be 1 and 10 or more).
CEILINGS = {"postgresql": 0.6, "mysql": 2.5, "sqlite": 2.5}
TURNS = 600
RAW_COMMITS = 300


def _raw_commit_rate() -> float:
    with connection.cursor() as cursor:
        cursor.execute("CREATE TABLE perf_guard_raw (id INTEGER PRIMARY KEY, n BIGINT NOT NULL)")
        cursor.execute("INSERT INTO perf_guard_raw (id, n) VALUES (1, 0)")
    try:
        started = time.perf_counter()
        for _ in range(RAW_COMMITS):
            with connection.cursor() as cursor:
                cursor.execute("UPDATE perf_guard_raw SET n = n + 1 WHERE id = %s", [1])
        return RAW_COMMITS / (time.perf_counter() - started)
    finally:
        with connection.cursor() as cursor:
            cursor.execute("DROP TABLE perf_guard_raw")


def test_a_hot_drain_keeps_its_grouped_commits(owner, record_property):
    ref = Counter.ref("perf-guard")
    first = ref.enqueue().add(1)
    for _ in range(TURNS - 1):
        ref.enqueue().add(1)
    cache = ActivationCache()
    raw = _raw_commit_rate()
    started = time.perf_counter()
    done = 0

    def drain() -> None:
        nonlocal done
        while done < TURNS:
            activation = acquire(alias(), owner, [first.instance_id], cache)
            assert activation is not None
            done += run_pass(activation, max_messages=TURNS, max_seconds=60, cache=cache).processed

    statements = count_statements(drain)
    turns = TURNS / (time.perf_counter() - started)
    record_property("grouped_turns_per_raw_commit", round(turns / raw, 3))
    record_property("statements_per_grouped_turn", round(statements / TURNS, 3))
    assert ref.snapshot().value == TURNS
    assert statements / TURNS <= CEILINGS[connection.vendor], (
        f"{statements} statements for {TURNS} turns ({statements / TURNS:.2f} per turn)"
    )
