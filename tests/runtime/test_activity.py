"""``self.record_activity`` inside a turn (§A5, issue 16): the journal entry commits with
the turn, in its fenced commit, exactly once, or not at all."""

from __future__ import annotations

import os
import signal
import threading
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from django.core.checks import run_checks
from django.core.management import call_command
from django.db import connection
from django.utils import timezone

from solid_objects import Rejected
from solid_objects.activation import ActivationCache
from solid_objects.lease import acquire
from solid_objects.models import DeadLetter, Message
from solid_objects.passes import run_pass
from solid_objects.turn import activity_key
from tests.support.statements import count_statements
from tests.support.waiting import wait_until
from tests.testapp.actors import core
from tests.testapp.actors.journal import Recorder
from tilttek_activity import activity_recorded, cancel_activity, record_activity
from tilttek_activity.models import Entry

from .helpers import alias, drain, membership, run_once, run_once_losing_the_lease

pytestmark = pytest.mark.django_db(transaction=True)

NO_DELAY = "tests.runtime.helpers.no_delay"
FAST = {
    "POLLING_INTERVAL": 0.05,
    "IDLE_POLLING_INTERVAL": 0.25,
    "PROCESS_HEARTBEAT_INTERVAL": 0.5,
}


def entries_of(actor_id: str) -> list[Entry]:
    return list(Entry.objects.filter(member=f"user:{actor_id}").order_by("position"))


# -- what commits, and how often ------------------------------------------------------------------
def test_a_turn_records_in_its_commit_with_a_key_from_the_message(owner):
    ref = Recorder.ref("plain")
    message = ref.enqueue().record(times=2)
    assert entries_of("plain") == []  # staged with the message? no: written by the turn
    run_once(message.instance_id, owner)
    assert message.result() == [activity_key(message.id, 0), activity_key(message.id, 1)]
    stored = entries_of("plain")
    assert [e.idempotency_key for e in stored] == message.result()
    assert [(e.verb, e.object, e.quantity, e.context) for e in stored] == [
        ("cart.item_added", "cart:plain", 1, {"turn": 1})
    ] * 2
    # Dated by the database when the turn committed, to the second, in UTC.
    now = timezone.now()
    for entry in stored:
        assert entry.occurred_at == entry.recorded_at
        assert entry.recorded_at.microsecond == 0
        assert now - timedelta(seconds=30) < entry.recorded_at <= now + timedelta(seconds=1)


def test_a_turn_that_records_then_rejects_leaves_no_entry(owner):
    ref = Recorder.ref("rejecting")
    message = ref.enqueue().record_then_reject()
    run_once(message.instance_id, owner)
    with pytest.raises(Rejected):
        message.result()
    assert entries_of("rejecting") == []
    assert ref.snapshot().turns == 0


def test_a_turn_that_records_then_fails_once_records_exactly_once(owner, solid_settings):
    solid_settings(RETRY_DELAY=NO_DELAY)
    ref = Recorder.ref("failing-once")
    message = ref.enqueue().record_then_fail_once()
    run_once(message.instance_id, owner)
    assert Message.objects.get(id=message.id).attempt_count == 1
    assert membership(message.id) == "ready"  # the first attempt failed, nothing written
    assert entries_of("failing-once") == []
    drain(message.instance_id, owner)
    assert message.result() == 1
    stored = entries_of("failing-once")
    assert [e.idempotency_key for e in stored] == [activity_key(message.id, 0)]


@pytest.mark.parametrize("per_commit", [1, 16])
def test_twenty_grouped_turns_leave_twenty_entries(owner, solid_settings, per_commit):
    solid_settings(MAX_TURNS_PER_COMMIT=per_commit, MAX_COMMIT_DELAY=30)
    ref = Recorder.ref(f"grouped-{per_commit}")
    messages = [ref.enqueue().record() for _ in range(20)]
    assert drain(messages[0].instance_id, owner) == 20
    stored = entries_of(f"grouped-{per_commit}")
    assert [e.idempotency_key for e in stored] == [activity_key(m.id, 0) for m in messages]
    assert [e.quantity for e in stored] == list(range(1, 21))  # each turn's own state


