"""The nine tables of ``solid_objects`` (see ``docs/database-schema.md``)."""

from .instances import Instance
from .messages import ClaimedMessage, DeadLetter, Message, ReadyMessage
from .outbox import ACTOR_MESSAGE_EFFECT, TRANSMIT_EFFECT, Broadcast, Effect
from .processes import Process
from .reminders import Reminder

__all__ = [
    "ACTOR_MESSAGE_EFFECT",
    "TRANSMIT_EFFECT",
    "Broadcast",
    "ClaimedMessage",
    "DeadLetter",
    "Effect",
    "Instance",
    "Message",
    "Process",
    "ReadyMessage",
    "Reminder",
]
