"""Shards (PRODUCT §A18): every identity lives on one alias of ``SOLID_OBJECTS["DATABASES"]``,
chosen by rendezvous hashing, and the public calls route there by themselves."""

from __future__ import annotations

import hashlib

import pytest
from django.db import connections, transaction

from solid_objects import (
    CrossShardTransaction,
    InvalidPayload,
    SyncInsideTransaction,
    database_for,
    enqueue_many,
)
from solid_objects.models import Instance, Message
from solid_objects.shards import choose, score
from solid_objects.testing import drain
from tests.testapp.actors.core import Counter
from tests.testapp.actors.outbox import Messenger

SHARDS = ["default", "shard_b"]
pytestmark = pytest.mark.django_db(transaction=True, databases=SHARDS)


@pytest.fixture
def sharded(solid_settings):
    solid_settings(DATABASES=SHARDS)


def ids_on(alias: str, count: int, actor_type: str = "tests.counter") -> list[str]:
    """The first ``count`` ids ``c0, c1, ...`` whose actors live on ``alias``."""
    found = [f"c{n}" for n in range(200) if database_for(actor_type, f"c{n}") == alias]
    assert len(found) >= count
    return found[:count]


def instances_on(alias: str) -> set[str]:
    return set(Instance.objects.using(alias).values_list("actor_id", flat=True))


def reference_score(alias: str, actor_type: str, actor_id: str) -> int:
    """The documented formula (docs/scaling.md), written again independently."""
    data = b"solid-objects/shard/v1\x00" + b"\x00".join(
        part.encode() for part in (alias, actor_type, actor_id)
    )
    return int.from_bytes(hashlib.sha256(data).digest()[:8], "big")


def test_the_hash_is_pinned():
    """The formula is a contract across processes, hosts and versions: these never change."""
    three = ["actors_a", "actors_b", "actors_c"]
    assert score("actors_a", "cart", "alice") == 0xF5FA6BA7DB882FE1
    assert score("actors_a", "solid_objects.task", "q:default:1") == 0x83E64452F88F183B
    assert choose(three, "cart", "alice") == "actors_a"
    assert choose(three, "cart", "bob") == "actors_b"
    assert choose(three, "tests.counter", "c1") == "actors_a"
    assert choose(three, "solid_objects.task", "q:default:1") == "actors_b"
    for n in range(200):
        actor_id = f"id-{n}-é"
        assert score("x", "t", actor_id) == reference_score("x", "t", actor_id)
        assert choose(three, "t", actor_id) == max(
            three, key=lambda alias: reference_score(alias, "t", actor_id)
        )


def test_unsharded_everything_is_on_database():
    assert database_for("tests.counter", "anything") == "default"


def test_identities_spread_over_both_shards_and_adding_one_moves_only_its_share(sharded):
    homes = [database_for("tests.counter", f"id{n}") for n in range(2000)]
    share = homes.count("shard_b") / len(homes)
    assert 0.45 < share < 0.55
    three = ["default", "shard_b", "shard_c"]
    moved = [n for n in range(2000) if choose(three, "tests.counter", f"id{n}") != homes[n]]
    # Only identities the new alias wins move, and they all move to it.
    assert all(choose(three, "tests.counter", f"id{n}") == "shard_c" for n in moved)
    assert 0.28 < len(moved) / 2000 < 0.39


def test_enqueue_sync_snapshot_find_and_destroy_route_to_the_shard(sharded):
    on_a, on_b = ids_on("default", 3), ids_on("shard_b", 3)
    for actor_id in on_a + on_b:
        Counter.ref(actor_id).enqueue(idempotency_key=f"k-{actor_id}").add(amount=2)
    assert instances_on("default") == set(on_a)
    assert instances_on("shard_b") == set(on_b)
    drain()
    for actor_id in on_a + on_b:
        assert Counter.ref(actor_id).snapshot().state["value"] == 2
        assert Counter.ref(actor_id).add(amount=1) == 3  # a sync call
        found = Counter.ref(actor_id).find_message(f"k-{actor_id}")
        assert found is not None
        assert found.result() == 2
    assert Counter.ref(on_b[0]).destroy() is True
    assert instances_on("shard_b") == set(on_b[1:])
    assert instances_on("default") == set(on_a)


