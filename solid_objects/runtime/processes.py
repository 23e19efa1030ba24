"""The process registry: registration, heartbeats, graceful deregistration and cleanup of
processes that died without saying so."""

from __future__ import annotations

import logging
import os
import platform
import socket
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import django
from django.db import connections, transaction

from .. import signals
from ..conf import get_settings
from ..db.process_kinds import kinds_of
from ..db.vendors import dialect_for
from ..pause_points import pause_point

logger = logging.getLogger("solid_objects")


def _metadata(extra: dict[str, Any] | None = None) -> dict[str, Any]:
    from importlib.metadata import PackageNotFoundError, version

    try:
        library = version("django-solid-objects")
    except PackageNotFoundError:  # pragma: no cover - running from a checkout
        library = "unknown"
    return {
        "library": library,
        "python": platform.python_version(),
        "django": django.get_version(),
        **(extra or {}),
    }


def register(kind: str, alias: str, metadata: dict[str, Any] | None = None) -> str:
    """Insert this process's registry row and return its id."""
    import json

    process_id = str(uuid.uuid4())
    connection = connections[alias]
    dialect = dialect_for(connection)
    with transaction.atomic(using=alias), connection.cursor() as cursor:
        dialect.insert_process(
            cursor,
            process_id,
            kind,
            socket.gethostname()[:255],
            os.getpid(),
            json.dumps(_metadata(metadata)),
        )
    signals.send(signals.process_started, process_id=process_id, kind=kind, pid=os.getpid())
    return process_id


def heartbeat(process_id: str, alias: str, state: str | None = None) -> bool:
    """Refresh the heartbeat; ``False`` if the row is gone or was marked stopped."""
    connection = connections[alias]
    with connection.cursor() as cursor:
        return dialect_for(connection).heartbeat_process(cursor, process_id, state)


def release_owned(alias: str, process_ids: list[str]) -> int:
    """Give back everything the processes hold: claimed turns go back to ready (their
    attempt stays counted), leases are cleared, outbox and reminder claims return to
    pending. Returns how many claimed turns were released.

    Each instance is released in its own short transaction under its row lock, the lock
    that stale-claim recovery and the fenced commit hold too (so only claims that are still
    there when we hold it are requeued), and never more than one instance lock at a time
    (so cleanup cannot deadlock with a caller's transaction that enqueues to several
    actors)."""
    if not process_ids:
        return 0
    connection = connections[alias]
    dialect = dialect_for(connection)
    with connection.cursor() as cursor:
        instance_ids = dialect.instances_held_by(cursor, process_ids)
    released = 0
    for instance_id in instance_ids:
        pause_point("cleanup.before_instance")
        with transaction.atomic(using=alias), connection.cursor() as cursor:
            released += dialect.release_instance_held_by(cursor, instance_id, process_ids)
    with transaction.atomic(using=alias), connection.cursor() as cursor:
        dialect.release_outbox_claims(cursor, process_ids)
    return released


def _mark_stopped(alias: str, process_id: str, silent_for: float | None = None) -> bool:
    """Mark the process stopped (``silent_for``: only if its heartbeat is still that old);
    ``True`` if this call did it, so two cleanups never both report the same process."""
    connection = connections[alias]
    with connection.cursor() as cursor:
        return dialect_for(connection).mark_process_stopped(cursor, process_id, silent_for)


def deregister(process_id: str, alias: str) -> None:
    """Graceful stop: release what we hold and mark the row stopped."""
    release_owned(alias, [process_id])
    _mark_stopped(alias, process_id)
    signals.send(signals.process_stopped, process_id=process_id, pid=os.getpid())


def cleanup_dead(alias: str, threshold: float | None = None) -> list[str]:
    """Release what processes with a stale heartbeat hold and mark them stopped.

    A process is only marked stopped after everything it held was released, so a cleanup
    that dies half-way is simply done again by the next one."""
    threshold = get_settings().PROCESS_ALIVE_THRESHOLD if threshold is None else threshold
    connection = connections[alias]
    with connection.cursor() as cursor:
        dead = dialect_for(connection).silent_processes(cursor, threshold)
    if not dead:
        return []
    release_owned(alias, dead)
    pause_point("cleanup.before_mark_stopped")
    # A process that heartbeated meanwhile was only slow: it stays registered (the leases
    # released above fail its fence; it takes new ones).
    marked = [
        process_id for process_id in dead if _mark_stopped(alias, process_id, silent_for=threshold)
    ]
    kinds: dict[str, str] = {}
    if marked:
        with connection.cursor() as cursor:
            kinds = kinds_of(cursor, dialect_for(connection), marked)
    for process_id in marked:
        kind = kinds.get(process_id, "?")
        if kind == "caller":
            # A web or script process heartbeats only while it makes sync calls: an idle
            # one goes quiet. Its row is closed; its next sync call registers again.
            logger.info("sync caller %s has been idle; its registration was closed", process_id)
        else:
            logger.warning(
                "%s process %s stopped heartbeating; its work was released", kind, process_id
            )
        signals.send(signals.process_pruned, process_id=process_id, reason="dead")
    return marked


class _CallerRegistration:
    """The registry row that sync callers of this OS process lease activations under."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._ids: dict[str, tuple[int, str, float]] = {}

    def process_id(self, alias: str, lock_wait: float | None = None) -> str:
        """This process's caller id, registered (or heartbeated) when needed. ``lock_wait``
        bounds waiting for a database lock on the way (a sync call's deadline)."""
        pid = os.getpid()
        entry = self._ids.get(alias)
        now = time.monotonic()
        if entry is not None and entry[0] == pid:
            if now - entry[2] > get_settings().PROCESS_HEARTBEAT_INTERVAL:
                with _bounded(alias, lock_wait):
                    alive = heartbeat(entry[1], alias)
                if alive:
                    self._ids[alias] = (pid, entry[1], now)
                    return entry[1]
            else:
                return entry[1]
        with self._lock, _bounded(alias, lock_wait):
            process_id = register("caller", alias)
            self._ids[alias] = (pid, process_id, now)
            return process_id

    def forget(self, alias: str) -> None:
        self._ids.pop(alias, None)


callers = _CallerRegistration()


@contextmanager
def _bounded(alias: str, seconds: float | None) -> Iterator[None]:
    """Bound lock waits of the enclosed writes where the transaction's start itself waits
    for a lock (SQLite's BEGIN IMMEDIATE); elsewhere these writes never wait on a lock."""
    connection = connections[alias]
    dialect = dialect_for(connection)
    if seconds is None or not dialect.lock_wait_before_begin:
        yield
        return
    with connection.cursor() as cursor:
        token = dialect.bound_lock_wait(cursor, seconds)
    try:
        yield
    finally:
        with connection.cursor() as cursor:
            dialect.unbound(cursor, token)
