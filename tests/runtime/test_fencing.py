"""Leases and fencing (§A6) and destruction (§A7): a stale activation never commits."""

from __future__ import annotations

import threading

import pytest
from django.utils import timezone

from solid_objects import LostActivation, MessageFailed, SyncTimeout
from solid_objects.lease import acquire
from solid_objects.models import (
    Broadcast,
    ClaimedMessage,
    DeadLetter,
    Effect,
    Instance,
    Message,
    ReadyMessage,
    Reminder,
)
from solid_objects.passes import run_pass
from tests.factories import BroadcastFactory, EffectFactory, ReminderFactory
from tests.support.waiting import wait_until
from tests.testapp.actors import core
from tests.testapp.actors.core import Blocker, Counter
from tests.testapp.actors.runtime_tests import AttemptBlocker

from .helpers import alias, expire_lease, run_once, snapshot_rows, start_thread

pytestmark = pytest.mark.django_db(transaction=True)


def event(name: str) -> threading.Event:
    return core.holds.setdefault(name, threading.Event())


def entered(name: str) -> bool:
    return core.entered.setdefault(name, threading.Event()).wait(30)


@pytest.mark.parametrize("stale_commits_first", [True, False], ids=["stale-first", "new-first"])
def test_a_stale_activation_cannot_commit_after_a_takeover(
    owner, second_owner, stale_commits_first
):
    ref = AttemptBlocker.ref("fenced")
    message = ref.enqueue().hold("f")
    instance_id = message.instance_id
    stale = start_thread(lambda: run_once(instance_id, owner), "worker-a")
    assert entered("f:1")
    lease_a = Instance.objects.get(id=instance_id)
    assert lease_a.activation_owner_id == owner

    expire_lease(instance_id)
    fresh = start_thread(lambda: run_once(instance_id, second_owner), "worker-b")
    assert entered("f:2")  # B recovered A's claim (attempt 2) and runs the turn again
    lease_b = Instance.objects.get(id=instance_id)
    assert lease_b.activation_owner_id == second_owner
    assert lease_b.activation_generation == lease_a.activation_generation + 1
    assert lease_b.activation_token != lease_a.activation_token
    claim = ClaimedMessage.objects.get(instance_id=instance_id)
    assert claim.activation_token == lease_b.activation_token

    if stale_commits_first:
        before = snapshot_rows(instance_id)
        event("f:1").set()
        with pytest.raises(LostActivation):
            stale.outcome()
        assert snapshot_rows(instance_id) == before  # state, message, claim: all untouched
        event("f:2").set()
        assert fresh.outcome().processed == 1
    else:
        event("f:2").set()
        assert fresh.outcome().processed == 1
        before = snapshot_rows(instance_id)
        event("f:1").set()
        with pytest.raises(LostActivation):
            stale.outcome()
        assert snapshot_rows(instance_id) == before

    stored = Message.objects.get(id=message.id)
    assert (stored.attempt_count, stored.result) == (2, 1)
    assert ref.snapshot().hits == 1  # the state change committed once
    assert ClaimedMessage.objects.count() == 0
    assert Instance.objects.get(id=instance_id).activation_token is None


def test_an_expired_lease_cannot_commit_even_without_a_takeover(owner):
    ref = AttemptBlocker.ref("expired")
    message = ref.enqueue().hold("e")
    holder = start_thread(lambda: run_once(message.instance_id, owner))
    assert entered("e:1")
    expire_lease(message.instance_id)
    before = snapshot_rows(message.instance_id)
    event("e:1").set()
    with pytest.raises(LostActivation):
        holder.outcome()
    assert snapshot_rows(message.instance_id) == before
    assert before["claimed"]  # the claim stays for recovery
    # The next lease recovers the claim and retries it (attempt 2).
    event("e:2").set()
    assert run_once(message.instance_id, owner).processed == 1
    stored = Message.objects.get(id=message.id)
    assert (stored.attempt_count, stored.result) == (2, 1)
    assert ref.snapshot().hits == 1


