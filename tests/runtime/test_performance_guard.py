"""A regression guard for throughput, not a benchmark (that is ``python -m bench``).

It compares, in the same test and on the same connection, grouped actor turns of one hot
actor with the raw single-row ``UPDATE`` commit loop, and fails only on a collapse far
below what the runtime reaches (a generous margin, so machine load cannot trip it): an
accidental extra round trip per turn, lost grouping, or per-turn state re-encoding shows up
here long before it reaches a release.
"""

from __future__ import annotations

import time

import pytest
from django.db import connection

from solid_objects.activation import ActivationCache
from solid_objects.lease import acquire
from solid_objects.passes import run_pass
from tests.testapp.actors.core import Counter

from .helpers import alias

pytestmark = pytest.mark.django_db(transaction=True)

#: ratio floor per vendor, far below what this test measures here: about 1.2 on
#: PostgreSQL, 1.1 on MariaDB and 0.35 on SQLite (whose raw loop needs no fsync in WAL mode).
FLOORS = {"postgresql": 0.25, "mysql": 0.2, "sqlite": 0.07}
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


def test_grouped_turns_keep_pace_with_the_raw_commit_loop(owner, record_property):
    ref = Counter.ref("perf-guard")
    first = ref.enqueue().add(1)
    for _ in range(TURNS - 1):
        ref.enqueue().add(1)
    cache = ActivationCache()
    raw = _raw_commit_rate()
    started = time.perf_counter()
    done = 0
    while done < TURNS:
        activation = acquire(alias(), owner, [first.instance_id], cache)
        assert activation is not None
        done += run_pass(activation, max_messages=TURNS, max_seconds=60, cache=cache).processed
    turns = TURNS / (time.perf_counter() - started)
    ratio = turns / raw
    record_property("grouped_turns_per_raw_commit", round(ratio, 3))
    assert ref.snapshot().value == TURNS
    assert ratio >= FLOORS[connection.vendor], (
        f"{turns:.0f} turns/s is {ratio:.1%} of the raw commit loop ({raw:.0f}/s)"
    )
