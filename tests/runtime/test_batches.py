"""Cold actors leased, claimed and committed together (``MAX_ACTORS_PER_COMMIT``).

A worker finding many actors with one due message each leases a batch of them with one
claim, runs one turn per actor and commits the turns that staged nothing together. These
tests pin what that must never change: every message runs once and is committed once;
each actor's fence is its own (a lost lease writes nothing and blocks no other actor);
turns that staged writes or failed still commit on their own; a crash between the claim
and the commit leaves turns that recovery runs again; and the statements per cold message
stay far below one lease, claim and commit each.
"""

from __future__ import annotations

import pytest
from django.db import connection

from solid_objects import pause_points
from solid_objects.models import ClaimedMessage, DeadLetter, Effect, Instance, Message
from solid_objects.runtime.roles import HELD_UP_BACKOFF, ActorRole
from solid_objects.runtime.supervisor import Supervisor
from solid_objects.testing import pause_at
from tests.support.statements import count_statements
from tests.testapp.actors.core import Counter
from tests.testapp.actors.outbox import Payer

from .helpers import run_once, start_thread

pytestmark = pytest.mark.django_db(transaction=True)

#: Statements per cold message over a whole drain of 40 one-message actors, every entry
#: the connection logs. PostgreSQL: the scan, one claim and one commit statement per batch
#: of 32 (recorded 0.18); MariaDB and SQLite: a dozen statements per batch (recorded 0.7).
COLD_BOUNDS = {"postgresql": 0.25, "mysql": 1.0, "sqlite": 1.0}


def worker(owner: str) -> ActorRole:
    role = ActorRole(Supervisor(roles=[], install_signal_handlers=False, wake_ups=False))
    role.process_id = owner
    return role


class Died(BaseException):
    """Stands for the worker process ending at a pause point."""


def die_before_the_batch_commits(owner: str) -> None:
    """One unit of work of a worker that dies after its batch's turns ran and before their
    commit: the claims stay, nothing else of the batch is written."""

    def die(name: str) -> None:
        raise Died(name)

    pause_points.install("batch.before_commit", die)
    try:
        with pytest.raises(Died):
            worker(owner).run_once()
    finally:
        pause_points.uninstall("batch.before_commit")


def drain(role: ActorRole) -> int:
    units = 0
    while role.run_once():
        units += 1
    return units


def test_cold_actors_commit_together_in_few_statements(owner, record_property):
    refs = [Counter.ref(f"cold-{index}") for index in range(40)]
    sent = [ref.enqueue().add(index + 1) for index, ref in enumerate(refs)]
    role = worker(owner)

    units: list[int] = []
    statements = count_statements(lambda: units.append(drain(role)))

    assert units == [2]  # two batches (32 + 8), no actor on its own
    assert [m.status() for m in sent] == ["completed"] * 40
    assert [m.result() for m in sent] == [index + 1 for index in range(40)]
    assert [ref.snapshot().value for ref in refs] == [index + 1 for index in range(40)]
    assert set(Message.objects.values_list("attempt_count", flat=True)) == {1}
    assert not ClaimedMessage.objects.exists()
    assert not Instance.objects.filter(activation_token__isnull=False).exists()
    revisions = dict(Instance.objects.values_list("actor_id", "state_revision"))
    assert set(revisions.values()) == {1}
    per_message = statements / 40
    record_property("statements_per_cold_message", per_message)
    assert per_message <= COLD_BOUNDS[connection.vendor]


def test_a_batch_runs_each_actor_once_and_its_next_messages_later(owner):
    """Actors the scan saw once but that have more messages: one turn each per batch; the
    rest follow in order, each message once."""
    refs = [Counter.ref(f"two-{index}") for index in range(40)]
    first = [ref.enqueue().append(1) for ref in refs]
    second = [ref.enqueue().append(2) for ref in refs]
    # The scan's window (64 due messages, oldest first) sees the last 16 actors once.
    role = worker(owner)
    drain(role)
    assert [m.status() for m in first + second] == ["completed"] * 80
    assert [ref.snapshot().seen for ref in refs] == [[1, 2]] * 40
    assert set(Message.objects.values_list("attempt_count", flat=True)) == {1}


def test_turns_that_staged_writes_or_failed_commit_on_their_own(owner, solid_settings):
    """In one batch: plain turns, a rejection (joins the batch), an effect and a failure
    (each committed alone); every outcome is exactly what a normal pass writes."""
    solid_settings(RETRY_DELAY="tests.runtime.helpers.long_delay")
    plain = [Counter.ref(f"plain-{index}").enqueue().add(1) for index in range(4)]
    refused = Counter.ref("refused").enqueue().refuse("no")
    failed = Counter.ref("failed").enqueue().boom()
    paying = Payer.ref("payer").enqueue().pay("tests.outbox.sink", {"n": 1})
    drain(worker(owner))

    assert [m.status() for m in plain] == ["completed"] * 4
    assert refused.status() == "rejected"
    assert Counter.ref("refused").snapshot().value == 0
    assert paying.status() == "completed"
    assert Effect.objects.filter(name="tests.outbox.sink").count() == 1
    failed_row = Message.objects.get(id=failed.id)
    assert failed_row.attempt_count == 1 and failed_row.error["message"] == "boom"
    assert failed.status() == "ready"  # retried after the (long) backoff
    assert Counter.ref("failed").snapshot().value == 0
    assert not DeadLetter.objects.exists()
    assert ClaimedMessage.objects.count() == 0
    assert not Instance.objects.filter(activation_token__isnull=False).exists()


