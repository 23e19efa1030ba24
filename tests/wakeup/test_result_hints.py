"""Result and hand-off hints (issue 9, item 9): a sync caller waiting for a message another
process runs hears its outcome at once, and work left behind by a sync caller's pass is
handed to workers and waiting callers instead of waiting for their next poll."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from asgiref.sync import async_to_sync
from django.db import connection
from django.test.utils import CaptureQueriesContext

from solid_objects.db.notify import CHANNEL as PG_CHANNEL
from solid_objects.mailbox import enqueue
from solid_objects.models import Instance
from solid_objects.references import message_reference
from solid_objects.registry import get_spec
from solid_objects.runtime import processes
from solid_objects.runtime.wakeup import progress
from solid_objects.runtime.wakeup.listener import ring
from solid_objects.sync import step
from solid_objects.testing import pause_at
from tests.testapp.actors.core import Counter
from tests.testapp.actors.runtime_tests import AttemptBlocker

from ..runtime.helpers import alias, run_once, run_once_losing_the_lease, start_thread

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.db_vendor("postgresql")]


@pytest.fixture
def listening(solid_settings) -> Iterator[Any]:
    """A separate psycopg connection that LISTENs, like another process would."""
    import psycopg

    solid_settings(WAKE_UP="postgresql")
    params = connection.get_connection_params()
    for key in ("cursor_factory", "context", "prepare_threshold"):
        params.pop(key, None)
    with psycopg.connect(autocommit=True, **params) as listener:
        listener.execute(f"LISTEN {PG_CHANNEL}")
        yield listener


def payloads(listener: Any, timeout: float = 1.0) -> list[str]:
    return [n.payload for n in listener.notifies(timeout=timeout)]


def test_a_worker_that_finishes_another_process_s_sync_call_sends_a_result_hint(listening):
    spec = get_spec(Counter.actor_type)
    message = enqueue(spec, "hinted", "add", {"amount": 1}, delivery_mode="sync")
    assert payloads(listening, 0.5) == [""]  # the enqueue's own work hint
    owner = processes.register("worker", alias())
    assert run_once(message.instance_id, owner).processed == 1
    # The hint says how far the actor got (waiting callers of other messages need not look)
    # and, sent by the commit itself, carries the call's result.
    progress_part = f"result:{message.instance_id}:{message.sequence}"
    carried = f"{message.instance_id} {message.sequence} {message.message_id} 1"
    assert payloads(listening) == [f"{progress_part},\n{carried}"]


def test_asynchronous_messages_and_a_caller_s_own_call_send_no_result_hint(listening):
    Counter.ref("quiet").enqueue().add(1)
    assert Counter.ref("quiet").add(1) == 2  # runs both itself: its own call needs no hint
    assert "result" not in payloads(listening, 0.5)


def test_a_sync_caller_hands_work_left_behind_its_own_message_to_others(listening):
    ref = Counter.ref("hand-off")
    ref.add(1)  # the actor exists and is warm
    payloads(listening, 0.3)
    with pause_at("turn.before_commit") as before_commit:
        caller = start_thread(lambda: ref.add(10), "sync-caller")
        before_commit.wait_reached()  # the caller holds the lease, its turn ran
        behind = ref.enqueue().add(100)  # another process's message, nobody can take it now
        # The work hint of the second enqueue only: the caller's own took the lease.
        assert payloads(listening, 0.5) == [""]
        before_commit.release()
    assert caller.outcome() == 11
    instance = Instance.objects.get(actor_id="hand-off")
    # Sent with the release: the hand-off's result hint names the generation it released
    # (waiting callers elsewhere may take the actor over) and how far the actor got.
    released = f"result:{instance.id}:2:{instance.activation_generation}"
    assert sorted(payloads(listening)) == [released, "work"]
    assert behind.result(timeout=5) == 111


def hint_carrying(listening: Any, reference: Any, turns: int) -> str:
    """A worker runs the actor (``turns`` turns, ``reference``'s among them); the hint its
    commit sent, which carries ``reference``'s result."""
    owner = processes.register("worker", alias())
    payloads(listening, 0.3)
    assert run_once(reference.instance_id, owner).processed == turns
    (hint,) = [p for p in payloads(listening) if f" {reference.id} " in p]
    return hint


def test_a_waiter_takes_the_result_its_hint_carried_without_reading(
    listening, django_assert_num_queries
):
    spec = get_spec(Counter.actor_type)
    Counter.ref("carried").enqueue().add(5)
    reference = message_reference(
        enqueue(spec, "carried", "add", {"amount": 2}, delivery_mode="sync")
    )
    hint = hint_carrying(listening, reference, turns=2)
    with progress.waiting(alias(), reference.instance_id, reference.sequence):
        ring(hint, alias())  # as this process's listener hears it
        with django_assert_num_queries(0):
            assert step(reference, alias(), None, assist=True) == 7
    # Once its waiter is gone the carried result is not kept.
    where = (alias(), reference.instance_id, reference.sequence)
    assert progress.carried_result(*where, reference.id) is None


def test_a_carried_result_is_kept_only_for_the_message_waited_for():
    with progress.waiting("default", 41, 3):
        progress.note("default", "result:41:4,\n41 3 900 1\n41 4 901 2\n42 3 902 3")
        assert progress.carried_result("default", 41, 3, 900) == "1"
        assert progress.carried_result("default", 41, 3, 999) is None  # another message
        assert progress.carried_result("default", 41, 4, 901) is None  # nobody waits
        assert progress.carried_result("default", 42, 3, 902) is None
        assert progress.carried_result("other", 41, 3, 900) is None  # another database
    assert progress.carried_result("default", 41, 3, 900) is None


def test_results_that_do_not_fit_a_hint_stay_in_the_database():
    big = '"' + "x" * (progress.MAX_RESULT_BYTES - 100) + '"'
    text = progress.payload([(7, 3)], results=[(7, 1, 70, big), (7, 2, 71, big), (7, 3, 72, "3")])
    assert len(text.encode()) < 8000  # PostgreSQL's limit for a NOTIFY payload
    assert text == f"result:7:3,\n7 1 70 {big}"  # in order, while they fit


def test_a_commit_whose_fence_failed_sends_no_result_hint(listening):
    owner = processes.register("worker", alias())
    spec = get_spec(AttemptBlocker.actor_type)
    message = enqueue(spec, "unhinted", "hold", {"key": "u"}, delivery_mode="sync")
    payloads(listening, 0.3)
    run_once_losing_the_lease(message.instance_id, owner, "u:1")
    assert not [p for p in payloads(listening, 0.5) if p.startswith("result")]


def test_an_awaited_waiter_takes_the_carried_result_without_a_thread_hop_or_a_read(listening):
    spec = get_spec(Counter.actor_type)
    reference = message_reference(
        enqueue(spec, "carried-aio", "add", {"amount": 3}, delivery_mode="sync")
    )
    hint = hint_carrying(listening, reference, turns=1)
    with progress.waiting(alias(), reference.instance_id, reference.sequence):
        ring(hint, alias())
        with CaptureQueriesContext(connection) as statements:
            assert async_to_sync(reference.aresult)(timeout=5) == 3
    assert statements.captured_queries == []
