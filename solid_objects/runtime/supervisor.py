"""The worker process: role threads under one supervisor.

The main thread registers the process row(s), heartbeats, renews leases of long turns,
cleans up dead processes, replaces role threads that crashed, and on SIGTERM/SIGINT stops
claiming, lets the turns in flight finish and commit, releases leases, marks its rows
stopped and returns 0. A second signal forces an immediate exit.
"""

from __future__ import annotations

import logging
import os
import signal
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from django.db import DatabaseError, connections

from ..activation import ActivationCache
from ..conf import get_settings
from . import processes
from .roles import Role, renew_leases
from .wakeup import KINDS, doorbell

logger = logging.getLogger("solid_objects")

#: Dead-process cleanup cadence of a supervisor (seconds).
CLEANUP_INTERVAL = 60.0
#: Retention cadence under ``--all-roles`` (seconds).
RETENTION_INTERVAL = 3600.0


@dataclass
class _Slot:
    factory: Callable[[Supervisor, int], Role]
    index: int
    role: Role | None = None
    thread: threading.Thread | None = None
    restarts: int = 0


@dataclass
class Supervisor:
    """Runs role threads; ``run()`` blocks until stopped and returns the exit code."""

    roles: Iterable[tuple[Callable[[Supervisor, int], Role], int]]
    alias: str = field(default_factory=lambda: get_settings().DATABASE)
    periodic: list[tuple[float, Callable[[], Any]]] = field(default_factory=list)
    install_signal_handlers: bool = True

    def __post_init__(self) -> None:
        self.stopping = threading.Event()
        self.activation_cache = ActivationCache()
        self._slots = [
            _Slot(factory, index) for factory, count in self.roles for index in range(count)
        ]
        self._leases: dict[int, Any] = {}
        self._leases_lock = threading.Lock()
        self._signals = 0
        self.process_ids: dict[str, str] = {}
        self.started = threading.Event()

    # -- leases in flight --------------------------------------------------------------------
    def track(self, lease: Any) -> None:
        with self._leases_lock:
            self._leases[id(lease)] = lease

    def untrack(self, lease: Any) -> None:
        with self._leases_lock:
            self._leases.pop(id(lease), None)

    # -- lifecycle ----------------------------------------------------------------------------
    def request_stop(self, *_: Any) -> None:
        self._signals += 1
        if self._signals > 1:
            logger.warning("second stop signal: exiting now")
            os._exit(1)
        logger.info("stop requested: finishing the turns in flight")
        self.stopping.set()
        for kind in KINDS:
            doorbell(kind).ring()

    def run(self) -> int:
        settings = get_settings()
        if self.install_signal_handlers:
            signal.signal(signal.SIGTERM, self.request_stop)
            signal.signal(signal.SIGINT, self.request_stop)
        kinds = sorted({slot.factory(self, slot.index).kind for slot in self._slots})
        for kind in kinds:
            self.process_ids[kind] = processes.register(
                kind, self.alias, {"roles": len(self._slots)}
            )
        for slot in self._slots:
            self._start(slot)
        self.started.set()
        next_heartbeat = next_renewal = 0.0
        next_cleanup = time.monotonic() + min(CLEANUP_INTERVAL, settings.PROCESS_ALIVE_THRESHOLD)
        next_periodic = [time.monotonic() + interval for interval, _ in self.periodic]
        tick = min(settings.PROCESS_HEARTBEAT_INTERVAL, settings.LEASE_RENEWAL_INTERVAL, 1.0)
        try:
            while not self.stopping.is_set():
                now = time.monotonic()
                try:
                    if now >= next_heartbeat:
                        for process_id in self.process_ids.values():
                            processes.heartbeat(process_id, self.alias)
                        next_heartbeat = now + settings.PROCESS_HEARTBEAT_INTERVAL
                    if now >= next_renewal:
                        with self._leases_lock:
                            leases = list(self._leases.values())
                        renew_leases(self.alias, leases)
                        next_renewal = now + settings.LEASE_RENEWAL_INTERVAL
                    if now >= next_cleanup:
                        processes.cleanup_dead(self.alias)
                        next_cleanup = now + min(CLEANUP_INTERVAL, settings.PROCESS_ALIVE_THRESHOLD)
                    for position, (interval, task) in enumerate(self.periodic):
                        if now >= next_periodic[position]:
                            next_periodic[position] = now + interval
                            task()
                except DatabaseError as exc:
                    logger.warning("supervisor: database error: %s", exc)
                    connections[self.alias].close()
                for slot in self._slots:
                    if (
                        slot.thread is not None
                        and not slot.thread.is_alive()
                        and not self.stopping.is_set()
                    ):
                        slot.restarts += 1
                        logger.error(
                            "role %s stopped unexpectedly; starting a replacement",
                            slot.role.label if slot.role else slot.index,
                        )
                        self._start(slot)
                self.stopping.wait(tick)
        finally:
            self._shutdown(settings.SHUTDOWN_TIMEOUT)
        return 0

    def _start(self, slot: _Slot) -> None:
        role = slot.factory(self, slot.index)
        role.process_id = self.process_ids[role.kind]
        slot.role = role
        slot.thread = threading.Thread(
            target=self._run_role, args=(role,), name=f"solid-objects-{role.label}", daemon=True
        )
        slot.thread.start()

    def _run_role(self, role: Role) -> None:
        try:
            role.loop()
        except Exception:
            logger.exception("role %s crashed", role.label)
            raise

    def _shutdown(self, timeout: float) -> None:
        self.stopping.set()
        for kind in KINDS:
            doorbell(kind).ring()
        deadline = time.monotonic() + timeout
        for slot in self._slots:
            if slot.thread is not None:
                slot.thread.join(max(0.0, deadline - time.monotonic()))
        for process_id in self.process_ids.values():
            try:
                processes.deregister(process_id, self.alias)
            except DatabaseError:
                logger.exception("could not mark process %s stopped", process_id)
        connections[self.alias].close()

    def slots(self) -> list[_Slot]:
        return list(self._slots)
