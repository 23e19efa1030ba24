"""What docs/scaling.md tells users about transactions and batches over shards, done as it
says: ``enqueue_many`` commits per shard (idempotency keys make the whole call safe to
repeat), an enqueue after the commit (``transaction.on_commit``) or in a transaction on the
actor's own shard works, a batch inside another shard's transaction writes nothing."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Group
from django.db import transaction

from solid_objects import CrossShardTransaction, MailboxFull, database_for, enqueue_many
from solid_objects.models import Message
from solid_objects.testing import drain
from tests.testapp.actors.core import Counter

SHARDS = ["default", "shard_b"]
pytestmark = pytest.mark.django_db(transaction=True, databases=SHARDS)


@pytest.fixture
def sharded(solid_settings):
    solid_settings(DATABASES=SHARDS)
    return solid_settings


def one_on(alias: str, prefix: str) -> str:
    return next(
        f"{prefix}{n}" for n in range(200) if database_for("tests.counter", f"{prefix}{n}") == alias
    )


def test_enqueue_many_commits_per_shard_and_a_repeat_with_keys_completes_it(sharded):
    on_a, on_b = one_on("default", "a"), one_on("shard_b", "b")
    sharded(DATABASES=SHARDS, MAX_MAILBOX_LENGTH=1)
    Counter.ref(on_b).enqueue().add(amount=100)  # shard_b's actor is full
    batch = [
        (Counter.ref(on_a).enqueue(idempotency_key="batch-1:a"), "add", {"amount": 1}),
        (Counter.ref(on_b).enqueue(idempotency_key="batch-1:b"), "add", {"amount": 2}),
    ]
    with pytest.raises(MailboxFull):
        enqueue_many(batch)
    # The first shard's transaction had committed; the second wrote nothing.
    assert Message.objects.using("default").filter(idempotency_key="batch-1:a").count() == 1
    assert not Message.objects.using("shard_b").filter(idempotency_key="batch-1:b").exists()

    sharded(DATABASES=SHARDS, MAX_MAILBOX_LENGTH=10)
    refs = enqueue_many(batch)  # the same call again: the key finds what was committed
    assert Message.objects.using("default").filter(idempotency_key="batch-1:a").count() == 1
    assert Message.objects.using("shard_b").filter(idempotency_key="batch-1:b").count() == 1
    drain()
    assert [ref.result() for ref in refs] == [1, 102]


def test_a_batch_inside_another_shards_transaction_writes_nothing(sharded):
    on_a, on_b = one_on("default", "a"), one_on("shard_b", "b")
    with pytest.raises(CrossShardTransaction), transaction.atomic():
        enqueue_many([(Counter.ref(on_a), "add", {"amount": 1}), (Counter.ref(on_b), "add", {})])
    assert not Message.objects.using("default").exists()
    assert not Message.objects.using("shard_b").exists()


def test_enqueue_after_the_commit_or_on_the_actors_own_shard(sharded):
    on_b = one_on("shard_b", "b")
    with transaction.atomic():  # your writes on another alias
        Group.objects.create(name="order-7")
        transaction.on_commit(
            lambda: Counter.ref(on_b).enqueue(idempotency_key="order:7").add(amount=7)
        )
        assert not Message.objects.using("shard_b").exists()  # not before the commit
    assert Message.objects.using("shard_b").filter(idempotency_key="order:7").count() == 1

    with transaction.atomic(using=database_for("tests.counter", on_b)):
        Counter.ref(on_b).enqueue().add(amount=1)  # joins: rolls back with the transaction
        transaction.set_rollback(True, using="shard_b")
    assert Message.objects.using("shard_b").count() == 1
    drain()
    assert Counter.ref(on_b).snapshot().value == 7


def test_a_transaction_on_an_alias_without_actors_is_refused(solid_settings):
    """Actors only on ``shard_b``: an enqueue inside a transaction on ``default`` (the
    project's own data) could not roll back with it, so it is refused, as documented."""
    solid_settings(DATABASES=["shard_b"])
    with pytest.raises(CrossShardTransaction) as raised, transaction.atomic():
        Counter.ref("elsewhere").enqueue().add(amount=1)
    assert (raised.value.alias, raised.value.caller_alias) == ("shard_b", "default")
    assert not Message.objects.using("shard_b").exists()
    Counter.ref("elsewhere").enqueue().add(amount=1)  # after the commit: fine
    assert Message.objects.using("shard_b").filter(actor_id="elsewhere").count() == 1


def test_without_databases_a_transaction_elsewhere_is_not_refused(solid_settings):
    """One ``DATABASE`` that is not the transaction's: the documented behaviour of
    actors.md, unchanged (the message commits on its own)."""
    solid_settings(DATABASE="shard_b")
    with transaction.atomic():
        Counter.ref("elsewhere").enqueue().add(amount=1)
        transaction.set_rollback(True)
    assert Message.objects.using("shard_b").filter(actor_id="elsewhere").count() == 1