def test_a_group_commits_the_entries_of_the_turns_before_a_failure(owner, solid_settings):
    solid_settings(MAX_TURNS_PER_COMMIT=16, MAX_COMMIT_DELAY=30, RETRY_DELAY=NO_DELAY)
    ref = Recorder.ref("group-failure")
    before = [ref.enqueue().record() for _ in range(3)]
    failing = ref.enqueue().record_then_fail_once()
    after = ref.enqueue().record()
    drain(before[0].instance_id, owner)
    keys = [e.idempotency_key for e in entries_of("group-failure")]
    assert keys == [activity_key(m.id, 0) for m in [*before, failing, after]]
    assert Message.objects.get(id=failing.id).attempt_count == 2


def test_a_group_that_is_rerun_after_a_failed_commit_records_once(owner, solid_settings):
    # A turn whose own writes make the commit fail (an explicit key already recorded with
    # another payload) makes the group rerun one turn per commit: the others record once.
    solid_settings(MAX_TURNS_PER_COMMIT=16, MAX_COMMIT_DELAY=30)
    record_activity("user:other", "something.else", idempotency_key="taken")
    ref = Recorder.ref("regrouped")
    before = [ref.enqueue().record() for _ in range(2)]
    conflicting = ref.enqueue().record(key="taken")
    after = ref.enqueue().record()
    drain(before[0].instance_id, owner)
    keys = [e.idempotency_key for e in entries_of("regrouped")]
    assert keys == [activity_key(m.id, 0) for m in [*before, after]]
    dead = DeadLetter.objects.get(message_id=conflicting.id)
    assert dead.exception_class == "tilttek_activity.errors.IdempotencyConflict"
    assert Message.objects.get(id=conflicting.id).attempt_count == 1  # never retried


def test_a_turn_that_loses_its_lease_before_the_commit_records_nothing(owner):
    ref = Recorder.ref("fenced-out")
    message = ref.enqueue().record_and_wait("fence")
    run_once_losing_the_lease(message.instance_id, owner, "fence:1")
    assert entries_of("fenced-out") == []
    core.holds.setdefault("fence:2", threading.Event()).set()
    assert run_once(message.instance_id, owner).processed == 1  # recovered, attempt 2
    assert [e.idempotency_key for e in entries_of("fenced-out")] == [activity_key(message.id, 0)]


def test_a_sync_call_records_with_its_turn():
    # (On PostgreSQL the commit that ends a sync caller's pass is the other form of the
    # one-statement group commit: it does not claim a next turn.)
    ref = Recorder.ref("sync")
    keys = ref.record()
    message = Message.objects.get(instance__actor_id="sync", sequence=1)
    assert keys == [activity_key(message.id, 0)]
    assert [e.idempotency_key for e in entries_of("sync")] == keys
    assert ref.snapshot().turns == 1


def test_an_explicit_key_is_honoured_once_across_turns_and_views(owner):
    ref = Recorder.ref("explicit")
    first = ref.enqueue().record(times=2, key="cart:explicit:opened")
    run_once(first.instance_id, owner)
    assert first.result() == ["cart:explicit:opened"] * 2
    assert [e.idempotency_key for e in entries_of("explicit")] == ["cart:explicit:opened"]
    # The same key and payload from a view afterwards: the kept entry, not a second one.
    again = record_activity(
        "user:explicit",
        "cart.item_added",
        object="cart:explicit",
        quantity=1,
        context={"turn": 1},
        idempotency_key="cart:explicit:opened",
    )
    assert again.created is False
    assert cancel_activity("cart:explicit:opened").created is True


def test_the_entries_of_a_turn_that_also_emits_commit_with_it(owner):
    ref = Recorder.ref("emitting")
    message = ref.enqueue().record_and_emit()
    run_once(message.instance_id, owner)
    assert [e.idempotency_key for e in entries_of("emitting")] == message.result()


