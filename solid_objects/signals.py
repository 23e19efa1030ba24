"""Instrumentation signals (§A12). Payloads carry identities, sequence, attempt and
durations, never arguments, state or results. Receivers run through :func:`send`, which logs
and swallows their errors: a failing receiver never fails a committed turn.
"""

from __future__ import annotations

import logging
from typing import Any

from django.dispatch import Signal

logger = logging.getLogger("solid_objects")

message_enqueued = Signal()
message_started = Signal()
message_completed = Signal()
message_retried = Signal()
message_rejected = Signal()
message_dead_lettered = Signal()
#: A fenced commit wrote a group of one actor's turns (sent before their outcome signals):
#: ``turns`` written, the group's highest ``sequence``, the commit's ``duration`` (seconds;
#: a batch commit of several actors sends one per actor, each with the batch's duration).
turns_committed = Signal()

activation_claimed = Signal()
activation_renewed = Signal()
activation_released = Signal()
activation_lost = Signal()

effect_delivered = Signal()
effect_failed = Signal()
broadcast_delivered = Signal()
broadcast_failed = Signal()

reminder_fired = Signal()
reminder_replaced = Signal()

process_started = Signal()
process_stopped = Signal()
process_pruned = Signal()

state_too_large = Signal()

_LOG_LEVELS = {
    message_retried: logging.WARNING,
    message_dead_lettered: logging.ERROR,
    activation_lost: logging.WARNING,
    effect_failed: logging.WARNING,
    broadcast_failed: logging.WARNING,
    state_too_large: logging.WARNING,
    process_started: logging.INFO,
    process_stopped: logging.INFO,
    process_pruned: logging.INFO,
}
_NAMES = {value: name for name, value in list(globals().items()) if isinstance(value, Signal)}


def send(signal: Signal, **payload: Any) -> None:
    """Log the event and send the signal robustly (receiver errors are logged, not raised)."""
    name = _NAMES.get(signal, "event")
    level = _LOG_LEVELS.get(signal, logging.DEBUG)
    if logger.isEnabledFor(level):
        logger.log(level, "%s %s", name, _describe(payload), extra={"solid_objects": payload})
    if not signal.receivers:
        return
    for receiver, response in signal.send_robust(sender=name, **payload):
        if isinstance(response, Exception):
            logger.error("signal receiver %r failed for %s", receiver, name, exc_info=response)


def _describe(payload: dict[str, Any]) -> str:
    return " ".join(f"{key}={value}" for key, value in payload.items())
