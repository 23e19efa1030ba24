"""Per-operation (``@retry``) and per-effect (``@effect(max_attempts=..., retry_delay=...)``)
retry policies replace ``MAX_ATTEMPTS`` / ``RETRY_DELAY`` for those messages and effects."""

from __future__ import annotations

import time
from datetime import timedelta

import pytest
from django.utils import timezone

import solid_objects
from solid_objects.models import DeadLetter, Effect, Message, ReadyMessage
from solid_objects.outbox.effects import run_pending_effects
from solid_objects.retry_policy import retry
from tests.testapp.actors import policies
from tests.testapp.actors.policies import Hanger, Policied

from .helpers import drain, run_once

pytestmark = pytest.mark.django_db(transaction=True)


def test_an_operation_s_max_attempts_is_fixed_on_its_messages(solid_settings):
    solid_settings(MAX_ATTEMPTS=7)
    ref = Policied.ref("attempts")
    patient = ref.enqueue().patient()
    plain = ref.enqueue().plain()
    assert Message.objects.get(id=patient.id).max_attempts == 2
    assert Message.objects.get(id=plain.id).max_attempts == 7


def test_an_operation_s_retry_delay_spaces_its_retries(owner, solid_settings):
    solid_settings(RETRY_DELAY="tests.runtime.helpers.no_delay")
    message = Policied.ref("delay").enqueue().patient()
    instance_id = Message.objects.get(id=message.id).instance_id
    run_once(instance_id, owner)
    ready = ReadyMessage.objects.get(message_id=message.id)
    assert ready.available_at > timezone.now() + timedelta(minutes=30)


def test_an_operation_is_dead_after_its_own_max_attempts(owner, solid_settings):
    solid_settings(MAX_ATTEMPTS=10, RETRY_DELAY="tests.runtime.helpers.long_delay")
    message = Policied.ref("dead").enqueue().twice()
    instance_id = Message.objects.get(id=message.id).instance_id
    assert drain(instance_id, owner) == 2
    assert DeadLetter.objects.get(message_id=message.id).attempts == 2


def test_an_effect_s_policy_is_its_own(owner, solid_settings):
    solid_settings(MAX_ATTEMPTS=9, RETRY_DELAY="tests.runtime.helpers.no_delay")
    message = Policied.ref("effects").enqueue().emit_flaky()
    drain(Message.objects.get(id=message.id).instance_id, owner)
    effect = Effect.objects.get(name="tests.policy.flaky")
    assert effect.max_attempts == 2
    assert run_pending_effects() == 1  # then it waits an hour, not RETRY_DELAY's 0 s
    effect.refresh_from_db()
    assert effect.status == "pending"
    assert effect.attempt_count == 1
    assert effect.available_at > timezone.now() + timedelta(minutes=30)


@pytest.mark.parametrize(
    ("options", "error"),
    [
        ({"max_attempts": 0}, ValueError),
        ({"max_attempts": True}, ValueError),
        ({"max_attempts": 2.5}, ValueError),
        ({"retry_delay": -1}, ValueError),
        ({"retry_delay": float("nan")}, ValueError),
        ({"retry_delay": "soon"}, TypeError),
    ],
)
def test_bad_policies_are_refused_when_declared(options, error):
    with pytest.raises(error):
        retry(**options)
    with pytest.raises(error):
        solid_objects.effect("tests.policy.never", **options)


def test_an_effect_that_overruns_its_timeout_is_abandoned_and_retried(owner, solid_settings):
    solid_settings(MAX_ATTEMPTS=2, RETRY_DELAY="tests.runtime.helpers.no_delay")
    policies.released.clear()
    policies.hung.clear()
    ref = Hanger.ref("hang")
    try:
        ref.start("tests.policy.hang")
        started = time.monotonic()
        assert run_pending_effects() == 2  # two attempts, each abandoned after 0.3 s
        assert time.monotonic() - started < 10  # the handler itself blocks for 30 s
        assert policies.hung.is_set()
    finally:
        policies.released.set()
    effect = Effect.objects.get(name="tests.policy.hang")
    assert (effect.status, effect.attempt_count) == ("handled", 2)
    assert effect.error["class"] == "solid_objects.outbox.effects.EffectTimeout"
    drain(Message.objects.filter(actor_id="hang").first().instance_id, owner)
    assert ref.snapshot().outcomes == [["failed", "solid_objects.outbox.effects.EffectTimeout"]]


def test_an_effect_within_its_timeout_completes(owner):
    ref = Hanger.ref("quick")
    ref.start("tests.policy.quick")
    assert run_pending_effects() == 1
    assert Effect.objects.get(name="tests.policy.quick").status == "completed"
    drain(Message.objects.filter(actor_id="quick").first().instance_id, owner)
    assert ref.snapshot().outcomes == [["done", {"attempt": 1}]]


@pytest.mark.parametrize(
    ("timeout", "error"), [(0, ValueError), (-1, ValueError), ("1", TypeError)]
)
def test_bad_timeouts_are_refused_when_declared(timeout, error):
    with pytest.raises(error):
        solid_objects.effect("tests.policy.never", timeout=timeout)