def test_one_actors_lost_lease_neither_commits_it_nor_blocks_the_others(owner, second_owner):
    """While the batch's turns wait for their commit, one actor's lease expires and another
    worker takes the actor over and runs its message. The batch then commits every other
    actor and writes nothing for that one: its message ran once, under the new lease."""
    refs = [Counter.ref(f"fenced-{index}") for index in range(6)]
    sent = [ref.enqueue().add(10) for ref in refs]
    victim = sent[2]
    role = worker(owner)
    with pause_at("batch.before_commit") as before_commit:
        batch = start_thread(role.run_once, "batch-worker")
        before_commit.wait_reached()
        # The victim's lease runs out; the second worker recovers its claim and runs it.
        Instance.objects.filter(id=victim.instance_id).update(
            activation_expires_at="2000-01-01T00:00:00Z"
        )
        assert run_once(victim.instance_id, second_owner).processed == 1
        before_commit.release()
        assert batch.outcome() is True
    assert [m.status() for m in sent] == ["completed"] * 6
    assert [ref.snapshot().value for ref in refs] == [10] * 6  # the victim's ran once
    victim_row = Message.objects.get(id=victim.id)
    assert victim_row.attempt_count == 2  # the batch's claim, then the takeover's
    others = Message.objects.exclude(id=victim.id)
    assert set(others.values_list("attempt_count", flat=True)) == {1}
    assert not ClaimedMessage.objects.exists()
    assert not Instance.objects.filter(activation_token__isnull=False).exists()


def test_a_batch_that_dies_before_its_commit_is_recovered_and_runs_once(owner, second_owner):
    """The worker dies after its turns ran and before their commit (the exception stands
    for the process ending there): nothing of the batch is written, every turn is left
    claimed, and a later worker recovers each claim and runs it exactly once."""
    refs = [Counter.ref(f"crash-{index}") for index in range(5)]
    sent = [ref.enqueue().add(3) for ref in refs]
    die_before_the_batch_commits(owner)
    assert ClaimedMessage.objects.count() == 5  # the claims of the dead batch
    assert [ref.snapshot().value for ref in refs] == [0] * 5
    Instance.objects.update(activation_expires_at="2000-01-01T00:00:00Z")  # leases run out

    later = worker(second_owner)
    while True:
        later._next_stale_scan = 0.0  # look for claims without a lease every time
        if not later.run_once():
            break
    assert [m.status() for m in sent] == ["completed"] * 5
    assert [ref.snapshot().value for ref in refs] == [3] * 5
    assert set(Message.objects.values_list("attempt_count", flat=True)) == {2}
    assert not ClaimedMessage.objects.exists()


def test_max_turns_per_commit_one_turns_batching_off(owner, solid_settings):
    """``MAX_TURNS_PER_COMMIT = 1`` means one commit per turn, across actors too."""
    solid_settings(MAX_TURNS_PER_COMMIT=1)
    sent = [Counter.ref(f"single-{index}").enqueue().add(1) for index in range(4)]
    assert drain(worker(owner)) == 4  # one actor per unit of work
    assert [m.status() for m in sent] == ["completed"] * 4


def test_max_actors_per_commit_bounds_a_batch(owner, solid_settings):
    solid_settings(MAX_ACTORS_PER_COMMIT=3)
    sent = [Counter.ref(f"bounded-{index}").enqueue().add(1) for index in range(7)]
    assert drain(worker(owner)) == 3  # 3 + 3, then the last one on its own
    assert [m.status() for m in sent] == ["completed"] * 7


def test_actor_types_that_never_commit_with_others_are_leased_one_by_one(owner):
    """``commit_with_other_actors = False`` (the task actor's setting: its turns may block):
    each actor gets a unit of work of its own, so worker threads run them side by side."""
    from tests.testapp.actors.runtime_tests import Apart

    sent = [Apart.ref(f"apart-{index}").enqueue().add(1) for index in range(4)]
    batched = [Counter.ref(f"with-{index}").enqueue().add(1) for index in range(4)]
    assert drain(worker(owner)) == 5  # one batch of the four counters, then one each
    assert [m.status() for m in sent + batched] == ["completed"] * 8