def test_a_short_lease_is_taken_over_once_it_runs_out(owner, second_owner, solid_settings):
    solid_settings(LEASE_DURATION=1.0, LEASE_RENEWAL_INTERVAL=0.5)
    ref = AttemptBlocker.ref("short")
    message = ref.enqueue().hold("s")
    stale = start_thread(lambda: run_once(message.instance_id, owner))
    assert entered("s:1")
    # Nobody renews the lease: B gets it as soon as it expires on the database clock.
    taken = wait_until(
        lambda: acquire(alias(), second_owner, [message.instance_id]), what="the lease to expire"
    )
    event("s:1").set()
    with pytest.raises(LostActivation):
        stale.outcome()
    event("s:2").set()
    assert run_pass(taken).processed == 1
    assert ref.snapshot().hits == 1
    assert Message.objects.get(id=message.id).attempt_count == 2


def test_a_live_lease_is_not_taken(owner, second_owner):
    ref = Blocker.ref("owned")
    message = ref.enqueue().hold("o")
    holder = start_thread(lambda: run_once(message.instance_id, owner))
    assert entered("o")
    assert acquire(alias(), second_owner, [message.instance_id]) is None
    with pytest.raises(SyncTimeout):
        ref.sync(timeout=2).bump()
    event("o").set()
    assert holder.outcome().processed == 2  # the holder also ran the bump behind it
    assert ref.snapshot().hits == 2


def test_paused_instances_are_not_activated(owner):
    ref = Counter.ref("paused")
    message = ref.enqueue().add(1)
    Instance.objects.filter(id=message.instance_id).update(paused_at=timezone.now())
    assert run_once(message.instance_id, owner) is None
    assert message.status() == "ready"
    Instance.objects.filter(id=message.instance_id).update(paused_at=None)
    assert run_once(message.instance_id, owner).processed == 1


# -- destroy ------------------------------------------------------------------------------------
OWNED = (Message, ReadyMessage, ClaimedMessage, DeadLetter, Reminder, Effect, Broadcast)


def test_destroy_deletes_everything_the_instance_owns():
    ref = Counter.ref("doomed")
    assert ref.add(1) == 1
    with pytest.raises(MessageFailed):
        ref.boom(retryable=False)
    pending = ref.enqueue().add(5)
    instance = Instance.objects.get(id=pending.instance_id)
    done = Message.objects.filter(instance=instance).first()
    ReminderFactory(instance=instance)
    EffectFactory(message=done, instance=instance)
    BroadcastFactory(message=done, instance=instance)
    keep = Counter.ref("bystander")
    assert keep.add(7) == 7
    for model in OWNED:
        if model is not ClaimedMessage:
            assert model.objects.filter(instance=instance).exists(), model

    assert ref.destroy() is True
    assert not Instance.objects.filter(id=instance.id).exists()
    for model in OWNED:
        assert not model.objects.filter(instance_id=instance.id).exists(), model
    assert ref.destroy() is False
    assert pending.status() == "unknown"
    assert keep.snapshot().value == 7  # other actors are untouched

    # A later message starts a fresh incarnation.
    again = ref.enqueue().add(2)
    assert again.instance_id != instance.id
    assert again.sequence == 1
    assert again.result(timeout=30) == 2
    assert ref.snapshot().state == {"value": 2}


def test_destroy_fences_out_a_turn_in_flight(owner):
    ref = Blocker.ref("doomed-busy")
    message = ref.enqueue().hold("d")
    holder = start_thread(lambda: run_once(message.instance_id, owner))
    assert entered("d")
    assert ref.destroy() is True
    event("d").set()
    with pytest.raises(LostActivation):
        holder.outcome()
    assert not Instance.objects.filter(actor_id="doomed-busy").exists()
    assert not Message.objects.filter(id=message.id).exists()
    assert ref.bump() == 1  # a fresh incarnation, sequence 1, empty state
    fresh = Instance.objects.get(actor_id="doomed-busy")
    assert fresh.id != message.instance_id
    assert Message.objects.get(instance=fresh).sequence == 1
