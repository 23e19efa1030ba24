"""Sync calls, enqueue and drain() inside the test's own transaction (pytest-django's plain
``db``): the caller runs the actor in the same connection and transaction, with production's
ordering, fencing and outcomes; a block the test opens itself is the caller's, and refused."""

from __future__ import annotations

from datetime import timedelta

import pytest
from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.db import connection, transaction
from django.test import override_settings
from django.utils import timezone

from solid_objects import MessageFailed, Rejected, SyncInsideTransaction
from solid_objects.models import (
    Broadcast,
    ClaimedMessage,
    DeadLetter,
    Instance,
    Message,
    ReadyMessage,
)
from solid_objects.sync import caller_cache
from solid_objects.testing import NotDrained, drain
from tests.testapp.actors.broadcasts import Board
from tests.testapp.actors.core import Counter
from tests.testapp.actors.endless import Rally
from tests.testapp.actors.outbox import Alarm, Messenger, Payer
from tests.testing.layers import IN_MEMORY, received, subscribe

pytestmark = pytest.mark.django_db


def test_the_test_runs_inside_a_transaction():
    assert connection.in_atomic_block  # what made every sync call raise before


def test_sync_calls_run_in_the_test_transaction():
    cart = Counter.ref("a")
    assert cart.add(2) == 2
    assert cart.add(amount=3) == 5
    assert cart.total() == 5
    instance = Instance.objects.get(actor_type="tests.counter", actor_id="a")
    assert instance.state == {"value": 5}
    assert instance.activation_token is None  # the lease was released, as in production
    assert ReadyMessage.objects.count() == ClaimedMessage.objects.count() == 0
    assert list(Message.objects.order_by("sequence").values_list("result", flat=True)) == [
        2,
        5,
        5,
    ]
    assert len(caller_cache) == 0  # the test's warm activations die with its transaction


def test_enqueued_messages_run_first_and_in_order():
    cart = Counter.ref("order")
    first = cart.enqueue().append(1)
    second = cart.enqueue().append(2)
    assert first.status() == "ready"
    assert cart.append(3) == 3  # earlier messages run first
    assert cart.snapshot().seen == [1, 2, 3]
    assert (first.result(), second.result()) == (1, 2)


def test_outcomes_are_those_of_production():
    cart = Counter.ref("outcomes")
    with pytest.raises(Rejected) as rejected:
        cart.refuse("closed")
    assert rejected.value.code == "closed"
    with pytest.raises(MessageFailed):
        cart.boom(retryable=False)
    assert cart.snapshot().value == 0  # both turns rolled back their state
    assert DeadLetter.objects.count() == 1
    assert cart.add(1) == 1  # the mailbox moved on


def test_a_block_the_test_opens_is_the_callers_transaction():
    cart = Counter.ref("atomic")
    with transaction.atomic():
        with pytest.raises(SyncInsideTransaction):
            cart.add(1)
        assert Message.objects.count() == 0  # refused before anything was written
        message = cart.enqueue().add(5)  # enqueue joins the caller's transaction
    assert message.status() == "ready"
    try:
        with transaction.atomic():
            cart.enqueue().add(100)
            raise RuntimeError("roll back")
    except RuntimeError:
        pass
    assert drain().turns == [("tests.counter", "atomic", message.id, "completed")]
    assert cart.snapshot().value == 5  # the rolled-back enqueue never ran


def test_drain_runs_turns_effects_and_callbacks():
    payer = Payer.ref("p")
    effect_id = payer.pay("tests.async.echo", {"value": 7})
    report = drain()
    assert report.effects == 1
    assert [turn[3] for turn in report.turns] == ["completed"]  # the on_success callback
    assert payer.summary()["successes"][0]["effect_id"] == effect_id
    assert payer.summary()["successes"][0]["result"]["echo"] == 7
    assert not drain()  # nothing left: an empty report


def test_drain_delivers_actor_to_actor_messages():
    Messenger.ref("alice").enqueue().tell("bob", "hi")
    report = drain()
    assert [(t[1], t[3]) for t in report.turns] == [("alice", "completed"), ("bob", "completed")]
    assert report.rounds == 2  # bob's message existed only after alice's turn and its outbox
    assert [m["text"] for m in Messenger.ref("bob").heard()] == ["hi"]


def test_drain_at_a_test_clock_fires_reminders():
    alarm = Alarm.ref("clock")
    alarm.set_alarm(delay=3600, label="in an hour")
    assert drain().reminders == 0  # not due yet
    report = drain(at=timezone.now() + timedelta(hours=2))
    assert report.reminders == 1
    assert [r["label"] for r in alarm.rang()] == ["in an hour"]


def test_drain_roles_limit_what_runs():
    payer = Payer.ref("roles")
    payer.pay("tests.async.echo", {"value": 1})
    assert drain(roles=("actors", "reminders")).effects == 0
    assert drain(roles=("effects",)).effects == 1
    assert drain(roles=("actors",)).turns[0][3] == "completed"


def test_drain_raises_when_work_never_ends():
    # Two actors that answer each other forever: every round finds new work.
    Rally.ref("ping").enqueue().hit(partner="pong")
    with pytest.raises(NotDrained) as caught:
        drain(max_rounds=3)
    assert caught.value.report.rounds == 3


def test_drain_refuses_bad_options():
    for options in (
        {"at": timezone.now().replace(tzinfo=None)},
        {"roles": "actors"},
        {"roles": ("workers",)},
        {"max_rounds": 0},
    ):
        with pytest.raises(ValueError):
            drain(**options)


def test_awaited_calls_in_the_test_transaction():
    async def scenario() -> int:
        cart = Counter.ref("aio")
        await cart.aio.add(1)
        message = await cart.aio.enqueue().add(2)
        return await message.aresult(timeout=10)

    assert async_to_sync(scenario)() == 3
    assert Instance.objects.get(actor_id="aio").state == {"value": 3}


def test_drain_delivers_broadcasts_to_the_actor_group():
    with override_settings(CHANNEL_LAYERS=IN_MEMORY):
        layer = get_channel_layer()
        channel = subscribe(layer, "tests.board", "live")
        board = Board.ref("live")
        board.add("shirt")  # a sync call: its turn commits a broadcast row
        queued = board.enqueue().add_and_retitle("hat", "Hats")  # drain() runs this turn
        report = drain()
        assert report.turns == [("tests.board", "live", queued.id, "completed")]
        assert report.broadcasts == 3  # one row per changed observable, all delivered
        messages = received(layer, channel, 3)
        assert not drain()  # delivered once: nothing left
    assert [(m["observable"], m["value"], m["state_revision"]) for m in messages] == [
        ("size", 1, 1),
        ("size", 2, 2),
        ("title", {}, 2),
    ]
    assert {(m["actor_type"], m["actor_id"]) for m in messages} == {("tests.board", "live")}
    assert Broadcast.objects.exclude(status="delivered").count() == 0
