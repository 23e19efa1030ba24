"""Deterministic interleavings of the protocol's dangerous pairs (issue 9, docs/protocol.md).

Each test holds one real runtime thread at a named pause point, runs the rival session (its
own thread, its own connection) into the window, and only lets the first go on once the
rival has finished or is seen blocked on a row lock by the server. Every test then checks
the invariants the guarantees promise: a message's state change commits once, a message is
never ready and claimed at the same time, nothing is left behind.
"""

from __future__ import annotations

import threading
from datetime import timedelta

import pytest
from django.db import OperationalError, connection, transaction
from django.utils import timezone

from solid_objects import LostActivation, retention
from solid_objects.db.connections import is_deadlock
from solid_objects.db.rows import LeaseRow
from solid_objects.lease import acquire
from solid_objects.models import ClaimedMessage, Instance, Message, Process, ReadyMessage
from solid_objects.runtime import processes
from solid_objects.runtime.roles import renew_leases
from solid_objects.testing import pause_at
from tests.testapp.actors.broadcasts import Retained
from tests.testapp.actors.core import Counter

from ..runtime.helpers import alias, drain, expire_lease, run_once, start_thread
from .interleaving import wait_blocked_or_done

pytestmark = pytest.mark.django_db(transaction=True)


# -- set-ups -----------------------------------------------------------------------------------
def stop_heartbeating(process_id: str) -> None:
    Process.objects.filter(id=process_id).update(
        last_heartbeat_at=timezone.now() - timedelta(minutes=10)
    )


def die_holding_the_turn(instance_id: int) -> str:
    """A worker leases the actor and claims its turn (attempt counted), then dies silently;
    its lease has run out, so a live worker may take over before cleanup comes."""
    dead = processes.register("worker", alias())
    assert acquire(alias(), dead, [instance_id]) is not None
    stop_heartbeating(dead)
    expire_lease(instance_id)
    return dead


def rows_of(message_id: int) -> tuple[int, int]:
    """(ready rows, claimed rows) of one message."""
    return (
        ReadyMessage.objects.filter(message_id=message_id).count(),
        ClaimedMessage.objects.filter(message_id=message_id).count(),
    )


def assert_ran_once(ref, message_id: int, value: int, attempts: int) -> None:
    stored = Message.objects.get(id=message_id)
    assert stored.completed_at is not None
    assert stored.attempt_count == attempts
    assert rows_of(message_id) == (0, 0)
    snapshot = ref.snapshot()
    assert snapshot.value == value  # the state change committed exactly once
    assert Instance.objects.get(id=stored.instance_id).state_revision == stored.sequence


def drain_with(owner: str, instance_id: int) -> int:
    return drain(instance_id, owner)


# -- stale-claim recovery against dead-process cleanup ------------------------------------------
def test_cleanup_waits_for_a_recovery_in_flight_and_requeues_nothing(owner):
    """Issue 9, defect 1: a live worker took the dead worker's expired lease and is inside
    the transaction that recovers its claim (moved back to ready and claimed again, not yet
    committed) when cleanup of the dead worker runs. Cleanup must wait for the recovery and
    then requeue nothing: before the fix, on PostgreSQL, it requeued the claim it had read
    before the recovery committed, so the message was claimed AND ready and ran twice."""
    ref = Counter.ref("recovery-vs-cleanup")
    message = ref.enqueue().add(1)
    dead = die_holding_the_turn(message.instance_id)

    with (
        pause_at("acquire.recovered") as recovered,
        pause_at("turn.before_commit") as before_commit,
    ):
        worker = start_thread(lambda: run_once(message.instance_id, owner), "live-worker")
        recovered.wait_reached()
        cleanup = start_thread(lambda: processes.cleanup_dead(alias(), threshold=60), "cleanup")
        wait_blocked_or_done(cleanup)
        recovered.release()
        before_commit.wait_reached()
        assert cleanup.outcome() == [dead]
        # The turn runs under the live worker's claim and is nowhere else.
        assert rows_of(message.id) == (0, 1)
        assert ClaimedMessage.objects.get(message_id=message.id).process_id == owner
        before_commit.release()
    assert worker.outcome().processed == 1
    assert drain_with(owner, message.instance_id) == 0  # nothing runs a second time
    assert_ran_once(ref, message.id, value=1, attempts=2)


def test_cleanup_between_the_lease_and_the_recovery(owner):
    """Cleanup runs after the live worker's lease committed and before its recovery
    started: it requeues the dead worker's claim (the lease is not the dead one's any
    more); the recovery then finds no stale claim and claims the requeued message."""
    ref = Counter.ref("lease-then-cleanup")
    message = ref.enqueue().add(1)
    dead = die_holding_the_turn(message.instance_id)

    with pause_at("acquire.before_recovery") as before_recovery:
        worker = start_thread(lambda: run_once(message.instance_id, owner), "live-worker")
        before_recovery.wait_reached()
        cleanup = start_thread(lambda: processes.cleanup_dead(alias(), threshold=60), "cleanup")
        wait_blocked_or_done(cleanup)
        before_recovery.release()
        assert cleanup.outcome() == [dead]
    assert worker.outcome().processed == 1
    assert drain_with(owner, message.instance_id) == 0
    assert_ran_once(ref, message.id, value=1, attempts=2)
    instance = Instance.objects.get(id=message.instance_id)
    assert instance.activation_owner_id is None  # released at the end of the pass


