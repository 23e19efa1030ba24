"""A turn whose output cannot be stored (issue 9, defect 3): rejection details, results,
state, staged effects, actor messages, reminders and broadcast values that the encoder or a
database refuses (a lone surrogate, a NUL, an integer of more than 4,300 digits, NaN).

Each is a failure of that turn alone, without retry, recorded at once as a dead letter whose
error names ``InvalidPayload``: the lease and the claim are released, the actor's next
message runs, a worker's thread keeps going and a sync caller gets ``MessageFailed``.
Before, such an error escaped the turn: it ended the worker's role thread with the lease and
the claim held until they expired (then ``LostActivation``), retried a failure that could
never succeed, or gave the sync caller a raw ``UnicodeEncodeError``/``ValueError``.
"""

from __future__ import annotations

import pytest
from django.db import connection

from solid_objects import MessageFailed, StateMigrationError
from solid_objects.db.vendors import dialect_for
from solid_objects.models import ClaimedMessage, DeadLetter, Instance, Message, Process
from tests.factories import InstanceFactory
from tests.support.waiting import wait_until
from tests.testapp.actors.inputs import BadMigration, Echo, Shown

from .helpers import membership

pytestmark = pytest.mark.django_db(transaction=True)

INVALID = "solid_objects.errors.InvalidPayload"

#: (actor class, operation, argument, error class recorded)
CASES = {
    "rejection details with a lone surrogate": (
        Echo,
        "refuse_built",
        {"why": {"__bad__": "surrogate"}},
        INVALID,
    ),
    "rejection details with a huge integer": (
        Echo,
        "refuse_built",
        [{"__bad__": "huge_int"}],
        INVALID,
    ),
    "rejection details with a NUL key": (Echo, "refuse_built", {"__bad__": "nul_key"}, INVALID),
    "rejection raised with an invalid code": (
        Echo,
        "raise_rejected",
        "not a valid code!",
        "solid_objects.errors.InvalidRejectionCode",
    ),
    "result with a NUL": (Echo, "return_built", {"__bad__": "nul"}, INVALID),
    "result with a huge integer": (Echo, "return_built", {"__bad__": "huge_int"}, INVALID),
    "state with a lone surrogate": (Echo, "keep_built", {"__bad__": "surrogate"}, INVALID),
    "state with a NUL": (Echo, "keep_built", [{"__bad__": "nul"}], INVALID),
    "effect arguments with a lone surrogate key": (
        Echo,
        "emit_built",
        {"__bad__": "surrogate_key"},
        INVALID,
    ),
    "actor message arguments with a NUL": (Echo, "send_built", {"__bad__": "nul"}, INVALID),
    "reminder delay of NaN": (Echo, "schedule_built", {"__bad__": "nan"}, INVALID),
    "broadcast value with a lone surrogate": (Shown, "show", {"__bad__": "surrogate"}, INVALID),
}

FAST = {
    "POLLING_INTERVAL": 0.05,
    "IDLE_POLLING_INTERVAL": 0.25,
    "PROCESS_HEARTBEAT_INTERVAL": 0.5,
    # A stuck claim would wait a whole lease: far longer than any wait below.
    "LEASE_DURATION": 120,
}


def assert_failed_at_once(message_id: int, instance_id: int, error_class: str) -> None:
    dead = DeadLetter.objects.get(message_id=message_id)
    assert dead.exception_class == error_class, dead.exception_message
    assert dead.attempts == 1  # never retried
    assert not ClaimedMessage.objects.filter(instance_id=instance_id).exists()
    assert Instance.objects.get(id=instance_id).activation_token is None  # lease released


@pytest.mark.parametrize("case", CASES)
def test_a_sync_call_gets_message_failed_and_the_actor_moves_on(case):
    cls, operation, argument, error_class = CASES[case]
    ref = cls.ref(f"sync-{list(CASES).index(case)}")
    with pytest.raises(MessageFailed) as caught:
        getattr(ref.sync(timeout=30), operation)(argument)
    assert caught.value.error["class"] == error_class
    message = Message.objects.get(id=caught.value.message_id)
    assert_failed_at_once(message.id, message.instance_id, error_class)
    # Nothing the turn did was kept, and the next message runs at once.
    assert ref.snapshot().state.get("data") is None
    if cls is Shown:
        assert ref.show("fine") is True
    else:
        assert ref.echo("next") == "next"


def test_a_handler_error_whose_text_cannot_be_stored_is_recorded_escaped():
    """The error of an ordinary failure is stored too: a lone surrogate or a NUL in the
    exception's message is written as an escape instead of failing the recording."""
    ref = Echo.ref("escaped")
    with pytest.raises(MessageFailed) as caught:
        ref.sync(timeout=30).fail_built({"__bad__": "nul_and_surrogate"})
    error = caught.value.error
    assert error["class"] == "tests.testapp.actors.inputs.NotRetryable"
    assert error["message"] == "nul \\x00 and lone \\udc00 surrogate"
    dead = DeadLetter.objects.get(message_id=caught.value.message_id)
    assert dead.attempts == 1
    assert dead.exception_message == error["message"]
    assert ref.echo(1) == 1


@pytest.mark.slow
def test_a_worker_records_each_such_turn_at_once_and_keeps_going(commands):
    """One ``run_actor_worker`` process runs every case (one actor each, followed by an
    ordinary message): each bad turn is dead-lettered on its first attempt, each follow-up
    completes well within one lease, and the worker's threads never crash."""
    sent = {}
    for index, (case, (cls, operation, argument, error_class)) in enumerate(CASES.items()):
        ref = cls.ref(f"worker-{index}")
        bad = getattr(ref.enqueue(), operation)(argument)
        after = ref.enqueue().show("fine") if cls is Shown else ref.enqueue().echo(index)
        sent[case] = (bad, after, error_class)
    proc = commands.start("run_actor_worker", settings=FAST)

    def all_done() -> bool:
        return all(membership(after.id) == "done" for _, after, _ in sent.values())

    wait_until(all_done, timeout=45, what="the worker to finish every actor's messages")
    for case, (bad, after, error_class) in sent.items():
        assert membership(bad.id) == "dead", case
        assert_failed_at_once(bad.id, bad.instance_id, error_class)
        assert after.status() == "completed", case
    assert proc.poll() is None, commands.log(proc)
    assert "crashed" not in commands.log(proc), commands.log(proc)
    assert Process.objects.filter(pid=proc.pid, shutdown_state="running").exists()


def test_a_migrated_state_that_cannot_be_stored_refuses_the_activation_cleanly():
    """Like any failed migration: ``StateMigrationError``, the message goes back to the
    mailbox uncounted and the lease is released (before, the encoder's error escaped with the
    lease and the claim held until they expired)."""
    instance = InstanceFactory(actor_type="tests.inputs.bad_migration", actor_id="old")
    dialect = dialect_for(connection)
    with connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE {dialect.t_instances} SET state = {dialect.json}, state_version = 1 "
            "WHERE id = %s",
            ['{"recipe": {"__bad__": "surrogate"}}', instance.id],
        )
    ref = BadMigration.ref("old")
    with pytest.raises(StateMigrationError):
        ref.sync(timeout=10).bump()
    message = Message.objects.get(instance_id=instance.id)
    assert membership(message.id) == "ready"
    assert message.attempt_count == 0
    instance.refresh_from_db()
    assert instance.activation_token is None
    assert instance.state_version == 1
    assert not ClaimedMessage.objects.exists()
