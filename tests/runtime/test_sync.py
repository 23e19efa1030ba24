"""Synchronous calls (§A3): caller-assisted, no worker needed; timeouts never cancel the
durable message; never inside the caller's transaction; rejections are returned, not retried."""

from __future__ import annotations

import threading

import pytest
from django.db import transaction

from solid_objects import (
    MessageFailed,
    Rejected,
    SyncInsideTransaction,
    SyncTimeout,
)
from solid_objects.models import ClaimedMessage, DeadLetter, Instance, Message, ReadyMessage
from tests.testapp.actors import core
from tests.testapp.actors.core import Blocker, Counter
from tests.testapp.actors.runtime_tests import Caller

from .helpers import instance_of, membership, run_once, start_thread

pytestmark = pytest.mark.django_db(transaction=True)


def test_sync_call_needs_no_worker():
    ref = Counter.ref("alice")
    assert ref.add(2) == 2
    assert ref.add(amount=3) == 5
    assert ref.total() == 5
    instance = instance_of("tests.counter", "alice")
    assert instance.state == {"value": 5}
    assert instance.state_revision == 2  # the query did not write state
    assert instance.activation_token is None  # the caller released the lease
    assert ClaimedMessage.objects.count() == 0
    assert ReadyMessage.objects.count() == 0
    messages = list(Message.objects.order_by("sequence"))
    assert [(m.sequence, m.delivery_mode, m.attempt_count) for m in messages] == [
        (1, "sync", 1),
        (2, "sync", 1),
        (3, "sync", 1),
    ]
    assert [m.result for m in messages] == [2, 5, 5]
    assert all(m.completed_at is not None for m in messages)


def test_earlier_messages_run_before_the_sync_call():
    ref = Counter.ref("queue")
    first = ref.enqueue().append(1)
    second = ref.enqueue().append(2)
    assert ref.append(3) == 3
    assert ref.snapshot().seen == [1, 2, 3]
    assert first.status() == second.status() == "completed"
    assert first.result() == 1


def test_result_of_an_enqueued_message_runs_it_when_no_worker_does():
    message = Counter.ref("later").enqueue().add(4)
    assert message.status() == "ready"
    assert message.result(timeout=30) == 4
    assert message.status() == "completed"
    assert message.outcome().attempts == 1


def test_sync_timeout_while_another_owner_holds_the_activation(owner):
    ref = Blocker.ref("busy")
    held = ref.enqueue().hold("k")
    holder = start_thread(lambda: run_once(held.instance_id, owner), "holder")
    assert core.entered.setdefault("k", threading.Event()).wait(30)

    core.holds.setdefault("secret-argument", threading.Event()).set()
    with pytest.raises(SyncTimeout) as caught:
        ref.sync(timeout=2).hold("secret-argument")
    error = caught.value
    assert error.message_reference is not None
    assert error.actor_type == "tests.blocker"
    assert error.actor_id == "busy"
    assert error.status == "ready"
    assert error.waiting_on
    assert "secret-argument" not in str(error)  # never the arguments
    assert str(error.message_reference.id) in str(error)
    assert str(error.message_reference.sequence) in str(error)
    message = error.message_reference
    assert membership(message.id) == "ready"  # the timeout did not cancel it

    core.holds["k"].set()
    assert message.result(timeout=30) == 2  # the holder ran it after its own turn
    result = holder.outcome()
    assert result.processed == 2
    assert held.result(timeout=1) == 1
    assert ref.snapshot().hits == 2


def test_sync_call_inside_a_transaction_is_refused_before_anything_is_written():
    with pytest.raises(SyncInsideTransaction), transaction.atomic():
        Counter.ref("atomic").add(1)
    assert Instance.objects.count() == 0
    assert Message.objects.count() == 0
    with transaction.atomic(), pytest.raises(SyncInsideTransaction):
        Counter.ref("atomic").sync(timeout=1).add(1)
    assert Instance.objects.count() == 0


def test_rejection_rolls_back_state_and_is_returned_to_the_sync_caller():
    ref = Counter.ref("picky")
    assert ref.add(5) == 5
    with pytest.raises(Rejected) as caught:
        ref.refuse("not_now")
    rejection = caught.value
    assert (rejection.code, rejection.message) == ("not_now", "refused")
    assert rejection.details == {"value": 1005}  # what the handler saw before the rollback
    assert ref.snapshot().value == 5
    rejected = Message.objects.get(operation="refuse")
    assert rejected.rejected_at is not None
    assert rejected.rejection == {
        "code": "not_now",
        "message": "refused",
        "details": {"value": 1005},
    }
    assert rejected.attempt_count == 1
    assert DeadLetter.objects.count() == 0
    assert membership(rejected.id) == "done"
    # Later messages are not blocked, and nothing is retried.
    assert ref.add(1) == 6
    assert Message.objects.get(id=rejected.id).attempt_count == 1