def test_two_cleanups_at_once_requeue_once_and_report_once(owner):
    ref = Counter.ref("double-cleanup")
    message = ref.enqueue().add(1)
    dead = processes.register("worker", alias())
    assert acquire(alias(), dead, [message.instance_id]) is not None
    stop_heartbeating(dead)

    with pause_at("cleanup.before_instance") as held:
        first = start_thread(lambda: processes.cleanup_dead(alias(), threshold=60), "cleanup-1")
        held.wait_reached()  # it read what the dead process holds; it locked nothing yet
        second = processes.cleanup_dead(alias(), threshold=60)
        held.release()
    reported = first.outcome() + second
    assert reported == [dead]  # one of them marked it stopped, and only that one says so
    assert rows_of(message.id) == (1, 0)
    assert run_once(message.instance_id, owner).processed == 1
    assert_ran_once(ref, message.id, value=1, attempts=2)


# -- a worker declared dead while it is only slow -------------------------------------------------
def test_a_slow_worker_declared_dead_cannot_commit_and_the_turn_runs_once(owner, second_owner):
    ref = Counter.ref("slow-worker")
    message = ref.enqueue().add(1)
    with pause_at("turn.before_commit") as before_commit:
        slow = start_thread(lambda: run_once(message.instance_id, owner), "slow-worker")
        before_commit.wait_reached()  # the handler ran; its commit has not started
        stop_heartbeating(owner)
        assert processes.cleanup_dead(alias(), threshold=60) == [owner]
        assert rows_of(message.id) == (1, 0)  # requeued: the claim is gone
        before_commit.release()
    with pytest.raises(LostActivation):
        slow.outcome()
    assert run_once(message.instance_id, second_owner).processed == 1
    assert_ran_once(ref, message.id, value=1, attempts=2)


def test_a_commit_that_wins_against_cleanup_leaves_nothing_to_requeue(owner):
    ref = Counter.ref("commit-first")
    message = ref.enqueue().add(1)
    with pause_at("turn.before_commit") as before_commit:
        worker = start_thread(lambda: run_once(message.instance_id, owner), "worker")
        before_commit.wait_reached()
        stop_heartbeating(owner)
        with pause_at("cleanup.before_instance") as cleanup_held:
            cleanup = start_thread(lambda: processes.cleanup_dead(alias(), threshold=60), "cleanup")
            cleanup_held.wait_reached()  # it has read the worker's lease and claim
            before_commit.release()
            assert worker.outcome().processed == 1  # the commit goes first
            cleanup_held.release()
        assert cleanup.outcome() == [owner]
    assert rows_of(message.id) == (0, 0)
    assert_ran_once(ref, message.id, value=1, attempts=1)


def test_a_lease_released_by_cleanup_is_not_renewed(owner):
    ref = Counter.ref("renew-after-cleanup")
    message = ref.enqueue().add(1)
    leases = []
    with pause_at("turn.before_commit") as before_commit:
        worker = start_thread(lambda: run_once(message.instance_id, owner), "worker")
        before_commit.wait_reached()
        instance = Instance.objects.get(id=message.instance_id)
        leases.append(
            LeaseRow(
                instance_id=instance.id,
                actor_type=instance.actor_type,
                actor_id=instance.actor_id,
                state=None,
                state_version=instance.state_version,
                state_revision=instance.state_revision,
                generation=instance.activation_generation,
                token=instance.activation_token,
                owner_id=owner,
                has_stale_claim=False,
            )
        )
        stop_heartbeating(owner)
        assert processes.cleanup_dead(alias(), threshold=60) == [owner]
        renew_leases(alias(), leases)  # the supervisor's renewal, racing the cleanup
        assert Instance.objects.get(id=message.instance_id).activation_token is None
        before_commit.release()
    with pytest.raises(LostActivation):
        worker.outcome()


# -- destruction and pausing against the protocol ------------------------------------------------
def test_destroy_during_cleanup(owner):
    ref = Counter.ref("destroy-during-cleanup")
    message = ref.enqueue().add(1)
    dead = processes.register("worker", alias())
    assert acquire(alias(), dead, [message.instance_id]) is not None
    stop_heartbeating(dead)
    with pause_at("cleanup.before_instance") as held:
        cleanup = start_thread(lambda: processes.cleanup_dead(alias(), threshold=60), "cleanup")
        held.wait_reached()
        assert ref.destroy() is True
        held.release()
    assert cleanup.outcome() == [dead]  # no foreign-key error for the vanished instance
    assert not Instance.objects.filter(id=message.instance_id).exists()
    assert not Message.objects.filter(id=message.id).exists()
    assert not ReadyMessage.objects.exists() and not ClaimedMessage.objects.exists()


