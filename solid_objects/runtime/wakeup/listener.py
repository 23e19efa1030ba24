"""Listening for cross-process hints: the :class:`Listener` protocol and the thread every
transport runs.

A listener starts with a probe (its own hint sent and heard back). A failed probe (e.g. a
transaction-pooling proxy in front of PostgreSQL, which cannot keep a ``LISTEN`` session)
means the process relies on adaptive polling. A transport that breaks later reconnects with
backoff and rings the ``work`` doorbell after reconnecting, since it may have missed hints.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass
from typing import Protocol

from . import progress
from .doorbells import KINDS, doorbell

logger = logging.getLogger("solid_objects")

#: Seconds a startup probe waits for its own hint.
PROBE_TIMEOUT = 2.0
#: How long a listener thread blocks before looking at its stop flag (seconds).
LISTEN_TICK = 0.5
#: Payloads of probe hints start with this; they ring no doorbell.
PROBE_PREFIX = "probe:"


@dataclass
class ProbeResult:
    ok: bool
    mode: str
    detail: str
    seconds: float | None = None


class Listener(Protocol):
    """What the supervisor and sync callers need of this process's listener."""

    mode: str

    @property
    def alive(self) -> bool: ...

    def probe(self) -> ProbeResult: ...

    def start(self) -> None: ...

    def stop(self, timeout: float = 2.0) -> None: ...


def ring(payload: str, alias: str | None = None) -> None:
    """Ring the doorbell a hint's payload names (``""``: new actor work); a ``result`` hint
    from ``alias`` may carry the progress of the actors it committed (see :mod:`.progress`)."""
    if payload.startswith(PROBE_PREFIX):
        return
    if payload.startswith(progress.PREFIX):
        if alias is None:
            progress.blind_hint()  # progress of an unknown database says nothing
            doorbell("result").ring()
        elif progress.note(alias, payload):
            doorbell("result").ring()
        return
    if payload == "result":
        progress.blind_hint()
    kind = payload or "work"
    doorbell(kind if kind in KINDS else "work").ring()


#: This process's listener per ``(pid, alias)`` (``None``: none could be started, or it is
#: starting).
running: dict[tuple[int, str], Listener | None] = {}
running_lock = threading.Lock()


class ListenerThread:
    """A daemon thread that receives hints and rings doorbells; subclasses connect, wait
    for one batch of hints and close."""

    mode = "none"

    def __init__(self, alias: str) -> None:
        self.alias = alias
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        #: Whether hints are being received (false from a failure until its retry).
        self.listening = False

    def probe(self) -> ProbeResult:
        raise NotImplementedError

    def start(self) -> None:
        self._thread = threading.Thread(
            target=self._run, name=f"solid-objects-wakeup-{self.mode}", daemon=True
        )
        self._thread.start()

    @property
    def alive(self) -> bool:
        return self._thread is not None and self._thread.is_alive() and not self._stop.is_set()

    def stop(self, timeout: float = 2.0) -> None:
        self._stop.set()
        with running_lock:
            for key, listener in list(running.items()):
                if listener is self:
                    del running[key]
        if self._thread is not None:
            self._thread.join(timeout)
        self._close()

    def _run(self) -> None:
        backoff = 0.5
        while not self._stop.is_set():
            try:
                self.listening = True
                self._listen()
                backoff = 0.5
            except Exception as exc:
                self.listening = False
                if self._stop.is_set():
                    break
                logger.warning(
                    "wake-up %s listener failed, retrying in %.1fs: %s", self.mode, backoff, exc
                )
                self._close()
                self._stop.wait(backoff)
                backoff = min(backoff * 2, 30.0)
                doorbell("work").ring()  # hints may have been missed meanwhile

    def _listen(self) -> None:
        raise NotImplementedError

    def _close(self) -> None:
        raise NotImplementedError