def test_a_batch_recovers_claims_a_dead_batch_left_on_its_actors(owner, second_owner):
    """Actors whose first turn a dead batch left claimed get a new message each: the next
    batch leases them, puts each stale claim back (its attempt stays counted) and runs it
    first, then the new message, in order, each once."""
    refs = [Counter.ref(f"stale-{index}") for index in range(4)]
    first = [ref.enqueue().append(1) for ref in refs]
    die_before_the_batch_commits(owner)
    assert ClaimedMessage.objects.count() == 4
    second = [ref.enqueue().append(2) for ref in refs]
    Instance.objects.update(activation_expires_at="2000-01-01T00:00:00Z")  # leases run out

    later = worker(second_owner)
    later._next_stale_scan = float("inf")  # only the batch finds them (through message 2)
    units = drain(later)
    assert units >= 1
    assert [m.status() for m in first + second] == ["completed"] * 8
    assert [ref.snapshot().seen for ref in refs] == [[1, 2]] * 4
    assert [Message.objects.get(id=m.id).attempt_count for m in first] == [2] * 4
    assert [Message.objects.get(id=m.id).attempt_count for m in second] == [1] * 4
    assert not ClaimedMessage.objects.exists()


def test_a_slow_turn_hands_back_the_turns_claimed_behind_it(owner, second_owner, solid_settings):
    """A batch's first turn is held (as a task blocked on I/O, or waiting for a task behind
    it): after ``MAX_COMMIT_DELAY`` the watchdog puts the turns behind it back in their
    mailboxes, uncounted and unleased, so another worker runs them while the slow turn is
    still running; the slow turn then commits; every message ran once, attempt 1 each."""
    solid_settings(MAX_COMMIT_DELAY=0.05)
    slow = Counter.ref("held-up-first").enqueue().add(1)
    behind = [Counter.ref(f"held-up-{index}").enqueue().add(1) for index in range(3)]
    held = worker(owner)
    with pause_at("batch.before_turn") as turn, pause_at("hand_back.given") as given:
        thread = start_thread(held.run_once, "held-up-batch")
        turn.wait_reached()  # the batch leased all four and holds its first turn
        assert Instance.objects.filter(activation_owner_id=owner).count() == 4
        given.wait_reached()  # fails without a hand-back: the three stay leased behind it
        given.release()
        assert Instance.objects.filter(activation_owner_id=owner).count() == 1
        assert drain(worker(second_owner)) >= 1
        assert [m.status() for m in behind] == ["completed"] * 3
        assert slow.status() != "completed"
        turn.release()
        assert thread.outcome() is True
    assert held._skip_batches == HELD_UP_BACKOFF  # slow turns: one actor at a time for a while
    assert slow.status() == "completed"
    assert [Message.objects.get(id=m.id).attempt_count for m in [slow, *behind]] == [1] * 4
    assert not ClaimedMessage.objects.exists()
    assert not Instance.objects.filter(activation_owner_id__isnull=False).exists()


def test_a_batch_of_fast_turns_hands_nothing_back(owner, solid_settings):
    """Turns well within ``MAX_COMMIT_DELAY`` run in the batch that claimed them: one unit
    of work, nothing handed back."""
    solid_settings(MAX_COMMIT_DELAY=5.0)
    sent = [Counter.ref(f"fast-{index}").enqueue().add(1) for index in range(6)]
    role = worker(owner)
    handed: list[int] = []
    role._held_up = handed.append  # type: ignore[method-assign]
    assert drain(role) == 1
    assert handed == []
    assert [m.status() for m in sent] == ["completed"] * 6


def test_a_hand_back_that_fails_releases_the_leases_once_the_database_answers(
    owner, second_owner, solid_settings, monkeypatch
):
    """The hand-back's transaction fails for good (the server is gone for that moment):
    the leases are abandoned, the next unit of work of this process releases them, and the
    claims left on them are recovered (attempt counted) and run while the slow turn still
    holds its own; nothing waits for the leases to run out."""
    import threading

    from django.db import OperationalError

    from solid_objects import hand_back

    solid_settings(MAX_COMMIT_DELAY=0.05)
    failed = threading.Event()

    def unreachable(alias: str, taken: list) -> list:
        failed.set()
        raise OperationalError("the server closed the connection unexpectedly")

    monkeypatch.setattr(hand_back, "_give_back", unreachable)
    slow = Counter.ref("unreachable-first").enqueue().add(1)
    behind = [Counter.ref(f"unreachable-{index}").enqueue().add(1) for index in range(3)]
    with pause_at("batch.before_turn") as turn:
        thread = start_thread(worker(owner).run_once, "held-up-batch")
        turn.wait_reached()
        assert failed.wait(30), "the watchdog never tried to hand the turns back"
        later = worker(second_owner)
        for _ in range(10):  # releases the abandoned leases, recovers and runs the three
            later._next_stale_scan = 0.0  # (the stale-claim scan's interval passes)
            if not later.run_once():
                break
        assert [m.status() for m in behind] == ["completed"] * 3
        assert slow.status() != "completed"
        turn.release()
        assert thread.outcome() is True
    assert slow.status() == "completed"
    assert [Message.objects.get(id=m.id).attempt_count for m in behind] == [2] * 3
    assert not ClaimedMessage.objects.exists()