def test_actor_messages_cross_shards_through_the_outbox_once(sharded):
    sender = ids_on("default", 1, "tests.messenger")[0]
    target = ids_on("shard_b", 1, "tests.messenger")[0]
    Messenger.ref(sender).tell(target=target, text="hello")
    drain()
    assert [m["text"] for m in Messenger.ref(target).heard()] == ["hello"]
    assert Message.objects.using("shard_b").filter(operation="hear").count() == 1
    assert not Message.objects.using("default").filter(operation="hear").exists()
    # The other way round too.
    Messenger.ref(target).tell(target=sender, text="back")
    drain()
    assert [m["text"] for m in Messenger.ref(sender).heard()] == ["back"]


def test_an_enqueue_inside_another_shards_transaction_is_refused(sharded):
    on_b = ids_on("shard_b", 1)[0]
    on_a = ids_on("default", 1)[0]
    with pytest.raises(CrossShardTransaction) as raised, transaction.atomic():
        Counter.ref(on_b).enqueue().add(amount=1)
    assert (raised.value.alias, raised.value.caller_alias) == ("shard_b", "default")
    assert not Message.objects.using("shard_b").exists()
    with transaction.atomic():  # the actor's own shard joins the caller's transaction
        Counter.ref(on_a).enqueue().add(amount=1)
        transaction.set_rollback(True)
    assert not Message.objects.using("default").exists()
    with transaction.atomic(using="shard_b"):
        Counter.ref(on_b).enqueue().add(amount=1)
        transaction.set_rollback(True, using="shard_b")
    assert not Message.objects.using("shard_b").exists()


def test_enqueue_many_writes_each_shard_and_checks_every_message_first(sharded):
    on_a, on_b = ids_on("default", 2), ids_on("shard_b", 2)
    with pytest.raises(InvalidPayload):
        enqueue_many(
            [
                (Counter.ref(on_a[0]), "add", {"amount": 1}),
                (Counter.ref(on_b[0]), "add", {"amount": 1}),
                (Counter.ref(on_b[1]), "add", {"amount": float("nan")}),
            ]
        )
    assert not Message.objects.using("default").exists()
    assert not Message.objects.using("shard_b").exists()
    refs = enqueue_many(
        [(Counter.ref(actor_id), "add", {"amount": n}) for n, actor_id in enumerate(on_a + on_b)]
    )
    assert [ref.actor_id for ref in refs] == on_a + on_b
    assert Message.objects.using("default").count() == 2
    assert Message.objects.using("shard_b").count() == 2
    drain()
    assert [ref.result() for ref in refs] == [0, 1, 2, 3]


def test_connections_are_distinct_databases():
    names = {connections[alias].settings_dict["NAME"] for alias in SHARDS}
    assert len(names) == 2


def test_a_sync_call_inside_another_shards_transaction_is_refused(sharded):
    on_b = ids_on("shard_b", 1)[0]
    with pytest.raises(SyncInsideTransaction), transaction.atomic():
        Counter.ref(on_b).add(amount=1)
    assert not Message.objects.using("shard_b").exists()
    assert not Instance.objects.using("shard_b").exists()


def test_recording_actors_off_the_journals_shard_are_told_so(solid_settings, settings):
    from django.core.checks import INFO, run_checks

    solid_settings(DATABASES=SHARDS)
    settings.TILTTEK_ACTIVITY = {"DATABASE": "default"}
    infos = [m for m in run_checks() if m.id == "solid_objects.I001"]
    assert len(infos) == 1
    assert infos[0].level == INFO
    assert "'shard_b'" in infos[0].msg
    assert "those on 'shard_b' reach" in infos[0].msg


def test_a_bad_shard_list_fails_the_system_checks(solid_settings):
    from solid_objects.checks import check_settings

    for value, text in [
        ("default", "non-empty list"),
        ([], "non-empty list"),
        (["default", "default"], "twice"),
        (["default", "nowhere"], "'nowhere'"),
    ]:
        solid_settings(DATABASES=value)
        errors = [m for m in check_settings() if m.id == "solid_objects.E015"]
        assert len(errors) == 1, value
        assert text in errors[0].msg
