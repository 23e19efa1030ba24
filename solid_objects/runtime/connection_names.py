"""Each thread of a worker process names the database sessions it opens after its role
(``solid_objects worker actors-0``, ``solid_objects supervisor``...), so a DBA can tell
them apart in ``pg_stat_activity`` (see :mod:`solid_objects.db.session_names`).

A thread declares its name with :func:`use`; Django's ``connection_created`` signal names
every connection the thread opens afterwards (a reconnect after an outage included).
Threads that never call :func:`use` (web requests, sync callers) are left alone: name them
with your database ``OPTIONS`` as usual.

Each named session's server-side id (PostgreSQL's backend pid, MySQL/MariaDB's connection
id, read from the driver) is kept per alias (:func:`sessions`), with the PostgreSQL
listener's (:func:`record`); the supervisor writes them into its process rows
(:class:`SessionRecorder`, ``metadata["sessions"]``), so the MariaDB/MySQL processlist,
which shows no names, can be matched to processes and roles too.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable
from typing import Any

from django.db.backends.signals import connection_created

from ..db.session_names import SESSIONS_KEY, name_session, record_sessions

logger = logging.getLogger("solid_objects")
PREFIX = "solid_objects"
#: The ``metadata`` key of a process row that lists its sessions.
METADATA_KEY = SESSIONS_KEY
_local = threading.local()
_lock = threading.Lock()
#: ``{alias: {role name: session id}}`` of this OS process's named sessions.
_sessions: dict[str, dict[str, int]] = {}


def use(name: str) -> None:
    """Name the sessions this thread opens from now on ``"solid_objects <name>"``; a
    connection the thread already holds is renamed at once."""
    from django.db import connections

    _local.name = f"{PREFIX} {name}"
    for connection in connections.all(initialized_only=True):
        if connection.connection is not None:
            _name(connection)


def forget() -> None:
    """This thread names no more sessions (the end of a role loop or of a supervisor run:
    a test thread that ran one goes back to unnamed connections); the session ids it
    recorded are dropped (its connections are closed by then)."""
    _local.name = None
    with _lock:
        for alias, role in getattr(_local, "recorded", set()):
            _sessions.get(alias, {}).pop(role, None)
    _local.recorded = set()


def current() -> str | None:
    return getattr(_local, "name", None)


def record(alias: str, role: str, session_id: int) -> None:
    """Remember that this process's ``role`` (``"worker actors-0"``, ``"listener"``) holds
    the session ``session_id`` on ``alias``."""
    with _lock:
        _sessions.setdefault(alias, {})[role] = session_id


def drop(alias: str, role: str) -> None:
    """``role``'s session on ``alias`` is closed."""
    with _lock:
        _sessions.get(alias, {}).pop(role, None)


def sessions(alias: str) -> list[dict[str, Any]]:
    """This process's named sessions on ``alias``: ``[{"name": role, "id": session id}]``
    sorted by name (the form its process rows store)."""
    with _lock:
        named = dict(_sessions.get(alias, {}))
    return [{"name": role, "id": named[role]} for role in sorted(named)]


def _name(connection: Any) -> None:
    name = current()
    if name is None:
        return
    try:
        session = name_session(connection, name)
    except Exception:  # naming is a courtesy: never fail a connection over it
        logger.debug("could not name the database session", exc_info=True)
        return
    if session is not None:
        role = name.removeprefix(f"{PREFIX} ")
        record(connection.alias, role, session)
        if not hasattr(_local, "recorded"):
            _local.recorded = set()
        _local.recorded.add((connection.alias, role))


def _on_connection_created(sender: Any, connection: Any, **kwargs: Any) -> None:
    _name(connection)


connection_created.connect(_on_connection_created, dispatch_uid="solid_objects.connection_names")


class SessionRecorder:
    """Keeps ``metadata["sessions"]`` of a supervisor's process rows on ``alias`` equal to
    :func:`sessions` of that alias. :meth:`update` is called after each heartbeat and
    writes only when a session opened, closed or the rows changed (one read, and one
    ``UPDATE`` per row; the supervisor is the only writer of its rows' metadata)."""

    def __init__(self, alias: str) -> None:
        self.alias = alias
        self._written: tuple[tuple[str, ...], list[dict[str, Any]]] = ((), [])

    def update(self, process_ids: Iterable[str]) -> bool:
        """Write the sessions if they changed since the last write; ``True`` if written."""
        from django.db import connections, transaction

        from ..db.vendors import dialect_for

        ids = tuple(sorted(process_ids))
        current = sessions(self.alias)
        if not ids or (ids, current) == self._written:
            return False
        if not current and not self._written[1]:  # nothing to record (SQLite), none recorded
            self._written = (ids, current)
            return False
        connection = connections[self.alias]
        with transaction.atomic(using=self.alias), connection.cursor() as cursor:
            record_sessions(dialect_for(connection), cursor, ids, current)
        self._written = (ids, current)
        return True