def test_rejection_of_an_enqueued_message_does_not_block_the_mailbox():
    ref = Counter.ref("picky-async")
    refused = ref.enqueue().refuse("later")
    after = ref.enqueue().add(2)
    assert after.result(timeout=30) == 2
    assert refused.status() == "rejected"
    outcome = refused.outcome()
    assert outcome.rejection["code"] == "later"
    with pytest.raises(Rejected) as caught:
        refused.result(timeout=1)
    assert caught.value.code == "later"
    assert ref.snapshot().value == 2


@pytest.mark.parametrize("code", ["9starts_with_digit", "has space", "", "dash-ed", "é"])
def test_invalid_rejection_code_fails_the_turn_and_writes_no_state(code):
    ref = Counter.ref("bad-code")
    assert ref.add(1) == 1
    with pytest.raises(MessageFailed) as caught:
        ref.refuse(code)
    assert caught.value.error["class"] == "solid_objects.errors.InvalidRejectionCode"
    assert ref.snapshot().value == 1
    message = Message.objects.get(operation="refuse")
    assert message.rejected_at is None
    assert message.attempt_count == 1  # not retryable
    assert DeadLetter.objects.get(message_id=message.id).attempts == 1
    assert ref.add(1) == 2


def test_actor_code_cannot_make_sync_calls():
    with pytest.raises(MessageFailed) as caught:
        Caller.ref("caller").call_counter("callee")
    assert caught.value.error["class"] == "solid_objects.errors.ActorCallCycle"
    assert instance_of("tests.counter", "callee") is None
    assert DeadLetter.objects.get().attempts == 1
    with pytest.raises(MessageFailed):
        Caller.ref("caller").enqueue_to_counter("callee")
    assert instance_of("tests.counter", "callee") is None


def test_concurrent_sync_callers_of_one_actor_each_get_their_own_result():
    callers = 6
    barrier = threading.Barrier(callers, timeout=60)

    def call(index: int):
        def run():
            barrier.wait()
            return Counter.ref("hot").sync(timeout=60).append(index)

        return run

    threads = [start_thread(call(i), f"caller-{i}") for i in range(callers)]
    results = [t.outcome() for t in threads]
    assert sorted(results) == list(range(1, callers + 1))  # each saw its own turn
    seen = Counter.ref("hot").snapshot().seen
    assert sorted(seen) == list(range(callers))
    stored = Message.objects.order_by("sequence")
    assert [m.arguments["n"] for m in stored] == seen  # committed in mailbox order
    assert all(m.attempt_count == 1 for m in stored)


def test_sync_timeout_while_another_transaction_holds_the_actor_row():
    """The deadline also bounds waiting for the instance row lock: nothing is enqueued."""
    ref = Counter.ref("row-locked")
    ref.enqueue().add(1)
    locked, release = threading.Event(), threading.Event()

    def hold_row():
        with transaction.atomic():
            ref.enqueue().add(1)  # keeps the instance row locked until commit
            locked.set()
            release.wait(30)

    holder = start_thread(hold_row, "row-holder")
    assert locked.wait(30)
    try:
        with pytest.raises(SyncTimeout) as caught:
            ref.sync(timeout=1).add(5)
    finally:
        release.set()
        holder.outcome()
    assert caught.value.message_reference is None
    assert caught.value.status == "not enqueued"
    assert Message.objects.filter(delivery_mode="sync").count() == 0
    assert Message.objects.count() == 2
    assert ref.add(1) == 3  # the mailbox works once the lock is gone


# -- a caller whose message someone else finished ---------------------------------------------
def test_a_caller_whose_message_is_done_reads_it_and_runs_nothing_else(owner):
    """The waiting caller reads the outcome first: it does not lease the free actor and run
    the messages behind its own (they are other callers' work)."""
    ref = Counter.ref("done-first")
    first = ref.enqueue().add(1)
    later = ref.enqueue().add(10)
    assert run_once(first.instance_id, owner, max_messages=1).processed == 1
    assert first.result(timeout=5) == 1
    assert membership(later.id) == "ready"  # nobody ran it on the caller's way


def test_a_callers_pass_ends_at_its_own_messages_position(owner, solid_settings):
    """If another activation committed the caller's message after the caller looked, the
    caller's pass ends with the group of the first turn past that position (the due
    messages behind it are answered by the same commit) instead of draining the actor."""
    from solid_objects.lease import acquire
    from solid_objects.passes import run_pass

    from .helpers import alias

    solid_settings(MAX_TURNS_PER_COMMIT=2)
    ref = Counter.ref("past-own")
    own = ref.enqueue().add(1)
    behind = [ref.enqueue().add(10) for _ in range(3)]
    assert run_once(own.instance_id, owner, max_messages=1).processed == 1
    activation = acquire(alias(), owner, [own.instance_id])
    result = run_pass(activation, stop_after=own.id, stop_at_sequence=own.sequence)
    assert result.processed == 2  # one group of two, and no second group
    assert [membership(m.id) for m in behind] == ["done", "done", "ready"]
