"""PostgreSQL: a sync caller's enqueue claims its message when it is the actor's next turn.

The enqueue statement that takes a free actor's lease also claims the message (attempt
counted, claimed row instead of a ready one) only when the new sequence follows the state
revision, decided on the locked instance row. Everything else (earlier messages pending, a
query or a turn that changed nothing since the last state change, a claim left by a dead
activation) keeps the claim as its own statement, so strict order and attempt counting hold.
"""

from __future__ import annotations

import threading
from datetime import timedelta

import pytest
from django.db import connection, transaction
from django.utils import timezone

from solid_objects import SyncTimeout
from solid_objects.models import Message
from tests.support.statements import capturing_statements
from tests.support.waiting import PATIENCE, wait_until
from tests.testapp.actors.core import Counter

from .helpers import start_thread

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.db_vendor("postgresql")]

CLAIM_HELD = "WITH i AS (SELECT i.id, i.actor_type"


def claims_of(statements: object) -> int:
    """The separate first-claim statements (``take_up``) among ``statements``."""
    captured = statements.captured_queries  # type: ignore[attr-defined]
    return sum(1 for query in captured if query["sql"].startswith(CLAIM_HELD))


def attempts(actor_id: str) -> list[tuple[int, int]]:
    rows = Message.objects.filter(actor_id=actor_id).order_by("sequence")
    return [(m.sequence, m.attempt_count) for m in rows]


@pytest.fixture(autouse=True)
def quiet_registry(solid_settings):
    solid_settings(PROCESS_HEARTBEAT_INTERVAL=600.0, PROCESS_ALIVE_THRESHOLD=1200.0)


def test_a_new_actor_and_a_warm_one_are_claimed_by_the_enqueue():
    ref = Counter.ref("claim-direct")
    with capturing_statements() as first:
        assert ref.add(1) == 1
    with capturing_statements() as warm:
        assert ref.add(1) == 2
    assert claims_of(first) == 0 and claims_of(warm) == 0
    assert len(warm) == 2  # the enqueue that claims, the fenced commit
    assert attempts("claim-direct") == [(1, 1), (2, 1)]


def test_earlier_pending_messages_run_first_with_a_claim_of_their_own():
    ref = Counter.ref("claim-behind")
    ref.add(0)
    ref.enqueue().record_sequence()  # sequence 2, pending: nobody runs it
    ref.enqueue().record_sequence()  # sequence 3
    with capturing_statements() as statements:
        assert ref.record_sequence() == 4
    assert claims_of(statements) == 1  # the head (2) was claimed, not the caller's own
    assert ref.snapshot().seen == [2, 3, 4]
    assert attempts("claim-behind") == [(1, 1), (2, 1), (3, 1), (4, 1)]


def test_after_a_turn_that_left_the_state_unchanged_the_claim_is_its_own_statement():
    ref = Counter.ref("claim-query")
    assert ref.add(5) == 5
    assert ref.total() == 5  # a query: the state revision stays at sequence 1
    with capturing_statements() as statements:
        assert ref.add(1) == 6
    assert claims_of(statements) == 1
    assert attempts("claim-query") == [(1, 1), (2, 1), (3, 1)]


def test_a_free_actor_with_a_delayed_message_pending_is_not_claimed_past_it():
    ref = Counter.ref("claim-delayed")
    ref.add(0)
    ref.enqueue(available_at=timezone.now() + timedelta(hours=1)).record_sequence()  # 2
    with pytest.raises(SyncTimeout):  # the call waits behind the delayed turn
        ref.sync(timeout=0.5).record_sequence()
    assert attempts("claim-delayed")[1:] == [(2, 0), (3, 0)]


def test_an_enqueue_committed_while_the_callers_waited_for_the_row_is_run_first():
    """The race the state-revision test exists for: an async enqueue holds the instance row
    (its transaction still open) when the sync caller's enqueue starts, so the caller's
    statement snapshot predates that message. The caller waits for the row lock, gets the
    next sequence and the free lease; deciding on its snapshot it would claim its own message
    ahead of the earlier one. Decided on the locked row, it claims the head instead."""
    ref = Counter.ref("claim-race")
    ref.add(0)
    committed = threading.Event()
    holding = threading.Event()

    def hold_the_row() -> None:
        with transaction.atomic():
            ref.enqueue().record_sequence()  # sequence 2, the instance row locked
            holding.set()
            committed.wait(PATIENCE)

    holder = start_thread(hold_the_row, "row-holder")
    assert holding.wait(PATIENCE)
    caller = start_thread(ref.record_sequence, "sync-caller")

    def caller_waits_for_the_row() -> bool:
        with connection.cursor() as cursor:
            cursor.execute("SELECT COUNT(*) FROM pg_locks WHERE NOT granted")
            return bool(cursor.fetchone()[0])

    wait_until(caller_waits_for_the_row, what="the caller's enqueue waiting on the row lock")
    committed.set()
    holder.outcome()
    assert caller.outcome() == 3
    assert ref.snapshot().seen == [2, 3]
    assert attempts("claim-race") == [(1, 1), (2, 1), (3, 1)]