def test_a_given_occurred_at_is_kept(owner):
    moment = datetime(2026, 1, 2, 3, 4, 5, 600000, tzinfo=UTC)
    message = Recorder.ref("dated").enqueue().record_at(moment.isoformat())
    run_once(message.instance_id, owner)
    (entry,) = entries_of("dated")
    assert entry.occurred_at == moment.replace(microsecond=0)
    assert entry.recorded_at > moment


# -- bad input ----------------------------------------------------------------------------------
@pytest.mark.parametrize("field", ["member", "verb", "quantity"])
def test_bad_input_fails_the_turn_at_once_without_retry(owner, field):
    ref = Recorder.ref(f"invalid-{field}")
    message = ref.enqueue().record_invalid(field)
    run_once(message.instance_id, owner)
    dead = DeadLetter.objects.get(message_id=message.id)
    assert dead.exception_class == "tilttek_activity.errors.InvalidActivity"
    assert field in dead.exception_message
    assert Message.objects.get(id=message.id).attempt_count == 1
    assert ref.snapshot().turns == 0
    assert not Entry.objects.filter(member=f"user:invalid-{field}").exists()


@pytest.mark.django_db(transaction=True, databases=["default", "shard_b"])
def test_a_journal_on_another_database_gets_the_entries_through_the_outbox(owner, settings):
    """No transaction spans two databases: the turn stages each entry as an effect in its
    fenced commit, and the effect worker writes it once per key on the journal's alias."""
    from django.core.checks import INFO

    from solid_objects.models import Effect
    from solid_objects.outbox.effects import run_pending_effects

    settings.TILTTEK_ACTIVITY = {"DATABASE": "shard_b"}  # tests/settings.py's second alias
    infos = [m for m in run_checks() if m.id == "solid_objects.I001"]
    assert [m.level for m in infos] == [INFO]
    assert "tests.recorder" in infos[0].msg

    message = Recorder.ref("elsewhere").enqueue().record(times=2)
    run_once(message.instance_id, owner)
    assert message.result() is not None
    keys = message.result()
    assert keys == [activity_key(message.id, n, database="default") for n in range(2)]
    assert not Entry.objects.filter(member="user:elsewhere").exists()  # not in the commit
    assert Effect.objects.filter(name="__record_activity__").count() == 2
    assert run_pending_effects() == 2
    entries = Entry.objects.using("shard_b").filter(member="user:elsewhere")
    assert sorted(entries.values_list("idempotency_key", flat=True)) == sorted(keys)
    # A redelivery (an effect worker that died after writing) writes nothing more.
    Effect.objects.update(status="pending", attempt_count=0)
    assert run_pending_effects() == 2
    assert entries.count() == 2
    settings.TILTTEK_ACTIVITY = {}
    assert not [m for m in run_checks() if m.id == "solid_objects.I001"]


# -- signals ----------------------------------------------------------------------------------
def test_activity_recorded_is_sent_after_the_commit_with_the_stored_entry(owner):
    received = []

    def receiver(sender, entry, using, **kwargs):
        # After the commit: the row is there outside the turn's transaction.
        received.append((entry, Entry.objects.filter(position=entry.position).exists()))

    activity_recorded.connect(receiver)
    try:
        message = Recorder.ref("signalled").enqueue().record(times=2)
        run_once(message.instance_id, owner)
    finally:
        activity_recorded.disconnect(receiver)
    stored = entries_of("signalled")
    assert [entry.position for entry, _ in received] == [e.position for e in stored]
    assert all(seen for _, seen in received)
    assert [entry.recorded_at for entry, _ in received] == [e.recorded_at for e in stored]


