"""Recovery without a worker subprocess (§A6, §A8): dead-process cleanup gives claims and
leases back, attempts stay counted, and actors waiting for a retry never crowd out others."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from solid_objects.db.vendors import dialect_for
from solid_objects.lease import acquire
from solid_objects.models import ClaimedMessage, DeadLetter, Instance, Message, Process
from solid_objects.runtime import processes
from solid_objects.runtime.roles import CANDIDATE_WINDOW, stale_claims
from tests.testapp.actors.core import Counter

from .helpers import alias, membership, run_once

pytestmark = pytest.mark.django_db(transaction=True)


def die_during_turn(instance_id: int) -> str:
    """A process takes the lease and claims the turn (attempt counted), then dies silently."""
    dead = processes.register("worker", alias())
    assert acquire(alias(), dead, [instance_id]) is not None
    Process.objects.filter(id=dead).update(last_heartbeat_at=timezone.now() - timedelta(minutes=10))
    return dead


def test_dead_process_cleanup_releases_its_claims_and_leases(owner):
    ref = Counter.ref("orphan")
    message = ref.enqueue().add(1)
    dead = die_during_turn(message.instance_id)
    assert ClaimedMessage.objects.get().process_id == dead

    assert processes.cleanup_dead(alias(), threshold=60) == [dead]
    row = Process.objects.get(id=dead)
    assert row.shutdown_state == "stopped"
    assert row.stopped_at is not None
    instance = Instance.objects.get(id=message.instance_id)
    assert instance.activation_owner_id is None and instance.activation_token is None
    assert membership(message.id) == "ready"
    assert Message.objects.get(id=message.id).attempt_count == 1  # the attempt stays counted
    assert owner not in processes.cleanup_dead(alias(), threshold=60)  # live ones are kept

    assert run_once(message.instance_id, owner).processed == 1
    stored = Message.objects.get(id=message.id)
    assert (stored.attempt_count, stored.result) == (2, 1)
    assert ref.snapshot().value == 1


def test_a_process_dying_during_the_last_attempt_leaves_a_dead_letter(owner, solid_settings):
    solid_settings(MAX_ATTEMPTS=2)
    ref = Counter.ref("last-attempt")
    message = ref.enqueue().add(1)
    behind = ref.enqueue().add(10)
    die_during_turn(message.instance_id)
    processes.cleanup_dead(alias(), threshold=60)
    die_during_turn(message.instance_id)  # attempt 2 of 2 dies too
    processes.cleanup_dead(alias(), threshold=60)
    assert Message.objects.get(id=message.id).attempt_count == 2

    assert run_once(message.instance_id, owner).processed == 1  # only the message behind runs
    assert membership(message.id) == "dead"
    dead = DeadLetter.objects.get(message_id=message.id)
    assert dead.attempts == 2
    assert dead.exception_class == "solid_objects.errors.LostActivation"
    assert Message.objects.get(id=message.id).attempt_count == 2
    assert behind.result(timeout=1) == 10
    assert ref.snapshot().value == 10


def test_an_expired_lease_s_claim_is_found_and_recovered(owner):
    message = Counter.ref("expired-claim").enqueue().add(1)
    acquire(alias(), owner, [message.instance_id])  # claimed, never committed
    with connection.cursor() as cursor:
        assert stale_claims(cursor, dialect_for(connection)) == []  # the lease is live
    Instance.objects.filter(id=message.instance_id).update(
        activation_expires_at=timezone.now() - timedelta(minutes=1)
    )
    with connection.cursor() as cursor:
        assert stale_claims(cursor, dialect_for(connection)) == [message.instance_id]
    assert run_once(message.instance_id, owner).processed == 1
    assert Message.objects.get(id=message.id).attempt_count == 2


def test_actors_waiting_for_a_retry_do_not_crowd_out_the_candidate_window(owner, solid_settings):
    solid_settings(RETRY_DELAY="tests.runtime.helpers.long_delay", MAX_TURNS_PER_COMMIT=1)
    blocked = []
    for n in range(CANDIDATE_WINDOW + 6):
        ref = Counter.ref(f"blocked-{n}")
        boom = ref.enqueue().boom()
        ref.enqueue().add(1)  # due, but behind a message that is not
        blocked.append(boom.instance_id)
    for instance_id in blocked:
        assert run_once(instance_id, owner).processed == 1  # fails, retries in an hour
    ready = Counter.ref("has-work").enqueue().add(1)
    with connection.cursor() as cursor:
        candidates = dialect_for(connection).due_instances(cursor, CANDIDATE_WINDOW)
    assert candidates == {ready.instance_id: 1}
