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
from ..db.vendors import dialect_for

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
    n = dialect.now
    with transaction.atomic(using=alias), connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO {dialect.t_processes} (id, kind, hostname, pid, started_at, "
            "last_heartbeat_at, metadata, shutdown_state, created_at, updated_at) VALUES "
            f"(%s, %s, %s, %s, {n}, {n}, {dialect.json}, 'running', {n}, {n})",
            [
                process_id,
                kind,
                socket.gethostname()[:255],
                os.getpid(),
                json.dumps(_metadata(metadata)),
            ],
        )
    signals.send(signals.process_started, process_id=process_id, kind=kind, pid=os.getpid())
    return process_id


def heartbeat(process_id: str, alias: str, state: str | None = None) -> bool:
    """Refresh the heartbeat; ``False`` if the row is gone or was marked stopped."""
    connection = connections[alias]
    dialect = dialect_for(connection)
    n = dialect.now
    sets = f"last_heartbeat_at = {n}, updated_at = {n}"
    params: list[Any] = []
    if state is not None:
        sets += ", shutdown_state = %s"
        params.append(state)
        if state == "draining":
            sets += f", shutdown_requested_at = {n}"
    with connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE {dialect.t_processes} SET {sets} WHERE id = %s "
            "AND shutdown_state <> 'stopped'",
            [*params, process_id],
        )
        return cursor.rowcount == 1


def release_owned(cursor: Any, dialect: Any, process_ids: list[str]) -> int:
    """Give back everything the processes hold: claimed turns go back to ready (their
    attempt stays counted), leases are cleared, outbox and reminder claims return to
    pending. Returns how many claimed turns were released."""
    if not process_ids:
        return 0
    marks = ", ".join(["%s"] * len(process_ids))
    n = dialect.now
    # Leases first: this takes the instance row locks, so a fenced commit in flight either
    # finishes before us (its claim is then gone) or fails its fence after us.
    cursor.execute(
        f"UPDATE {dialect.t_instances} SET activation_owner_id = NULL, activation_token = NULL, "
        f"activation_expires_at = NULL, updated_at = {n} "
        f"WHERE activation_owner_id IN ({marks})",
        process_ids,
    )
    cursor.execute(
        f"INSERT INTO {dialect.t_ready} (message_id, instance_id, sequence, available_at, "
        f"created_at) SELECT m.id, m.instance_id, m.sequence, {n}, {n} "
        f"FROM {dialect.t_claimed} c JOIN {dialect.t_messages} m ON m.id = c.message_id "
        f"WHERE c.process_id IN ({marks})",
        process_ids,
    )
    released = cursor.rowcount
    cursor.execute(f"DELETE FROM {dialect.t_claimed} WHERE process_id IN ({marks})", process_ids)
    for table, pending in ((dialect.t_effects, "pending"), (dialect.t_broadcasts, "pending")):
        cursor.execute(
            f"UPDATE {table} SET status = %s, claimed_by = NULL, claimed_at = NULL, "
            f"updated_at = {n} WHERE claimed_by IN ({marks}) AND status = 'processing'",
            [pending, *process_ids],
        )
    cursor.execute(
        f"UPDATE {dialect.t_reminders} SET claimed_by = NULL, claimed_at = NULL "
        f"WHERE claimed_by IN ({marks})",
        process_ids,
    )
    return max(released, 0)


def deregister(process_id: str, alias: str) -> None:
    """Graceful stop: release what we hold and mark the row stopped."""
    connection = connections[alias]
    dialect = dialect_for(connection)
    n = dialect.now
    with transaction.atomic(using=alias), connection.cursor() as cursor:
        release_owned(cursor, dialect, [process_id])
        cursor.execute(
            f"UPDATE {dialect.t_processes} SET shutdown_state = 'stopped', stopped_at = {n}, "
            f"updated_at = {n} WHERE id = %s",
            [process_id],
        )
    signals.send(signals.process_stopped, process_id=process_id, pid=os.getpid())


def cleanup_dead(alias: str, threshold: float | None = None) -> list[str]:
    """Release what processes with a stale heartbeat hold and mark them stopped."""
    threshold = get_settings().PROCESS_ALIVE_THRESHOLD if threshold is None else threshold
    connection = connections[alias]
    dialect = dialect_for(connection)
    limit_sql, limit_params = dialect.now_plus(-threshold)
    with transaction.atomic(using=alias), connection.cursor() as cursor:
        cursor.execute(
            f"SELECT id FROM {dialect.t_processes} WHERE shutdown_state <> 'stopped' "
            f"AND last_heartbeat_at < {limit_sql}{dialect.skip_locked}",
            limit_params,
        )
        dead = [row[0] for row in cursor.fetchall()]
        if not dead:
            return []
        release_owned(cursor, dialect, dead)
        marks = ", ".join(["%s"] * len(dead))
        n = dialect.now
        cursor.execute(
            f"UPDATE {dialect.t_processes} SET shutdown_state = 'stopped', stopped_at = {n}, "
            f"updated_at = {n} WHERE id IN ({marks})",
            dead,
        )
    for process_id in dead:
        logger.warning("process %s stopped heartbeating; its work was released", process_id)
        signals.send(signals.process_pruned, process_id=process_id, reason="dead")
    return dead


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
