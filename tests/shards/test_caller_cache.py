"""A caller's warm activations are kept per shard: instance ids are numbered by each
database, so the first actor of each shard has the same id."""

from __future__ import annotations

import pytest

from solid_objects import database_for
from solid_objects.models import Instance
from tests.testapp.actors.core import Counter

SHARDS = ["default", "shard_b"]
pytestmark = pytest.mark.django_db(transaction=True, reset_sequences=True, databases=SHARDS)


def test_sync_calls_to_actors_with_the_same_instance_id_on_two_shards(solid_settings):
    solid_settings(DATABASES=SHARDS)
    ids = {}
    for n in range(400):
        ids.setdefault(database_for("tests.counter", f"s{n}"), f"s{n}")
    a, b = Counter.ref(ids["default"]), Counter.ref(ids["shard_b"])
    assert a.add(amount=1) == 1
    assert b.add(amount=10) == 10
    first = {alias: Instance.objects.using(alias).get().id for alias in SHARDS}
    assert first["default"] == first["shard_b"]  # what made a shared cache mix them up
    assert a.add(amount=1) == 2
    assert b.add(amount=1) == 11
    assert a.total() == 2 and b.total() == 11
    assert b.snapshot().state["value"] == 11
