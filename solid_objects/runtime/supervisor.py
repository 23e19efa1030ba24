"""The worker process: role threads under one supervisor.

The main thread starts the cross-process wake-up transport (PostgreSQL ``LISTEN`` or Redis,
with a probe that falls back to polling), registers one process row per role kind,
heartbeats them (a row found stopped by another process's dead-process cleanup is replaced
by a fresh registration), renews leases of long turns, cleans up dead processes, runs
periodic tasks (retention under ``--all-roles``) in their own threads so a long run never
delays a heartbeat, and replaces role threads that crashed (at once, with a backoff for a
role that keeps crashing).

On SIGTERM/SIGINT it stops claiming, lets the turns in flight finish and commit, releases
leases, marks its rows stopped, stops the transport and returns 0. A second signal forces an
immediate exit.

A supervisor serves one database alias. A worker serving several shards runs one per shard
under a :class:`~.shard_group.SupervisorGroup`, which then owns the signal handling.
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

from django.db import DatabaseError, InterfaceError, connections

from ..activation import ActivationCache
from ..conf import SolidObjectsSettings, get_settings
from ..db.connections import close_quietly
from ..db.rows import LeaseRow
from ..db.vendors import dialect_for
from ..db.work_filter import WorkFilter
from . import connection_names, lifecycle, processes
from .connection_budget import pool_max_size
from .roles import Role, renew_leases
from .wakeup import KINDS, doorbell
from .wakeup import transports as wakeup_transports
from .wakeup.listener import Listener

logger = logging.getLogger("solid_objects")

#: Dead-process cleanup cadence of a supervisor (seconds).
CLEANUP_INTERVAL = 60.0
#: Retention cadence under ``--all-roles`` (seconds).
RETENTION_INTERVAL = 3600.0
#: A role that crashes again waits min(2 ** (restarts - 1), this) seconds before restarting.
MAX_RESTART_DELAY = 30.0


@dataclass
class Periodic:
    """A task the supervisor runs every ``interval`` seconds in a thread of its own (a run
    still going when the next is due is not started twice). The first run comes after
    ``first_delay`` (default: one interval)."""

    interval: float
    function: Callable[[], Any]
    name: str = "periodic"
    first_delay: float | None = None
    next_run: float = 0.0
    thread: threading.Thread | None = None


@dataclass
class _Slot:
    factory: Callable[[Supervisor, int], Role]
    index: int
    role: Role | None = None
    thread: threading.Thread | None = None
    restarts: int = 0
    restart_at: float = 0.0
    started_at: float = 0.0


@dataclass
class Supervisor:
    """Runs role threads; ``run()`` blocks until stopped and returns the exit code."""

    roles: Iterable[tuple[Callable[[Supervisor, int], Role], int]]
    alias: str = field(default_factory=lambda: get_settings().DATABASE)
    periodic: list[Periodic | tuple[float, Callable[[], Any]]] = field(default_factory=list)
    install_signal_handlers: bool = True
    #: Start the cross-process wake-up transport (tests of a single process may skip it).
    wake_ups: bool = True
    #: The actors this process's actor role takes (``None``: every actor).
    work_filter: WorkFilter | None = None

    def __post_init__(self) -> None:
        self.stopping = threading.Event()
        self.activation_cache = ActivationCache()
        self._slots = [
            _Slot(factory, index) for factory, count in self.roles for index in range(count)
        ]
        self._tasks: list[Periodic] = []
        self._leases: dict[int, LeaseRow] = {}
        self._leases_lock = threading.Lock()
        self._signals = 0
        self._attention = threading.Event()  # a role thread ended: look at once
        self.process_ids: dict[str, str] = {}
        # The named sessions' ids, written into the process rows (docs/operations.md).
        self.session_recorder = connection_names.SessionRecorder(self.alias)
        self.started = threading.Event()
        self.transport: Listener | None = None

    # -- leases in flight --------------------------------------------------------------------
    def track(self, lease: LeaseRow) -> None:
        with self._leases_lock:
            self._leases[id(lease)] = lease

    def untrack(self, lease: LeaseRow) -> None:
        with self._leases_lock:
            self._leases.pop(id(lease), None)

    # -- lifecycle ----------------------------------------------------------------------------
    def request_stop(self, *_: Any) -> None:
        self._signals += 1
        if self._signals > 1:
            logger.warning("second stop signal: exiting now")
            os._exit(1)
        logger.info("stop requested: finishing the turns in flight")
        self.stop()

    def stop(self) -> None:
        """Stop claiming and end :meth:`run` once the turns in flight finished (no signal
        counted: a :class:`~.shard_group.SupervisorGroup` counts the signals of all)."""
        self.stopping.set()
        self._attention.set()
        for kind in KINDS:
            doorbell(kind).ring()

    def run(self) -> int:
        settings = get_settings()
        if self.install_signal_handlers:  # a worker process of its own (not a test thread)
            signal.signal(signal.SIGTERM, self.request_stop)
            signal.signal(signal.SIGINT, self.request_stop)
            lifecycle.ensure_visible()
        began = time.monotonic()
        clean = True
        connection_names.use("supervisor")
        self._warn_small_pool()
        try:
            if self.wake_ups:
                self.transport = wakeup_transports.start(self.alias)
            kinds = sorted({slot.factory(self, slot.index).kind for slot in self._slots})
            for kind in kinds:
                self.process_ids[kind] = processes.register(
                    kind, self.alias, {"roles": len(self._slots)}
                )
            for slot in self._slots:
                self._start(slot)
            lifecycle.started(
                lifecycle.describe_roles(slot.role.label for slot in self._slots if slot.role),
                self.alias,
                connections[self.alias].vendor,
                self.transport.mode if self.transport is not None else "polling only",
                list(self.process_ids.values()),
            )
            self.started.set()
            self._loop(settings)
        finally:
            clean = self._shutdown(settings.SHUTDOWN_TIMEOUT)
            if self.started.is_set():
                lifecycle.stopped(time.monotonic() - began, clean)
            connection_names.forget()
        return 0

    def _loop(self, settings: SolidObjectsSettings) -> None:
        self._tasks = [
            task if isinstance(task, Periodic) else Periodic(task[0], task[1])
            for task in self.periodic
        ]
        next_heartbeat = next_renewal = 0.0
        cleanup_every = min(CLEANUP_INTERVAL, settings.PROCESS_ALIVE_THRESHOLD)
        next_cleanup = time.monotonic() + cleanup_every
        for task in self._tasks:
            delay = task.interval if task.first_delay is None else task.first_delay
            task.next_run = time.monotonic() + delay
        tick = min(settings.PROCESS_HEARTBEAT_INTERVAL, settings.LEASE_RENEWAL_INTERVAL, 1.0)
        while not self.stopping.is_set():
            now = time.monotonic()
            try:
                if now >= next_heartbeat:
                    self._heartbeat()
                    self.session_recorder.update(self.process_ids.values())
                    next_heartbeat = now + settings.PROCESS_HEARTBEAT_INTERVAL
                if now >= next_renewal:
                    with self._leases_lock:
                        leases = list(self._leases.values())
                    renew_leases(self.alias, leases)
                    next_renewal = now + settings.LEASE_RENEWAL_INTERVAL
                if now >= next_cleanup:
                    processes.cleanup_dead(self.alias)
                    next_cleanup = now + cleanup_every
            except (DatabaseError, InterfaceError) as exc:
                logger.warning("supervisor: database error: %s", exc)
                close_quietly(self.alias)
                # Nobody could heartbeat while the database was unreachable: clean up dead
                # processes only a full threshold after it answers again, so live processes
                # that reconnect are not taken for dead.
                next_cleanup = max(next_cleanup, time.monotonic() + cleanup_every)
            for task in self._tasks:
                if now >= task.next_run:
                    task.next_run = now + task.interval
                    self._run_periodic(task)
            self._replace_crashed(now)
            self._attention.wait(tick)
            self._attention.clear()

    def _warn_small_pool(self) -> None:
        """The pool must hold one connection per role thread, the supervisor's, one per
        periodic task and, with actor threads, the hand-back watchdog's (docs/operations.md,
        "Connections")."""
        size = pool_max_size(connections[self.alias].settings_dict)
        watchdog = int(any(getattr(slot.factory, "name", "") == "actors" for slot in self._slots))
        needed = len(self._slots) + 1 + len(self.periodic) + watchdog
        if size is not None and size < needed:
            logger.warning(
                "the connection pool of %r holds %d connections but this worker keeps %d "
                "in it (%d role threads, the supervisor, %d periodic tasks, %d hand-back "
                "watchdog; its LISTEN connection, if any, is outside the pool): raise "
                'OPTIONS["pool"]["max_size"]',
                self.alias,
                size,
                needed,
                len(self._slots),
                len(self.periodic),
                watchdog,
            )

    def _heartbeat(self) -> None:
        alive = heartbeat_all(self.alias, list(self.process_ids.values()))
        for kind, process_id in list(self.process_ids.items()):
            if process_id in alive:
                continue
            # Another process's cleanup took us for dead (a long pause): it released what we
            # held. Carry on under a fresh registration.
            replacement = processes.register(kind, self.alias, {"roles": len(self._slots)})
            logger.warning(
                "process row %s (%s) was marked stopped by dead-process cleanup; continuing as %s",
                process_id,
                kind,
                replacement,
            )
            self.process_ids[kind] = replacement
            for slot in self._slots:
                if slot.role is not None and slot.role.kind == kind:
                    slot.role.process_id = replacement

    def _replace_crashed(self, now: float) -> None:
        for slot in self._slots:
            if slot.thread is None or slot.thread.is_alive() or self.stopping.is_set():
                continue
            if slot.restart_at == 0.0:
                if now - slot.started_at > 2 * MAX_RESTART_DELAY:
                    slot.restarts = 0  # it had been running fine: not a crash loop
                slot.restarts += 1
                delay = (
                    0.0
                    if slot.restarts == 1
                    else min(2.0 ** (slot.restarts - 2), MAX_RESTART_DELAY)
                )
                slot.restart_at = now + delay
                logger.error(
                    "role %s stopped unexpectedly; starting a replacement in %.0fs",
                    slot.role.label if slot.role else slot.index,
                    delay,
                )
            if now >= slot.restart_at:
                slot.restart_at = 0.0
                self._start(slot)

    def _start(self, slot: _Slot) -> None:
        role = slot.factory(self, slot.index)
        role.process_id = self.process_ids[role.kind]
        slot.role = role
        slot.started_at = time.monotonic()
        slot.thread = threading.Thread(
            target=self._run_role, args=(role,), name=f"solid-objects-{role.label}", daemon=True
        )
        slot.thread.start()

    def _run_role(self, role: Role) -> None:
        try:
            role.loop()
        except Exception:  # the thread ends here; the main loop starts a replacement
            logger.exception("role %s crashed", role.label)
        finally:
            self._attention.set()

    def _run_periodic(self, task: Periodic) -> None:
        if task.thread is not None and task.thread.is_alive():
            logger.info("periodic task %s is still running; skipping this round", task.name)
            return

        def run() -> None:
            connection_names.use(f"periodic {task.name}")
            try:
                task.function()
            except Exception:
                logger.exception("periodic task %s failed", task.name)
            finally:
                connections[self.alias].close()
                connection_names.forget()  # its session is closed: no longer recorded

        task.thread = threading.Thread(target=run, name=f"solid-objects-{task.name}", daemon=True)
        task.thread.start()

    def _shutdown(self, timeout: float) -> bool:
        """Stop every thread (waiting up to ``timeout``); ``True`` if all of them ended."""
        self.stopping.set()
        for kind in KINDS:
            doorbell(kind).ring()
        deadline = time.monotonic() + timeout
        threads = [slot.thread for slot in self._slots] + [task.thread for task in self._tasks]
        for thread in threads:
            if thread is not None:
                thread.join(max(0.0, deadline - time.monotonic()))
        clean = not any(thread is not None and thread.is_alive() for thread in threads)
        for process_id in self.process_ids.values():
            try:
                processes.deregister(process_id, self.alias)
            except DatabaseError:
                logger.exception("could not mark process %s stopped", process_id)
        if self.transport is not None:
            self.transport.stop()
            self.transport = None
        connections[self.alias].close()
        return clean

    def slots(self) -> list[_Slot]:
        return list(self._slots)


def heartbeat_all(alias: str, process_ids: list[str]) -> set[str]:
    """Refresh the heartbeat of every row in one statement; return the ids still running
    (a second statement only when some row was found stopped)."""
    if not process_ids:
        return set()
    connection = connections[alias]
    with connection.cursor() as cursor:
        return dialect_for(connection).heartbeat_processes(cursor, process_ids)
