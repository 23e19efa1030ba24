"""Enqueue (§A3, §A4): concurrency of first use, the transactional outbox, idempotency keys
and input that must be refused before anything is written."""

from __future__ import annotations

import math
import threading
from datetime import UTC, datetime

import pytest
from django.db import connection, transaction

import solid_objects
from solid_objects import (
    IdempotencyConflict,
    InvalidPayload,
    MailboxFull,
    PayloadTooLarge,
    UnknownActorType,
    UnknownOperation,
)
from solid_objects.db.vendors import dialect_for
from solid_objects.mailbox import enqueue
from solid_objects.models import Instance, Message, ReadyMessage
from tests.testapp.actors.core import Counter

from .helpers import instance_of, start_thread

pytestmark = pytest.mark.django_db(transaction=True)


def assert_nothing_written() -> None:
    assert Instance.objects.count() == 0
    assert Message.objects.count() == 0
    assert ReadyMessage.objects.count() == 0


def test_concurrent_first_enqueues_create_one_instance():
    threads = 8
    barrier = threading.Barrier(threads, timeout=60)

    def send(index: int):
        def run():
            barrier.wait()
            return Counter.ref("racing").enqueue().append(index)

        return run

    workers = [start_thread(send(i), f"enqueue-{i}") for i in range(threads)]
    references = [w.outcome() for w in workers]

    instances = Instance.objects.filter(actor_type="tests.counter", actor_id="racing")
    assert instances.count() == 1
    instance = instances.get()
    assert instance.next_message_sequence == threads + 1
    sequences = sorted(m.sequence for m in references)
    assert sequences == list(range(1, threads + 1))
    stored = Message.objects.filter(instance=instance).order_by("sequence")
    assert [m.sequence for m in stored] == sequences
    assert sorted(m.arguments["n"] for m in stored) == list(range(threads))
    assert {m.id for m in references} == {m.id for m in stored}
    assert {m.instance_id for m in references} == {instance.id}
    assert ReadyMessage.objects.filter(instance=instance).count() == threads


def test_first_enqueues_racing_inside_outer_atomic_blocks_do_not_deadlock():
    """Two callers, each inside its own ``transaction.atomic()``, create the same new actor
    at the same moment (no deadlock retry is possible inside an outer transaction)."""
    rounds = 10
    for round_ in range(rounds):
        barrier = threading.Barrier(2, timeout=60)
        actor_id = f"outer-{round_}"

        def send(index: int, actor_id: str = actor_id, barrier: threading.Barrier = barrier):
            def run():
                barrier.wait()
                with transaction.atomic():
                    reference = Counter.ref(actor_id).enqueue().append(index)
                    # Another write of the caller's own transaction after the enqueue.
                    Counter.ref(f"{actor_id}-side-{index}").enqueue().append(index)
                return reference

            return run

        pair = [start_thread(send(i), f"outer-{i}") for i in range(2)]
        references = [w.outcome() for w in pair]
        assert sorted(r.sequence for r in references) == [1, 2]
        assert Message.objects.filter(actor_id=actor_id).count() == 2
    assert Instance.objects.filter(actor_id__startswith="outer-").count() == rounds * 3


def test_enqueue_inside_atomic_rolls_back_with_the_caller():
    with pytest.raises(RuntimeError), transaction.atomic():
        reference = Counter.ref("outbox").enqueue().add(1)
        assert Message.objects.filter(id=reference.id).exists()  # visible inside
        raise RuntimeError("caller fails")
    assert_nothing_written()


def test_enqueue_inside_atomic_commits_with_the_caller():
    with transaction.atomic():
        reference = Counter.ref("outbox").enqueue().add(1)
        # Not committed yet: another connection does not see it.
        seen_elsewhere = start_thread(
            lambda: Message.objects.filter(id=reference.id).exists()
        ).outcome()
        if connection.vendor != "sqlite":  # SQLite's IMMEDIATE writer blocks readers' view less
            assert seen_elsewhere is False
    assert Message.objects.filter(id=reference.id).count() == 1
    assert ReadyMessage.objects.filter(message_id=reference.id).count() == 1
    assert reference.status() == "ready"


def test_enqueue_outside_a_transaction_commits_at_once():
    reference = Counter.ref("now").enqueue().add(2)
    assert start_thread(lambda: Message.objects.filter(id=reference.id).exists()).outcome()
    assert reference.sequence == 1
    assert reference.status() == "ready"


def test_idempotent_enqueue_returns_the_same_message():
    ref = Counter.ref("idem")
    first = ref.enqueue(idempotency_key="req-1").add(5)
    again = ref.enqueue(idempotency_key="req-1").add(amount=5)  # keyword = same stored form
    assert again == first
    assert Message.objects.count() == 1
    assert ref.find_message("req-1") == first
    assert ref.find_message("other") is None
    # The same key on another actor is another message.
    other = Counter.ref("idem-2").enqueue(idempotency_key="req-1").add(5)
    assert other.id != first.id


@pytest.mark.parametrize(
    ("call", "fields"),
    [
        (lambda ref: ref.enqueue(idempotency_key="req-1").add(6), ["arguments"]),
        (lambda ref: ref.enqueue(idempotency_key="req-1").append(5), ["operation", "arguments"]),
    ],
    ids=["other-arguments", "other-operation"],
)
def test_idempotency_key_reused_differently_conflicts(call, fields):
    ref = Counter.ref("idem")
    ref.enqueue(idempotency_key="req-1").add(5)
    before = list(Message.objects.values_list("id", "sequence"))
    with pytest.raises(IdempotencyConflict) as error:
        call(ref)
    assert error.value.fields == fields
    assert list(Message.objects.values_list("id", "sequence")) == before
    assert instance_of("tests.counter", "idem").next_message_sequence == 2


