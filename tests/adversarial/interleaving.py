"""Support for the deterministic interleaving tests: observe that a session waits for a lock.

The tests hold one runtime thread at a named pause point (``solid_objects.testing.pause_at``)
and start the rival session in another thread. Before letting the first go on, they wait
until the rival is *seen* blocked on a row lock by the server itself, so the order of the
two sessions is the one the test names, every run.
"""

from __future__ import annotations

import re

from django.db import connections

from solid_objects.conf import get_settings
from tests.support.waiting import wait_until

from ..runtime.helpers import Worker

#: How long a rival may take to reach its lock wait.
PATIENCE = 30.0


def lock_waiters(alias: str) -> int:
    """How many other sessions of this database wait for a lock right now."""
    connection = connections[alias]
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute(
                "SELECT COUNT(*) FROM pg_stat_activity WHERE datname = current_database() "
                "AND wait_event_type = 'Lock' AND pid <> pg_backend_pid()"
            )
        elif connection.vendor == "mysql":
            # InnoDB's own status report (information_schema.INNODB_TRX is a cache that can
            # lag far behind): the sessions of transactions in LOCK WAIT, kept if they are
            # sessions of this database.
            cursor.execute("SHOW ENGINE INNODB STATUS")
            status = cursor.fetchone()[2]
            waiting = {
                int(found.group(1))
                for chunk in status.split("---TRANSACTION")
                if "LOCK WAIT" in chunk
                and (found := re.search(r"(?:MySQL|MariaDB) thread id (\d+)", chunk))
            }
            if not waiting:
                return 0
            marks = ", ".join(["%s"] * len(waiting))
            cursor.execute(
                "SELECT COUNT(*) FROM information_schema.PROCESSLIST "
                f"WHERE DB = DATABASE() AND ID IN ({marks})",
                sorted(waiting),
            )
        else:
            return 0
        return int(cursor.fetchone()[0])


def wait_blocked_or_done(rival: Worker, alias: str | None = None) -> str:
    """Return once ``rival`` is blocked on a lock ("blocked") or has finished ("done").

    SQLite has no row locks to observe: a rival there waits for the database's write lock
    (BEGIN IMMEDIATE), which serialises it after the held transaction either way, so this
    returns "serialised" at once."""
    alias = alias or get_settings().DATABASE
    if connections[alias].vendor == "sqlite":
        return "serialised"

    def state() -> str:
        if rival.done.is_set():
            return "done"
        return "blocked" if lock_waiters(alias) else ""

    return wait_until(
        state, PATIENCE, interval=0.01, what=f"{rival.name} to block on a lock or finish"
    )
