"""Wake-up hints. Rows are the truth; a wake-up only shortens a wait.

In-process hints use generation-counted doorbells: a waiter reads the generation *before*
its empty poll and waits for it to change, so a ring between the poll and the wait is never
lost. Cross-process transports (PostgreSQL ``LISTEN/NOTIFY``, Redis pub/sub) ring the same
doorbells when a hint arrives.
"""

from __future__ import annotations

import threading
from collections.abc import Callable


class Doorbell:
    """A condition with a generation counter; callbacks (:meth:`subscribe`) are told of every
    ring too, which is how an event loop waits for one without parking a thread."""

    def __init__(self) -> None:
        self._condition = threading.Condition()
        self._generation = 0
        self._callbacks: set[Callable[[], None]] = set()

    @property
    def generation(self) -> int:
        return self._generation

    def ring(self) -> None:
        with self._condition:
            self._generation += 1
            self._condition.notify_all()
            callbacks = list(self._callbacks)
        for callback in callbacks:
            callback()

    def subscribe(self, callback: Callable[[], None]) -> None:
        """Call ``callback()`` (from the ringing thread: it must be quick and thread-safe,
        e.g. ``loop.call_soon_threadsafe``) on every ring until :meth:`unsubscribe`."""
        with self._condition:
            self._callbacks.add(callback)

    def unsubscribe(self, callback: Callable[[], None]) -> None:
        with self._condition:
            self._callbacks.discard(callback)

    def wait(self, seen: int, timeout: float) -> bool:
        """Wait until the generation differs from ``seen``; ``True`` if it rang."""
        with self._condition:
            return self._condition.wait_for(lambda: self._generation != seen, timeout)


_doorbells: dict[str, Doorbell] = {}
_lock = threading.Lock()

#: Doorbell names: new actor work, a message outcome, effect work, broadcast work, reminders.
KINDS = ("work", "result", "effect", "broadcast", "reminder")


def doorbell(kind: str) -> Doorbell:
    bell = _doorbells.get(kind)
    if bell is None:
        with _lock:
            bell = _doorbells.setdefault(kind, Doorbell())
    return bell


def notify_local(kind: str) -> None:
    """Ring ``kind`` for this process's waiters."""
    doorbell(kind).ring()