def test_idempotency_key_of_a_sync_message_conflicts_with_enqueue():
    ref = Counter.ref("idem-mode")
    assert ref.sync(idempotency_key="k").add(1) == 1
    with pytest.raises(IdempotencyConflict) as error:
        ref.enqueue(idempotency_key="k").add(1)
    assert error.value.fields == ["delivery_mode"]
    # ...while repeating the sync call returns the durable result without running it again.
    assert ref.sync(idempotency_key="k").add(1) == 1
    assert ref.snapshot().value == 1


def _deep(levels: int):
    value: object = "bottom"
    for _ in range(levels):
        value = [value]
    return value


@pytest.mark.parametrize(
    "argument",
    [
        {1, 2},
        float("nan"),
        math.inf,
        -math.inf,
        datetime(2024, 1, 1, tzinfo=UTC),
        {1: "non-string key"},
        {"nested": {(1, 2): "tuple key"}},
        _deep(150),
        object(),
        b"bytes",
    ],
    ids=[
        "set",
        "nan",
        "inf",
        "-inf",
        "datetime",
        "int-key",
        "tuple-key",
        "too-deep",
        "object",
        "bytes",
    ],
)
def test_non_json_arguments_are_refused_before_anything_is_written(argument):
    with pytest.raises(InvalidPayload):
        Counter.ref("bad").enqueue().append(argument)
    with pytest.raises(InvalidPayload):
        Counter.ref("bad").append(argument)  # a sync call validates before writing too
    assert_nothing_written()


def test_nesting_limit_is_exact():
    """Over 100 levels is refused; the database's own limit applies where it is lower
    (MariaDB's JSON columns take 31 levels at most)."""
    limit = dialect_for(connection).json_max_depth
    assert limit == (31 if connection.vendor == "mysql" and connection.mysql_is_mariadb else 100)
    with pytest.raises(InvalidPayload):
        Counter.ref("deep").enqueue().append(_deep(limit))  # + the arguments object
    assert_nothing_written()
    Counter.ref("deep").enqueue().append(_deep(limit - 1))
    assert Message.objects.count() == 1


def test_oversized_payload_is_refused(solid_settings):
    solid_settings(MAX_PAYLOAD_BYTES=1000)
    with pytest.raises(PayloadTooLarge):
        Counter.ref("big").enqueue().append("x" * 2000)
    with pytest.raises(PayloadTooLarge):
        Counter.ref("big").append("é" * 600)  # counted in UTF-8 bytes
    assert_nothing_written()
    Counter.ref("big").enqueue().append("x" * 900)
    assert Message.objects.count() == 1


def test_full_mailbox_is_refused(solid_settings):
    solid_settings(MAX_MAILBOX_LENGTH=3)
    ref = Counter.ref("full")
    sent = [ref.enqueue().add(1) for _ in range(3)]
    with pytest.raises(MailboxFull):
        ref.enqueue().add(1)
    with pytest.raises(MailboxFull):
        ref.add(1)  # sync calls go through the same mailbox
    instance = instance_of("tests.counter", "full")
    assert instance.next_message_sequence == 4  # the refused enqueues took no sequence
    assert [m.id for m in Message.objects.order_by("sequence")] == [m.id for m in sent]
    # Another actor is not affected.
    Counter.ref("not-full").enqueue().add(1)


def test_unknown_operation_is_refused():
    ref = Counter.ref("ops")
    with pytest.raises(UnknownOperation):
        ref.enqueue().no_such_operation(1)
    with pytest.raises(UnknownOperation):
        ref.no_such_operation()
    with pytest.raises(AttributeError):  # private names are never operations
        solid_objects.ref("tests.counter", "ops").enqueue()._private  # noqa: B018
    with pytest.raises(UnknownOperation):
        enqueue(Counter._spec, "ops", "no_such_operation", {})
    with pytest.raises(UnknownOperation):
        enqueue(Counter._spec, "ops", "on_activate", {})  # lifecycle hooks are not messages
    with pytest.raises(TypeError):
        ref.enqueue().add(1, 2, 3)  # wrong arguments for the operation
    assert_nothing_written()


def test_unknown_actor_type_is_refused():
    with pytest.raises(UnknownActorType):
        solid_objects.ref("tests.no_such_actor", "x")
    with pytest.raises(UnknownActorType):
        solid_objects.ref("", "x")
    assert_nothing_written()


@pytest.mark.parametrize("actor_id", ["", "x" * 192, None, 7])
def test_invalid_actor_ids_are_refused(actor_id):
    with pytest.raises(InvalidPayload):
        solid_objects.ref("tests.counter", actor_id).enqueue().add(1)
    assert_nothing_written()


def test_invalid_idempotency_key_and_available_at_are_refused():
    ref = Counter.ref("keys")
    with pytest.raises(InvalidPayload):
        ref.enqueue(idempotency_key="k" * 192).add(1)
    with pytest.raises(InvalidPayload):
        ref.enqueue(available_at=datetime(2030, 1, 1)).add(1)  # naive
    assert_nothing_written()
