"""Helpers for your test suite: run reminders and effects in the test process, no workers.

    from solid_objects.testing import run_due_reminders, run_pending_effects

    cart.add_item("shirt")                                   # schedules an expiry reminder
    run_due_reminders(at=timezone.now() + timedelta(days=2))  # as if two days had passed
    cart.status()                                            # the reminder's turn ran first

Both write through the same statements the worker roles use.

:func:`pause_at` holds a runtime thread at a named protocol step
(:mod:`solid_objects.pause_points`), so a test can run another session in between.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime

from . import pause_points
from .outbox.effects import run_pending_effects
from .reminders import fire_due_reminders

__all__ = ["Paused", "pause_at", "run_due_reminders", "run_pending_effects"]

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


class Paused:
    """A pause point held for a test: the first ``times`` threads that reach it (and pass
    ``only``) wait there until :meth:`release`; any later arrival passes straight through."""

    def __init__(self, name: str, times: int, only: Callable[[], bool] | None) -> None:
        self.name = name
        self._times = times
        self._only = only
        self._lock = threading.Lock()
        self._reached = threading.Event()
        self._released = threading.Event()
        self.threads: list[str] = []

    def _hook(self, name: str) -> None:
        if self._only is not None and not self._only():
            return
        with self._lock:
            if len(self.threads) >= self._times:
                return
            self.threads.append(threading.current_thread().name)
        self._reached.set()
        if not self._released.wait(timeout=120):
            raise TimeoutError(f"pause point {name!r} was never released by the test")

    def wait_reached(self, timeout: float = 30.0) -> None:
        """Block until a thread waits at the point (``TimeoutError`` if none comes)."""
        if not self._reached.wait(timeout):
            raise TimeoutError(f"no thread reached pause point {self.name!r} in {timeout}s")

    @property
    def reached(self) -> bool:
        return self._reached.is_set()

    def release(self) -> None:
        """Let the held thread(s), and every later arrival, go on."""
        self._released.set()


@contextmanager
def pause_at(
    name: str, *, times: int = 1, only: Callable[[], bool] | None = None
) -> Iterator[Paused]:
    """Hold the first ``times`` threads that reach pause point ``name`` until the test calls
    :meth:`Paused.release` (or the block ends). ``only`` picks which threads to hold, e.g.
    ``only=lambda: threading.current_thread() is worker``."""
    paused = Paused(name, times, only)
    pause_points.install(name, paused._hook)
    try:
        yield paused
    finally:
        pause_points.uninstall(name)
        paused.release()
