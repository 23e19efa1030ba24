"""Sending ``activity_recorded`` and ``activity_cancelled`` for entries a write created."""

from __future__ import annotations

import logging
from collections.abc import Sequence

from .limits import CANCELLED
from .signals import activity_cancelled, activity_recorded
from .values import ActivityEntry

__all__ = ["listened", "send_signals"]

logger = logging.getLogger("tilttek_activity")


def listened(kinds: Sequence[str]) -> bool:
    """Whether a receiver is connected for entries of these kinds (a signal nobody listens
    to costs no ``on_commit`` and no read)."""
    from .models import Entry

    if CANCELLED in kinds and activity_cancelled.has_listeners(Entry):
        return True
    return activity_recorded.has_listeners(Entry)


def send_signals(entries: Sequence[ActivityEntry], alias: str) -> None:
    """One signal per entry, robustly: a failing receiver is logged, the others still run."""
    from .models import Entry

    for entry in entries:
        signal = activity_cancelled if entry.kind == CANCELLED else activity_recorded
        for receiver, result in signal.send_robust(sender=Entry, entry=entry, using=alias):
            if isinstance(result, Exception):
                logger.error(
                    "%s receiver %r failed for entry %s",
                    "activity_cancelled" if entry.kind == CANCELLED else "activity_recorded",
                    receiver,
                    entry.position,
                    exc_info=result,
                )
