"""A caller's warm activations are kept per shard: instance ids are numbered by each
database, so two actors on two shards may have the same id."""

from __future__ import annotations

import pytest
from django.db import connections

from solid_objects import database_for
from solid_objects.models import Instance
from tests.testapp.actors.core import Counter

SHARDS = ["default", "shard_b"]
pytestmark = pytest.mark.django_db(transaction=True, databases=SHARDS)


def on(alias: str, taken: set[str]) -> str:
    actor_id = next(
        f"s{n}"
        for n in range(10_000)
        if f"s{n}" not in taken and database_for("tests.counter", f"s{n}") == alias
    )
    taken.add(actor_id)
    return actor_id


def latest(alias: str) -> int:
    return Instance.objects.using(alias).order_by("-id").values_list("id", flat=True).first() or 0


def number_from(alias: str, next_id: int) -> None:
    """Make ``alias`` give its next instance the id ``next_id`` (each database keeps its own
    counter, far apart after other tests)."""
    connection = connections[alias]
    table = Instance._meta.db_table
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute(
                "SELECT setval(pg_get_serial_sequence(%s, 'id'), %s, false)", [table, next_id]
            )
        elif connection.vendor == "mysql":
            cursor.execute(
                f"ALTER TABLE {connection.ops.quote_name(table)} AUTO_INCREMENT = {next_id:d}"
            )
        else:
            cursor.execute("DELETE FROM sqlite_sequence WHERE name = %s", [table])
            cursor.execute(
                "INSERT INTO sqlite_sequence (name, seq) VALUES (%s, %s)", [table, next_id - 1]
            )


def test_sync_calls_to_actors_with_the_same_instance_id_on_two_shards(solid_settings):
    solid_settings(DATABASES=SHARDS)
    taken: set[str] = set()
    next_id = max(latest(alias) for alias in SHARDS) + 1_000
    for alias in SHARDS:
        number_from(alias, next_id)
    a, b = Counter.ref(on("default", taken)), Counter.ref(on("shard_b", taken))
    a.enqueue().add(amount=0)
    b.enqueue().add(amount=0)
    first = {
        alias: Instance.objects.using(alias).get(actor_id=ref.actor_id).id
        for alias, ref in (("default", a), ("shard_b", b))
    }
    assert first["default"] == first["shard_b"]  # what made a shared cache mix them up
    assert a.add(amount=1) == 1
    assert b.add(amount=10) == 10
    assert a.add(amount=1) == 2
    assert b.add(amount=1) == 11
    assert a.total() == 2 and b.total() == 11
    assert b.snapshot().state["value"] == 11
