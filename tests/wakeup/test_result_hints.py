"""Result and hand-off hints (issue 9, item 9): a sync caller waiting for a message another
process runs hears its outcome at once, and work left behind by a sync caller's pass is
handed to workers and waiting callers instead of waiting for their next poll."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from django.db import connection

from solid_objects.db.notify import CHANNEL as PG_CHANNEL
from solid_objects.mailbox import enqueue
from solid_objects.models import Instance
from solid_objects.registry import get_spec
from solid_objects.runtime import processes
from solid_objects.testing import pause_at
from tests.testapp.actors.core import Counter

from ..runtime.helpers import alias, run_once, start_thread

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
    # The hint says how far the actor got: waiting callers of other messages need not look.
    assert payloads(listening) == [f"result:{message.instance_id}:{message.sequence}"]


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
