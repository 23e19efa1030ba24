"""Each thread of a worker process names the database sessions it opens after its role
(``solid_objects worker actors-0``, ``solid_objects supervisor``...), so a DBA can tell
them apart in ``pg_stat_activity`` (see :mod:`solid_objects.db.session_names`).

A thread declares its name with :func:`use`; Django's ``connection_created`` signal names
every connection the thread opens afterwards (a reconnect after an outage included).
Threads that never call :func:`use` (web requests, sync callers) are left alone: name them
with your database ``OPTIONS`` as usual.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

from django.db.backends.signals import connection_created

from ..db.session_names import name_session

logger = logging.getLogger("solid_objects")
PREFIX = "solid_objects"
_local = threading.local()


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
    a test thread that ran one goes back to unnamed connections)."""
    _local.name = None


def current() -> str | None:
    return getattr(_local, "name", None)


def _name(connection: Any) -> None:
    name = current()
    if name is None:
        return
    try:
        name_session(connection, name)
    except Exception:  # naming is a courtesy: never fail a connection over it
        logger.debug("could not name the database session", exc_info=True)


def _on_connection_created(sender: Any, connection: Any, **kwargs: Any) -> None:
    _name(connection)


connection_created.connect(_on_connection_created, dispatch_uid="solid_objects.connection_names")
