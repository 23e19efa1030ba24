"""Turns that fail, retry, dead-letter, migrate state or group their commits (§A4 to §A7)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.contrib.auth.models import Group
from django.core.management import CommandError, call_command
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from solid_objects import MessageFailed, StateMigrationError
from solid_objects.conf import backoff_ceiling, default_retry_delay
from solid_objects.db.vendors import dialect_for
from solid_objects.dead_letters import DeadLetterNotFound, retry_dead_letter
from solid_objects.models import DeadLetter, Instance, Message, ReadyMessage
from tests.factories import InstanceFactory
from tests.support.statements import capturing_statements
from tests.testapp.actors.core import Counter, Versioned
from tests.testapp.actors.runtime_tests import GroupMaker, Shaper, Writer

from .helpers import drain, membership, run_once

pytestmark = pytest.mark.django_db(transaction=True)

NO_DELAY = "tests.runtime.helpers.no_delay"
LONG_DELAY = "tests.runtime.helpers.long_delay"


def commits(queries: CaptureQueriesContext) -> int:
    """Transactions that committed: explicit ``COMMIT``s, plus writing statements run in
    autocommit (PostgreSQL commits a group and claims the next turn in one statement)."""
    count = 0
    in_transaction = False
    for query in queries.captured_queries:
        sql = query["sql"].strip().upper()
        if sql.startswith("BEGIN"):
            in_transaction = True
        elif sql in ("COMMIT", "ROLLBACK"):
            count += sql == "COMMIT"
            in_transaction = False
        elif not in_transaction and not sql.startswith(("SELECT", "PRAGMA", "SET", "SHOW")):
            count += 1
    return count


# -- retries and dead letters --------------------------------------------------------------------
def test_default_retry_delay_backs_off_exponentially_up_to_a_minute():
    assert [backoff_ceiling(n) for n in (1, 2, 3, 4, 7, 8, 20)] == [
        1.0,
        2.0,
        4.0,
        8.0,
        60.0,
        60.0,
        60.0,
    ]


def test_default_retry_delay_is_full_jitter_under_the_ceiling():
    for attempt in (1, 3, 7, 20):
        samples = [default_retry_delay(attempt) for _ in range(200)]
        assert all(0.0 <= delay <= backoff_ceiling(attempt) for delay in samples)
        # Spread over the whole range, not clustered at the ceiling.
        assert min(samples) < backoff_ceiling(attempt) * 0.25
        assert max(samples) > backoff_ceiling(attempt) * 0.75


def test_a_retry_waits_and_blocks_later_messages_of_that_actor_only(owner, solid_settings):
    solid_settings(RETRY_DELAY=LONG_DELAY)
    failing = Counter.ref("failing")
    boom = failing.enqueue().boom()
    behind = failing.enqueue().add(1)
    other = Counter.ref("other").enqueue().add(1)

    result = run_once(boom.instance_id, owner)
    assert result.processed == 1  # the group ended at the failure
    stored = Message.objects.get(id=boom.id)
    assert stored.attempt_count == 1
    assert stored.error["class"] == "builtins.RuntimeError"
    assert stored.error["message"] == "boom"
    assert stored.last_failed_at is not None
    ready = ReadyMessage.objects.get(message_id=boom.id)
    assert ready.available_at > timezone.now() + timedelta(seconds=3000)  # retry_delay(1)
    assert failing.snapshot().value == 0  # the failed turn's state change was rolled back

    # The actor is not due: nothing runs, and the message behind waits untouched.
    with connection.cursor() as cursor:
        due = dialect_for(connection).due_instances(cursor, 10)
    assert boom.instance_id not in due
    assert other.instance_id in due
    assert run_once(boom.instance_id, owner) is None
    assert Message.objects.get(id=behind.id).attempt_count == 0
    assert membership(behind.id) == "ready"
    # Another actor proceeds.
    assert run_once(other.instance_id, owner).processed == 1
    assert other.status() == "completed"
    assert Instance.objects.get(id=boom.instance_id).activation_token is None


def test_dead_letter_after_max_attempts_then_the_mailbox_moves_on(solid_settings):
    solid_settings(MAX_ATTEMPTS=3, RETRY_DELAY=NO_DELAY)
    ref = Counter.ref("poisoned")
    boom = ref.enqueue().boom()
    assert ref.add(1) == 1  # the sync caller drives the failing message to its dead letter
    stored = Message.objects.get(id=boom.id)
    assert stored.attempt_count == 3
    assert membership(boom.id) == "dead"
    dead = DeadLetter.objects.get(message_id=boom.id)
    assert dead.attempts == 3
    assert dead.exception_class == "builtins.RuntimeError"
    assert dead.exception_message == "boom"
    assert isinstance(dead.backtrace, list) and dead.backtrace
    assert (dead.actor_type, dead.actor_id, dead.operation) == ("tests.counter", "poisoned", "boom")
    assert dead.arguments == {}
    with pytest.raises(MessageFailed) as caught:
        boom.result(timeout=1)
    assert caught.value.message_id == boom.id
    assert caught.value.error["class"] == "builtins.RuntimeError"
    assert ref.snapshot().value == 1


def test_non_retryable_errors_dead_letter_at_once(solid_settings):
    solid_settings(RETRY_DELAY=NO_DELAY)
    ref = Counter.ref("fatal")
    with pytest.raises(MessageFailed):
        ref.boom(retryable=False)
    message = Message.objects.get(operation="boom")
    assert message.attempt_count == 1
    assert DeadLetter.objects.get(message=message).attempts == 1


def _dead_letter(ref) -> DeadLetter:
    with pytest.raises(MessageFailed):
        ref.boom(retryable=False)
    return DeadLetter.objects.get(actor_id=ref.actor_id)


def test_dead_letter_retry_is_idempotent():
    ref = Counter.ref("retry-me")
    dead = _dead_letter(ref)
    assert ref.add(1) == 1
    first = retry_dead_letter(dead.id)
    again = retry_dead_letter(dead.id)
    assert again == first
    retried = Message.objects.get(id=first.id)
    assert retried.idempotency_key == f"dead-letter:{dead.id}"
    assert (retried.operation, retried.arguments, retried.sequence) == (
        "boom",
        {"retryable": False},
        3,
    )
    assert retried.delivery_mode == "async"
    dead.refresh_from_db()
    assert dead.retried_message_id == first.id
    assert Message.objects.filter(idempotency_key__startswith="dead-letter:").count() == 1
    with pytest.raises(DeadLetterNotFound):
        retry_dead_letter(dead.id + 1000)


def test_dead_letter_command_lists_and_retries_idempotently(capsys):
    ref = Counter.ref("retry-cmd")
    dead = _dead_letter(ref)
    call_command("solid_objects_dead_letters")
    listing = capsys.readouterr().out
    assert "retry-cmd" in listing and "boom" in listing
    call_command("solid_objects_dead_letters", retry=dead.id)
    call_command("solid_objects_dead_letters", retry=dead.id)
    keyed = Message.objects.filter(idempotency_key=f"dead-letter:{dead.id}")
    assert keyed.count() == 1
    retried = keyed.get()
    assert retried.sequence == 2
    assert membership(retried.id) == "ready"
    output = capsys.readouterr().out
    assert output.count(f"retried as message {retried.id}") == 2
    with pytest.raises(CommandError):
        call_command("solid_objects_dead_letters", retry=dead.id + 1000)


def test_admin_retry_action_and_button_are_idempotent(admin_client):
    from django.contrib.admin.models import LogEntry
    from django.urls import reverse

    dead = _dead_letter(Counter.ref("retry-admin"))
    changelist = reverse("admin:solid_objects_deadletter_changelist")
    assert admin_client.get(changelist).status_code == 200
    for _ in range(2):
        response = admin_client.post(
            changelist, {"action": "retry_selected", "_selected_action": [dead.id]}
        )
        assert response.status_code == 302
    button = reverse("admin:solid_objects_deadletter_retry", args=[dead.id])
    assert admin_client.post(button).status_code == 302
    keyed = Message.objects.filter(idempotency_key=f"dead-letter:{dead.id}")
    assert keyed.count() == 1
    dead.refresh_from_db()
    assert dead.retried_message_id == keyed.get().id
    assert LogEntry.objects.filter(object_id=str(dead.id)).count() == 3  # audit log


# -- handler discipline --------------------------------------------------------------------------
def test_direct_orm_write_is_forbidden_and_dead_letters_without_retry(solid_settings):
    solid_settings(RETRY_DELAY=NO_DELAY)
    with pytest.raises(MessageFailed) as caught:
        Counter.ref("writer").write_directly()
    assert caught.value.error["class"] == "solid_objects.errors.ApplicationWriteForbidden"
    assert Group.objects.count() == 0
    message = Message.objects.get(operation="write_directly")
    assert message.attempt_count == 1
    dead = DeadLetter.objects.get(message=message)
    assert dead.exception_class == "solid_objects.errors.ApplicationWriteForbidden"
    assert dead.attempts == 1


def test_a_swallowed_write_attempt_is_still_forbidden():
    with pytest.raises(MessageFailed) as caught:
        Writer.ref("sneaky").write_and_swallow()
    assert caught.value.error["class"] == "solid_objects.errors.ApplicationWriteForbidden"
    assert Group.objects.count() == 0
    if connection.features.has_select_for_update:  # SQLite has no row locks to refuse
        with pytest.raises(MessageFailed) as caught:
            Writer.ref("sneaky").lock_rows()  # SELECT ... FOR UPDATE locks: refused as well
        assert caught.value.error["class"] == "solid_objects.errors.ApplicationWriteForbidden"
        assert DeadLetter.objects.get(operation="lock_rows").attempts == 1


def test_reads_are_allowed_in_handlers_and_the_guard_ends_with_the_turn():
    Group.objects.create(name="existing")
    assert Writer.ref("reader").read_only() == 1
    Group.objects.create(name="after the turn")  # the caller's own writes still work
    assert Group.objects.count() == 2


def test_oversized_result_and_state_fail_without_retry(solid_settings):
    solid_settings(MAX_RESULT_BYTES=100, MAX_STATE_BYTES=200, RETRY_DELAY=NO_DELAY)
    ref = Counter.ref("sizes")
    with pytest.raises(MessageFailed) as caught:
        ref.big_result(500)
    assert caught.value.error["class"] == "solid_objects.errors.PayloadTooLarge"
    assert ref.big_result(50) == "x" * 50
    shaper = Shaper.ref("sizes")
    with pytest.raises(MessageFailed) as caught:
        shaper.fill(500)
    assert caught.value.error["class"] == "solid_objects.errors.PayloadTooLarge"
    assert shaper.snapshot().data is None
    assert DeadLetter.objects.filter(attempts=1).count() == 2


def test_rejection_details_that_are_not_json_fail_the_turn_cleanly(solid_settings):
    solid_settings(RETRY_DELAY=NO_DELAY)
    ref = Shaper.ref("details")
    with pytest.raises(MessageFailed) as caught:
        ref.sync(timeout=20).reject_with_set()
    assert caught.value.error["class"] == "solid_objects.errors.InvalidPayload"
    assert Instance.objects.get(actor_id="details").activation_token is None
    assert ref.fill(3) == 3  # the mailbox is not stuck


def test_results_and_state_nested_deeper_than_the_limit_fail_cleanly(solid_settings):
    solid_settings(RETRY_DELAY=NO_DELAY)
    ref = Shaper.ref("deep")
    for operation in ("nest_state", "nest_result"):
        with pytest.raises(MessageFailed) as caught:
            getattr(ref.sync(timeout=20), operation)(150)
        assert caught.value.error["class"] == "solid_objects.errors.InvalidPayload"
    assert ref.nest_state(20) == 20
    assert ref.nest_result(20) == ref.snapshot().data
    assert Instance.objects.get(actor_id="deep").activation_token is None


# -- state versions ------------------------------------------------------------------------------
def _store_state(actor_id: str, state: str, version: int) -> Instance:
    instance = InstanceFactory(actor_type="tests.versioned", actor_id=actor_id)
    dialect = dialect_for(connection)
    with connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE {dialect.t_instances} SET state = {dialect.json}, state_version = %s "
            "WHERE id = %s",
            [state, version, instance.id],
        )
    return instance


def test_state_is_migrated_on_activation_and_persisted():
    instance = _store_state("old", '{"name": "before"}', 1)
    ref = Versioned.ref("old")
    snapshot = ref.snapshot()  # snapshots migrate in memory only
    assert (snapshot.currency, snapshot.state_version) == ("EUR", 2)
    assert Instance.objects.get(id=instance.id).state_version == 1

    assert ref.rename("after") == {"name": "after", "currency": "EUR"}
    instance.refresh_from_db()
    assert instance.state_version == 2
    assert instance.state == {"name": "after", "currency": "EUR"}


def test_a_snapshot_of_state_newer_than_the_code_is_refused_like_an_activation():
    _store_state("future-snapshot", '{"name": "from the future"}', 3)
    with pytest.raises(StateMigrationError):
        Versioned.ref("future-snapshot").snapshot()  # never unmigrated state read as current


def test_state_newer_than_the_code_refuses_activation(owner):
    instance = _store_state("future", '{"name": "from the future"}', 3)
    ref = Versioned.ref("future")
    with pytest.raises(StateMigrationError):
        ref.sync(timeout=5).rename("now")
    message = Message.objects.get(instance_id=instance.id)
    assert message.attempt_count == 0  # the attempt was not consumed
    assert membership(message.id) == "ready"
    assert DeadLetter.objects.count() == 0
    instance.refresh_from_db()
    assert instance.state_version == 3
    assert instance.state == {"name": "from the future"}
    assert instance.activation_token is None
    # A worker is refused the same way (once the message is due again).
    ReadyMessage.objects.filter(message=message).update(
        available_at=timezone.now() - timedelta(minutes=1)
    )
    with pytest.raises(StateMigrationError):
        run_once(instance.id, owner)
    message.refresh_from_db()
    assert message.attempt_count == 0
    assert membership(message.id) == "ready"
    assert DeadLetter.objects.count() == 0


def test_state_written_by_newer_code_refuses_a_warm_cached_activation():
    """A process still caching the actor must not reuse (and later write back) its older
    state after newer code upgraded the row: same revision, newer state version."""
    ref = Versioned.ref("warm")
    assert ref.rename("cached") == {"name": "cached", "currency": None}  # born at version 2
    instance = Instance.objects.get(actor_id="warm")
    dialect = dialect_for(connection)
    with connection.cursor() as cursor:  # newer code migrated it to version 3 (same revision)
        cursor.execute(
            f"UPDATE {dialect.t_instances} SET state = {dialect.json}, state_version = 3 "
            "WHERE id = %s",
            ['{"name": "cached", "currency": "EUR", "v3": true}', instance.id],
        )
    with pytest.raises(StateMigrationError):
        ref.sync(timeout=5).rename("old code")
    instance.refresh_from_db()
    assert instance.state_version == 3
    assert instance.state == {"name": "cached", "currency": "EUR", "v3": True}


# -- grouped commits ------------------------------------------------------------------------------
@pytest.mark.parametrize("per_commit", [16, 1])
def test_a_failure_in_the_middle_of_a_group(owner, solid_settings, per_commit):
    solid_settings(MAX_TURNS_PER_COMMIT=per_commit, MAX_COMMIT_DELAY=30, RETRY_DELAY=LONG_DELAY)
    ref = Counter.ref("group")
    first = ref.enqueue().add(1)
    second = ref.enqueue().add(2)
    boom = ref.enqueue().boom()
    follower = ref.enqueue().add(4)

    with capturing_statements() as queries:
        result = run_once(first.instance_id, owner)
    assert result.processed == 3
    assert commits(queries) == (2 if per_commit > 1 else 4)  # lease + one group, or per turn
    assert first.status() == second.status() == "completed"
    assert (first.result(), second.result()) == (1, 3)
    stored = Message.objects.get(id=boom.id)
    assert membership(boom.id) == "ready"
    assert stored.attempt_count == 1
    assert stored.error["message"] == "boom"
    assert membership(follower.id) == "ready"
    assert Message.objects.get(id=follower.id).attempt_count == 0
    instance = Instance.objects.get(id=first.instance_id)
    assert instance.state == {"value": 3}
    assert instance.state_revision == 2
    assert instance.activation_token is None


@pytest.mark.parametrize("per_commit", [16, 1])
def test_rejections_and_queries_inside_a_group(owner, solid_settings, per_commit):
    solid_settings(MAX_TURNS_PER_COMMIT=per_commit, MAX_COMMIT_DELAY=30)
    ref = Counter.ref("mixed")
    sent = [
        ref.enqueue().add(1),
        ref.enqueue().refuse("no"),
        ref.enqueue().total(),
        ref.enqueue().add(2),
        ref.enqueue().record_sequence(),
    ]
    assert drain(sent[0].instance_id, owner) == 5
    assert [m.status() for m in sent] == [
        "completed",
        "rejected",
        "completed",
        "completed",
        "completed",
    ]
    assert sent[2].result() == 1
    assert sent[4].result() == 5
    instance = Instance.objects.get(id=sent[0].instance_id)
    assert instance.state == {"value": 3, "seen": [5]}
    assert instance.state_revision == 5
    assert all(m.attempt_count == 1 for m in Message.objects.all())


@pytest.mark.parametrize("per_commit", [16, 1])
def test_a_failing_head_then_its_retry_runs_alone(owner, solid_settings, per_commit):
    solid_settings(
        MAX_TURNS_PER_COMMIT=per_commit, MAX_COMMIT_DELAY=30, RETRY_DELAY=NO_DELAY, MAX_ATTEMPTS=2
    )
    ref = Counter.ref("head")
    boom = ref.enqueue().boom()
    rest = [ref.enqueue().add(1) for _ in range(3)]
    assert run_once(boom.instance_id, owner).processed == 1
    assert Message.objects.get(id=boom.id).attempt_count == 1
    result = run_once(boom.instance_id, owner)  # attempt 2 = the last: dead, then the rest
    assert membership(boom.id) == "dead"
    assert result.processed == 1
    drain(boom.instance_id, owner)
    assert [m.status() for m in rest] == ["completed"] * 3
    assert ref.snapshot().value == 3


# -- activation passes -----------------------------------------------------------------------------
@pytest.mark.parametrize("per_commit", [16, 1])
def test_a_pass_yields_after_its_budget_so_other_actors_get_a_turn(
    owner, solid_settings, per_commit
):
    solid_settings(
        MAX_MESSAGES_PER_ACTIVATION_PASS=5, MAX_TURNS_PER_COMMIT=per_commit, MAX_COMMIT_DELAY=30
    )
    hot = Counter.ref("hot")
    sent = [hot.enqueue().add(1) for _ in range(12)]
    waiting = Counter.ref("waiting").enqueue().add(1)

    assert run_once(sent[0].instance_id, owner).processed == 5
    assert hot.snapshot().value == 5
    assert Instance.objects.get(id=sent[0].instance_id).activation_token is None
    with connection.cursor() as cursor:
        candidates = dialect_for(connection).due_instances(cursor, 10)
    assert list(candidates) == [waiting.instance_id, sent[0].instance_id]  # the hot actor went last
    assert drain(sent[0].instance_id, owner) == 7
    assert [m.status() for m in sent] == ["completed"] * 12


def test_one_worker_alternates_between_a_hot_actor_and_a_waiting_one(owner, solid_settings):
    """The lease goes to the candidate that waited longest, not to the lowest instance id:
    after its pass budget the hot actor goes to the back of the line."""
    from solid_objects.runtime.roles import ActorRole
    from solid_objects.runtime.supervisor import Supervisor

    solid_settings(MAX_MESSAGES_PER_ACTIVATION_PASS=5, MAX_COMMIT_DELAY=30)
    hot = Counter.ref("hot")  # created first: the lower instance id
    sent = [hot.enqueue().add(1) for _ in range(20)]
    waiting = Counter.ref("waiting").enqueue().add(1)
    role = ActorRole(Supervisor(roles=[], install_signal_handlers=False, wake_ups=False))
    role.process_id = owner

    assert role.run_once()
    assert hot.snapshot().value == 5
    assert role.run_once()
    assert waiting.status() == "completed"  # not starved behind the remaining 15
    assert hot.snapshot().value == 5
    while role.run_once():
        pass
    assert [m.status() for m in sent] == ["completed"] * 20


def test_a_lone_hot_actor_keeps_its_activation_past_the_pass_budget(owner, solid_settings):
    """The pass budget makes room for other actors; when none waits, it is renewed instead
    of releasing and re-leasing the same actor."""
    from solid_objects.runtime.roles import ActorRole
    from solid_objects.runtime.supervisor import Supervisor

    solid_settings(MAX_MESSAGES_PER_ACTIVATION_PASS=5, MAX_COMMIT_DELAY=30)
    hot = Counter.ref("alone")
    sent = [hot.enqueue().add(1) for _ in range(20)]
    role = ActorRole(Supervisor(roles=[], install_signal_handlers=False, wake_ups=False))
    role.process_id = owner

    generation = Instance.objects.get(actor_id="alone").activation_generation
    assert role.run_once()
    assert hot.snapshot().value == 20  # one pass, not four
    assert Instance.objects.get(actor_id="alone").activation_generation == generation + 1
    assert [m.status() for m in sent] == ["completed"] * 20


# -- commits that fail ---------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["taken", "explode"], ids=["integrity-error", "action-raises"])
def test_a_turn_whose_commit_fails_is_retried_then_dead_lettered(solid_settings, name):
    solid_settings(MAX_ATTEMPTS=2, RETRY_DELAY=NO_DELAY)
    Group.objects.create(name="taken")
    ref = GroupMaker.ref("maker")
    with pytest.raises(MessageFailed) as caught:
        ref.sync(timeout=30).create(name)
    expected = "django.db.utils.IntegrityError" if name == "taken" else "builtins.ValueError"
    assert caught.value.error["class"] == expected
    message = Message.objects.get(operation="create")
    assert message.attempt_count == 2
    assert DeadLetter.objects.get(message=message).attempts == 2
    assert ref.snapshot().created == []  # nothing of the failed turn was committed
    instance = Instance.objects.get(actor_id="maker")
    assert instance.activation_token is None  # not stuck until the lease runs out
    assert ref.sync(timeout=30).create("fine") == 1
    assert Group.objects.filter(name="fine").exists()


@pytest.mark.parametrize("per_commit", [16, 1])
def test_a_failed_group_commit_is_pinned_on_the_turn_that_caused_it(
    owner, solid_settings, per_commit
):
    solid_settings(MAX_TURNS_PER_COMMIT=per_commit, MAX_COMMIT_DELAY=30, RETRY_DELAY=LONG_DELAY)
    Group.objects.create(name="taken")
    ref = GroupMaker.ref("grouped-maker")
    before = ref.enqueue().create("a")
    failing = ref.enqueue().create("taken")
    after = ref.enqueue().create("b")

    result = run_once(before.instance_id, owner)
    assert result.processed == 2
    assert before.result() == 1
    assert Group.objects.filter(name="a").exists()
    stored = Message.objects.get(id=failing.id)
    assert stored.attempt_count == 1
    assert stored.error["class"] == "django.db.utils.IntegrityError"
    assert membership(failing.id) == "ready"  # retried later; the message behind waits
    assert membership(after.id) == "ready"
    assert Message.objects.get(id=after.id).attempt_count == 0
    assert not Group.objects.filter(name="b").exists()
    instance = Instance.objects.get(id=before.instance_id)
    assert instance.state == {"created": ["a"]}
    assert instance.activation_token is None
