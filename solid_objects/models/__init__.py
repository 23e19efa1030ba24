"""The eleven tables of ``solid_objects`` (see ``docs/database-schema.md``)."""

from .instances import Instance, InstanceQuerySet
from .messages import ClaimedMessage, DeadLetter, DeadLetterQuerySet, Message, ReadyMessage
from .outbox import ACTOR_MESSAGE_EFFECT, TRANSMIT_EFFECT, Broadcast, Effect, EffectQuerySet
from .processes import Process
from .rate_limits import RateLimit
from .reminders import Reminder
from .shards import ShardAgreement

__all__ = [
    "ACTOR_MESSAGE_EFFECT",
    "TRANSMIT_EFFECT",
    "Broadcast",
    "ClaimedMessage",
    "DeadLetter",
    "DeadLetterQuerySet",
    "Effect",
    "EffectQuerySet",
    "Instance",
    "InstanceQuerySet",
    "Message",
    "Process",
    "RateLimit",
    "ReadyMessage",
    "Reminder",
    "ShardAgreement",
]
