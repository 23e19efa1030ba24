"""``enqueue_many()``: many asynchronous messages in one transaction, with the validation,
typed errors and idempotency keys of a single enqueue."""

from __future__ import annotations

import random
import threading
from datetime import UTC, datetime, timedelta

import pytest
from django.db import connection, transaction

from solid_objects import (
    IdempotencyConflict,
    InvalidArguments,
    InvalidPayload,
    MailboxFull,
    PayloadTooLarge,
    UnknownOperation,
    enqueue_many,
)
from solid_objects.db.vendors import dialect_for
from solid_objects.models import Instance, Message, ReadyMessage
from tests.support.statements import capturing_statements
from tests.testapp.actors.core import Counter

from .helpers import drain, instance_of, start_thread

pytestmark = pytest.mark.django_db(transaction=True)


def assert_nothing_written() -> None:
    assert Instance.objects.count() == 0
    assert Message.objects.count() == 0
    assert ReadyMessage.objects.count() == 0


def test_many_actors_and_one_actor_in_one_batch(owner):
    refs = [Counter.ref(f"bulk-{n}") for n in range(5)]
    batch = [(ref, "add", {"amount": n + 1}) for n, ref in enumerate(refs)]
    batch += [(refs[0], "append", {"n": n}) for n in range(3)]
    sent = enqueue_many(batch)

    assert [m.actor_id for m in sent] == [r.actor_id for r in refs] + ["bulk-0"] * 3
    assert [m.sequence for m in sent] == [1, 1, 1, 1, 1, 2, 3, 4]
    assert Message.objects.count() == 8
    assert ReadyMessage.objects.count() == 8
    for ref in refs:
        drain(instance_of("tests.counter", ref.actor_id).id, owner)
    assert [ref.snapshot().value for ref in refs] == [1, 2, 3, 4, 5]
    assert refs[0].snapshot().seen == [0, 1, 2]


def test_one_commit_for_the_whole_batch():
    batch = [(Counter.ref(f"commit-{n}"), "add", {"amount": 1}) for n in range(20)]
    with capturing_statements() as queries:
        enqueue_many(batch)
    logged = [q["sql"].upper() for q in queries.captured_queries]
    # One transaction, no savepoint per message, fewer statements than twenty enqueues.
    assert logged.count("COMMIT") == 1
    assert not [sql for sql in logged if "SAVEPOINT" in sql]
    with capturing_statements() as single:
        Counter.ref("commit-single").enqueue().add(1)
    assert len(logged) < 20 * len(single.captured_queries)
    assert ReadyMessage.objects.count() == 21


def test_idempotency_keys_are_honoured_within_and_across_batches():
    ref = Counter.ref("keys")
    first = enqueue_many(
        [(ref.enqueue(idempotency_key="k1"), "add", {"amount": 1}), (ref, "add", {"amount": 2})]
    )
    again = enqueue_many(
        [
            (ref.enqueue(idempotency_key="k1"), "add", {"amount": 1}),
            (ref.enqueue(idempotency_key="k2"), "add", {"amount": 3}),
        ]
    )
    assert again[0].id == first[0].id
    assert Message.objects.filter(instance__actor_id="keys").count() == 3
    with pytest.raises(IdempotencyConflict):
        enqueue_many(
            [
                (Counter.ref("keys-other"), "add", {"amount": 1}),
                (ref.enqueue(idempotency_key="k1"), "add", {"amount": 99}),
            ]
        )
    # The conflicting batch wrote nothing, not even its first message.
    assert not Instance.objects.filter(actor_id="keys-other").exists()
    with pytest.raises(InvalidPayload):
        enqueue_many(
            [
                (ref.enqueue(idempotency_key="dup"), "add", {"amount": 1}),
                (ref.enqueue(idempotency_key="dup"), "add", {"amount": 1}),
            ]
        )


@pytest.mark.parametrize(
    ("bad", "error"),
    [
        ((Counter.ref("bad"), "no_such_operation", {}), UnknownOperation),
        ((Counter.ref("bad"), "add", {"nope": 1}), InvalidArguments),
        ((Counter.ref("bad"), "add", {"amount": object()}), InvalidPayload),
        (("not a reference", "add", {}), InvalidPayload),
        ((Counter.ref("bad"), "add"), InvalidPayload),
        ((Counter.ref("bad"), "add", [1]), InvalidPayload),
    ],
)
def test_one_bad_message_writes_nothing(bad, error):
    with pytest.raises(error):
        enqueue_many([(Counter.ref("good"), "add", {"amount": 1}), bad])
    assert_nothing_written()


def test_payload_and_mailbox_limits(solid_settings):
    solid_settings(MAX_PAYLOAD_BYTES=1000, MAX_MAILBOX_LENGTH=3)
    with pytest.raises(PayloadTooLarge):
        enqueue_many([(Counter.ref("big"), "append", {"n": "x" * 2000})])
    assert_nothing_written()
    ref = Counter.ref("full")
    with pytest.raises(MailboxFull):
        enqueue_many([(ref, "add", {"amount": 1})] * 4)
    assert_nothing_written()  # the whole batch rolled back
    enqueue_many([(ref, "add", {"amount": 1})] * 3)
    assert Message.objects.count() == 3


