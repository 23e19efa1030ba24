"""factory-boy factories for the ``solid_objects`` tables.

Rows are consistent with the schema's checks and with each other: a message's actor fields
come from its instance and its sequence from the instance's ``next_message_sequence`` (which
it advances), a membership's instance and sequence come from its message, a claim that names
a process carries an activation token. They write rows directly and never run the
runtime (no enqueue, no fencing)::

    message = MessageFactory()                      # + its instance
    ReadyMessageFactory(message=message)            # make it due
    InstanceFactory(activated=True)                 # owned by a fresh process
"""

from __future__ import annotations

import secrets
import uuid
from datetime import timedelta

import factory
from django.db.models import F
from django.utils import timezone
from factory.django import DjangoModelFactory

from solid_objects.models import (
    Broadcast,
    ClaimedMessage,
    DeadLetter,
    Effect,
    Instance,
    Message,
    Process,
    ReadyMessage,
    Reminder,
)

now = factory.LazyFunction(timezone.now)
# Sequences restart in every process; the token keeps identities unique when test
# subprocesses (workers, manage.py shell) write to the same database.
RUN = secrets.token_hex(3)
new_uuid = factory.LazyFunction(lambda: str(uuid.uuid4()))


class ProcessFactory(DjangoModelFactory):
    class Meta:
        model = Process

    id = new_uuid
    kind = Process.Kind.WORKER
    hostname = "test-host"
    pid = factory.Sequence(lambda n: 10_000 + n)
    started_at = now
    last_heartbeat_at = now
    metadata = factory.LazyFunction(lambda: {"library": "solid_objects", "test": True})


class InstanceFactory(DjangoModelFactory):
    class Meta:
        model = Instance

    actor_type = "tests.counter"
    actor_id = factory.Sequence(lambda n: f"actor-{RUN}-{n}")
    state = factory.LazyFunction(dict)

    class Params:
        # A live activation: owner process, token, lease and a generation > 0.
        activated = factory.Trait(
            activation_owner=factory.SubFactory(ProcessFactory),
            activation_token=new_uuid,
            activation_expires_at=factory.LazyFunction(
                lambda: timezone.now() + timedelta(seconds=30)
            ),
            activation_generation=1,
            activated_at=now,
        )


def take_sequence(instance: Instance) -> int:
    """The instance's next message sequence, advanced as enqueueing does (in the row if saved)."""
    if instance.pk is None:
        instance.next_message_sequence += 1
        return instance.next_message_sequence - 1
    Instance.objects.filter(pk=instance.pk).update(
        next_message_sequence=F("next_message_sequence") + 1
    )
    instance.refresh_from_db(fields=["next_message_sequence"])
    return instance.next_message_sequence - 1


class MessageFactory(DjangoModelFactory):
    class Meta:
        model = Message

    instance = factory.SubFactory(InstanceFactory)
    actor_type = factory.SelfAttribute("instance.actor_type")
    actor_id = factory.SelfAttribute("instance.actor_id")
    operation = "increment"
    delivery_mode = Message.DeliveryMode.ASYNC
    arguments = factory.LazyFunction(lambda: {"args": [], "kwargs": {}})
    sequence = factory.LazyAttribute(lambda o: take_sequence(o.instance))
    max_attempts = 5
    request_id = new_uuid
    enqueued_at = now
    available_at = now


class ReadyMessageFactory(DjangoModelFactory):
    class Meta:
        model = ReadyMessage

    message = factory.SubFactory(MessageFactory)
    instance = factory.SelfAttribute("message.instance")
    sequence = factory.SelfAttribute("message.sequence")
    available_at = factory.SelfAttribute("message.available_at")


class ClaimedMessageFactory(DjangoModelFactory):
    """A claim by the instance's owner when it has one, else by a fresh process."""

    class Meta:
        model = ClaimedMessage

    message = factory.SubFactory(MessageFactory)
    instance = factory.SelfAttribute("message.instance")
    process = factory.LazyAttribute(lambda o: o.instance.activation_owner or ProcessFactory())
    activation_token = factory.LazyAttribute(
        lambda o: o.instance.activation_token or str(uuid.uuid4())
    )
    activation_generation = factory.LazyAttribute(
        lambda o: max(o.instance.activation_generation, 1)
    )
    claimed_at = now


class ReminderFactory(DjangoModelFactory):
    class Meta:
        model = Reminder

    instance = factory.SubFactory(InstanceFactory)
    actor_type = factory.SelfAttribute("instance.actor_type")
    actor_id = factory.SelfAttribute("instance.actor_id")
    operation = "tick"
    name = factory.Sequence(lambda n: f"tick:{n}")
    arguments = factory.LazyFunction(lambda: {"args": [], "kwargs": {}})
    next_run_at = now


class EffectFactory(DjangoModelFactory):
    class Meta:
        model = Effect

    message = factory.SubFactory(MessageFactory)
    instance = factory.SelfAttribute("message.instance")
    effect_id = new_uuid
    name = "tests.send_mail"
    arguments = factory.LazyFunction(lambda: {"to": "someone@example.com"})
    max_attempts = 5
    available_at = now


class BroadcastFactory(DjangoModelFactory):
    class Meta:
        model = Broadcast

    message = factory.SubFactory(MessageFactory)
    instance = factory.SelfAttribute("message.instance")
    broadcast_id = new_uuid
    observable_name = factory.Sequence(lambda n: f"observable_{n}")
    value = factory.LazyFunction(dict)
    state_version = 1
    activation_generation = 1
    available_at = now


class DeadLetterFactory(DjangoModelFactory):
    class Meta:
        model = DeadLetter

    message = factory.SubFactory(MessageFactory)
    instance = factory.SelfAttribute("message.instance")
    actor_type = factory.SelfAttribute("message.actor_type")
    actor_id = factory.SelfAttribute("message.actor_id")
    operation = factory.SelfAttribute("message.operation")
    arguments = factory.SelfAttribute("message.arguments")
    attempts = factory.SelfAttribute("message.max_attempts")
    exception_class = "RuntimeError"
    exception_message = "boom"
    backtrace = factory.LazyFunction(lambda: ["tests/factories.py:1 in <module>"])
    first_failed_at = now
    last_failed_at = now


class UserFactory(DjangoModelFactory):
    """A Django user (the live-pages tests: viewers of observables)."""

    class Meta:
        model = "auth.User"
        django_get_or_create = ("username",)

    username = factory.Sequence(lambda n: f"viewer-{RUN}-{n}")
