"""Helpers for your test suite: run reminders and effects in the test process, no workers.

    from solid_objects.testing import run_due_reminders, run_pending_effects

    cart.add_item("shirt")                                   # schedules an expiry reminder
    run_due_reminders(at=timezone.now() + timedelta(days=2))  # as if two days had passed
    cart.status()                                            # the reminder's turn ran first

Both write through the same statements the worker roles use.
"""

from __future__ import annotations

from datetime import datetime

from .outbox.effects import run_pending_effects
from .reminders import fire_due_reminders

__all__ = ["run_due_reminders", "run_pending_effects"]

#: Passes :func:`run_due_reminders` makes at most (a ``missed="all"`` reminder enqueues up
#: to ``reminders.MAX_CATCH_UP`` messages per pass).
MAX_PASSES = 100


def run_due_reminders(at: datetime | None = None, *, using: str | None = None) -> int:
    """Fire every reminder due at ``at`` (default: the database's now) as if the clock read
    ``at``; returns how many messages were enqueued. The messages are ordinary mailbox
    messages: a sync call to the actor, or a worker, runs them."""
    if at is not None and (not isinstance(at, datetime) or at.tzinfo is None):
        raise ValueError("run_due_reminders(at=...) needs a timezone-aware datetime")
    total = 0
    for _ in range(MAX_PASSES):
        fired = fire_due_reminders(using, now=at)
        if not fired:
            break
        total += len(fired)
    return total
