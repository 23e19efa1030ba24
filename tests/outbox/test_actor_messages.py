"""``self.send_to(ref).op()``: staged in the fenced commit, delivered by the effect role."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from solid_objects import MessageFailed
from solid_objects.models import Effect, Instance, Message, ReadyMessage
from solid_objects.outbox import run_pending_effects
from tests.factories import EffectFactory, MessageFactory
from tests.testapp.actors.outbox import Messenger

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_committed_turn_delivers_its_message_once():
    Messenger.ref("ann").tell("ben", "hello")
    effect = Effect.objects.get()
    assert (effect.name, effect.status) == ("__actor_message__", "pending")
    assert not Instance.objects.filter(actor_id="ben").exists()  # nothing delivered yet

    assert run_pending_effects() == 1
    effect.refresh_from_db()
    assert effect.status == "completed"
    key = f"effect:{effect.effect_id}"
    assert Messenger.ref("ben").heard() == [{"text": "hello", "key": key, "mode": "internal"}]

    # A redelivery (the worker died before recording) finds the message already there.
    Effect.objects.filter(pk=effect.pk).update(status="pending", claimed_by=None)
    assert run_pending_effects() == 1
    assert Message.objects.filter(actor_id="ben", idempotency_key=key).count() == 1
    assert len(Messenger.ref("ben").heard()) == 1


def test_the_senders_key_and_available_at_are_kept():
    later = timezone.now() + timedelta(hours=1)
    Messenger.ref("cat").tell("dan", "later", key="greeting-1", at=later.isoformat())
    run_pending_effects()
    message = Message.objects.get(actor_id="dan")
    assert message.idempotency_key == "greeting-1"
    assert message.delivery_mode == "internal"
    assert abs(message.available_at - later) < timedelta(milliseconds=5)
    assert ReadyMessage.objects.get(message=message).available_at > timezone.now()


def test_a_failed_turn_delivers_nothing():
    with pytest.raises(MessageFailed):
        Messenger.ref("eve").tell("fay", "never", fail=True)
    assert not Effect.objects.exists()
    assert run_pending_effects() == 0
    assert not Instance.objects.filter(actor_id="fay").exists()


def test_an_undeliverable_message_is_dead():
    source = MessageFactory(instance__actor_type="tests.messenger", instance__actor_id="gus")
    effect = EffectFactory(
        message=source,
        name="__actor_message__",
        arguments={
            "actor_type": "tests.messenger",
            "actor_id": "hal",
            "operation": "no_such_operation",
            "arguments": {},
            "idempotency_key": None,
            "available_at": None,
        },
    )
    assert run_pending_effects() == 1
    effect.refresh_from_db()
    assert (effect.status, effect.attempt_count) == ("dead", 1)
    assert effect.error["class"].endswith("UnknownOperation")
    assert not Instance.objects.filter(actor_id="hal").exists()