def test_available_at_and_the_callers_transaction():
    later = datetime.now(UTC) + timedelta(hours=1)
    with transaction.atomic():
        enqueue_many([(Counter.ref("later").enqueue(available_at=later), "add", {"amount": 1})])
        assert connection.in_atomic_block
        transaction.set_rollback(True)  # the caller's transaction rolls back: so does the batch
    assert_nothing_written()
    with transaction.atomic():
        (sent,) = enqueue_many(
            [(Counter.ref("later").enqueue(available_at=later), "add", {"amount": 1})]
        )
    stored = ReadyMessage.objects.get(message_id=sent.id)
    assert abs((stored.available_at - later).total_seconds()) < 1


def test_concurrent_batches_over_the_same_new_actors_keep_each_batchs_order():
    """Four batches at once, each over the same ten new actors in its own shuffled order:
    one instance per actor, every actor's sequences 1..n without a gap or a repeat, and
    within each batch an actor's messages in the batch's order."""
    threads, actors, per_actor = 4, 10, 5
    barrier = threading.Barrier(threads, timeout=60)

    def send(index: int):
        order = [n % actors for n in range(actors * per_actor)]
        random.Random(index).shuffle(order)

        def run():
            batch = [
                (Counter.ref(f"race-{n}"), "append", {"n": f"{index}:{k}"})
                for k, n in enumerate(order)
            ]
            barrier.wait()
            return enqueue_many(batch)

        return run

    workers = [start_thread(send(i), f"batch-{i}") for i in range(threads)]
    sent = [w.outcome() for w in workers]
    assert Instance.objects.filter(actor_id__startswith="race-").count() == actors
    for n in range(actors):
        stored = Message.objects.filter(actor_id=f"race-{n}").order_by("sequence")
        assert [m.sequence for m in stored] == list(range(1, threads * per_actor + 1))
        for index in range(threads):
            mine = [m.arguments["n"] for m in stored if m.arguments["n"].startswith(f"{index}:")]
            assert sorted(mine, key=lambda v: int(v.split(":")[1])) == mine
    assert ReadyMessage.objects.count() == threads * actors * per_actor
    assert sorted(m.id for batch in sent for m in batch) == sorted(
        Message.objects.values_list("id", flat=True)
    )


def test_a_full_mailbox_refuses_the_whole_batch_once_the_actor_is_crowded(solid_settings):
    solid_settings(MAX_MAILBOX_LENGTH=3)
    ref = Counter.ref("crowded")
    enqueue_many([(ref, "add", {"amount": 1})] * 2)
    with pytest.raises(MailboxFull):
        enqueue_many([(Counter.ref("crowded-other"), "add", {"amount": 1}), (ref, "add", {})] * 2)
    assert not Instance.objects.filter(actor_id="crowded-other").exists()
    assert Message.objects.count() == 2
    (third,) = enqueue_many([(ref, "add", {"amount": 1})])
    assert third.sequence == 3
    assert instance_of("tests.counter", "crowded").next_message_sequence == 4


@pytest.mark.db_vendor("mysql")
def test_without_insert_returning_the_ids_are_read_back(monkeypatch, owner):
    """MySQL has no ``INSERT ... RETURNING`` (MariaDB has): the batch reads the new ids back
    by request id, a single enqueue reads its sequence from the instance row."""
    monkeypatch.setattr(dialect_for(connection), "insert_returning", False)
    ref = Counter.ref("mysql")
    sent = enqueue_many([(ref, "add", {"amount": n}) for n in (1, 2, 3)])
    single = ref.enqueue().add(4)
    assert [m.sequence for m in sent] + [single.sequence] == [1, 2, 3, 4]
    stored = {m.id: m.sequence for m in Message.objects.all()}
    assert stored == {m.id: m.sequence for m in [*sent, single]}
    assert sorted(ReadyMessage.objects.values_list("message_id", flat=True)) == sorted(stored)
    drain(instance_of("tests.counter", "mysql").id, owner)
    assert ref.snapshot().value == 10


def test_a_batch_longer_than_one_statement_takes_keeps_every_actors_order():
    """More messages than one append statement takes: the chunks follow each other in the
    batch's transaction, each actor's sequences continuing from the chunk before."""
    size = dialect_for(connection).append_batch + 7
    refs = [Counter.ref(f"long-{n}") for n in range(3)]
    sent = enqueue_many([(refs[k % 3], "append", {"n": k}) for k in range(size)])
    assert [m.sequence for m in sent] == [k // 3 + 1 for k in range(size)]
    for n, ref in enumerate(refs):
        stored = Message.objects.filter(actor_id=ref.actor_id).order_by("sequence")
        assert [m.arguments["n"] for m in stored] == list(range(n, size, 3))
    assert ReadyMessage.objects.count() == size


def test_an_empty_batch_writes_nothing():
    assert enqueue_many([]) == []
    assert_nothing_written()