def test_destroy_during_recovery(owner):
    ref = Counter.ref("destroy-during-recovery")
    message = ref.enqueue().add(1)
    die_holding_the_turn(message.instance_id)
    with pause_at("acquire.before_recovery") as before_recovery:
        worker = start_thread(lambda: run_once(message.instance_id, owner), "worker")
        before_recovery.wait_reached()
        destroyer = start_thread(ref.destroy, "destroyer")
        wait_blocked_or_done(destroyer)
        before_recovery.release()
        assert destroyer.outcome() is True
    try:
        outcome = worker.outcome()
    except LostActivation:
        outcome = "lost"  # it recovered first, and its commit found the actor gone
    except OperationalError as exc:
        # InnoDB may pick the worker's fenced commit, waiting behind the cascading delete,
        # as a deadlock victim: its transaction rolled back, nothing was written.
        assert connection.vendor == "mysql" and is_deadlock(exc), exc
        outcome = "lost"
    assert outcome in (None, "lost") or outcome.processed in (0, 1)
    assert not Instance.objects.filter(id=message.instance_id).exists()
    assert not ReadyMessage.objects.exists() and not ClaimedMessage.objects.exists()
    assert ref.snapshot().revision == 0  # a later message would start a fresh incarnation


def test_pausing_an_actor_mid_turn_lets_the_turn_commit_and_holds_the_next(owner):
    ref = Counter.ref("pause-mid-turn")
    message = ref.enqueue().add(1)
    with pause_at("turn.before_commit") as before_commit:
        worker = start_thread(
            lambda: run_once(message.instance_id, owner, max_messages=1), "worker"
        )
        before_commit.wait_reached()
        Instance.objects.filter(id=message.instance_id).update(paused_at=timezone.now())
        later = ref.enqueue().add(10)
        before_commit.release()
    assert worker.outcome().processed >= 1
    assert Message.objects.get(id=message.id).completed_at is not None
    Instance.objects.filter(id=message.instance_id).update(activation_token=None)
    if Message.objects.get(id=later.id).completed_at is None:
        assert run_once(message.instance_id, owner) is None  # paused: not leased
        Instance.objects.filter(id=message.instance_id).update(paused_at=None)
        assert run_once(message.instance_id, owner).processed == 1
    assert ref.snapshot().value == 11


# -- enqueue against retention ------------------------------------------------------------------
def test_retention_never_deletes_an_actor_whose_next_message_is_being_enqueued():
    """Retention locks an idle instance before deleting it; an enqueue holding the row (its
    transaction not yet committed) makes retention skip it, so the message survives."""
    ref = Retained.ref("retained")
    ref.enqueue().touch()
    instance_id = Instance.objects.get(actor_id="retained").id
    drain(instance_id, processes.register("worker", alias()))
    old = timezone.now() - timedelta(days=30)
    Instance.objects.filter(id=instance_id).update(last_used_at=old, created_at=old)

    enqueued, finish = threading.Event(), threading.Event()

    def enqueue_in_a_long_transaction() -> int:
        with transaction.atomic():
            message = ref.enqueue().touch()
            enqueued.set()
            assert finish.wait(30)
        return message.id

    writer = start_thread(enqueue_in_a_long_transaction, "writer")
    assert enqueued.wait(30)
    pruner = start_thread(lambda: retention.prune(messages=False, processes=False), "pruner")
    wait_blocked_or_done(pruner)  # SQLite: it waits for the writer's transaction
    finish.set()
    message_id = writer.outcome()
    assert pruner.outcome().instances == 0
    assert ReadyMessage.objects.filter(message_id=message_id).exists()
    assert Message.objects.filter(id=message_id).exists()


def test_a_refused_activation_racing_cleanup_puts_its_claim_back_once(owner):
    """State newer than the code: the activation is refused and its claim put back. If
    cleanup took the (slow, declared dead) worker's claim meanwhile, the refusal must not
    put it back a second time."""
    from solid_objects import StateMigrationError

    ref = Counter.ref("refused-vs-cleanup")
    message = ref.enqueue().add(1)
    Instance.objects.filter(id=message.instance_id).update(state_version=99)

    def activate_once():
        with pytest.raises(StateMigrationError):
            acquire(alias(), owner, [message.instance_id])

    stop_heartbeating(owner)  # slow: cleanup will take it for dead
    with pause_at("acquire.after_lease") as after_lease:
        worker = start_thread(activate_once, "worker")
        after_lease.wait_reached()
        cleanup = start_thread(lambda: processes.cleanup_dead(alias(), threshold=60), "cleanup")
        wait_blocked_or_done(cleanup)
        after_lease.release()
        worker.outcome()
        cleanup.outcome()
    assert rows_of(message.id) == (1, 0)  # back in the mailbox exactly once, waiting
    instance = Instance.objects.get(id=message.instance_id)
    assert instance.activation_token is None