def test_no_signal_for_a_rejected_turn(owner):
    received = []

    def receiver(**kwargs):
        received.append(kwargs["entry"])

    activity_recorded.connect(receiver)
    try:
        message = Recorder.ref("quiet").enqueue().record_then_reject()
        run_once(message.instance_id, owner)
        Recorder.ref("quiet").enqueue().record()  # a turn that does record, afterwards
        drain(message.instance_id, owner)
    finally:
        activity_recorded.disconnect(receiver)
    assert [entry.idempotency_key for entry in received] == [
        e.idempotency_key for e in entries_of("quiet")
    ]
    assert len(received) == 1


# -- statements -----------------------------------------------------------------------------------
#: vendor -> statements of a warm commit that writes journal entries, beyond the same commit
#: writing none (PostgreSQL: the INSERT is part of the commit's one statement; MariaDB: one
#: INSERT ... RETURNING; SQLite: one INSERT OR IGNORE ... RETURNING), whether the commit
#: holds one turn or a group of them.
EXTRA_STATEMENTS = {"postgresql": 0, "mysql": 1, "sqlite": 1}
#: vendor -> (one commit per turn, 16 per commit): statements per recording turn, at most
#: (recorded: PostgreSQL 1.06 / 0.19, as without recording; MariaDB 8.6 / 1.13; SQLite
#: 8.4 / 1.0).
BOUNDS = {"postgresql": (1.5, 0.5), "mysql": (9.5, 1.25), "sqlite": (9.5, 1.25)}


@pytest.mark.parametrize("per_commit", [1, 16])
def test_statements_of_a_turn_that_records_one_entry(
    owner, solid_settings, record_property, per_commit
):
    solid_settings(MAX_TURNS_PER_COMMIT=per_commit, MAX_COMMIT_DELAY=30)
    turns = 16

    def per_turn(name: str, operation: str) -> float:
        cache = ActivationCache()
        ref = Recorder.ref(f"{name}-{per_commit}")
        first = getattr(ref.enqueue(), operation)()
        run_pass(acquire(alias(), owner, [first.instance_id], cache), cache=cache)  # warm
        for _ in range(turns):
            getattr(ref.enqueue(), operation)()

        def run() -> None:
            activation = acquire(alias(), owner, [first.instance_id], cache)
            assert run_pass(activation, cache=cache).processed == turns

        return count_statements(run) / turns

    recording = per_turn("counted", "record")
    plain = per_turn("baseline", "bump")
    record_property(f"statements_per_recording_turn_{per_commit}", recording)
    extra = EXTRA_STATEMENTS[connection.vendor]
    # Grouped, one statement writes the entries of the whole group.
    assert recording <= plain + extra / per_commit + 0.01, (recording, plain)
    assert recording <= BOUNDS[connection.vendor][per_commit > 1]
    assert Entry.objects.filter(member__startswith="user:counted-").count() == turns + 1


# -- a worker killed after recording --------------------------------------------------------------
@pytest.mark.slow
def test_a_turn_redelivered_after_its_worker_is_killed_records_once(commands, tmp_path):
    settings = {**FAST, "PROCESS_ALIVE_THRESHOLD": 3}
    release = tmp_path / "release"
    message = Recorder.ref("killed").enqueue().record_and_hold(str(release))
    first = commands.start("run_actor_worker", settings=settings)
    wait_until(lambda: Path(f"{release}.entered").exists(), what="the handler to start")
    os.kill(first.pid, signal.SIGKILL)  # after record_activity(), before the commit
    assert commands.wait_exit(first) == -signal.SIGKILL
    assert entries_of("killed") == []
    release.write_text("go")
    second = commands.start("run_actor_worker", settings=settings)
    wait_until(lambda: message.status() == "completed", what="another worker to finish it")
    assert Message.objects.get(id=message.id).attempt_count == 2
    assert [e.idempotency_key for e in entries_of("killed")] == [activity_key(message.id, 0)]
    assert commands.terminate(second) == 0, commands.log(second)


@pytest.mark.django_db(transaction=True, databases=["default", "shard_b"])  # as test_checks.py
def test_check_command_passes_with_the_journal_on_the_actors_database():
    call_command("check")
