"""The statements of ``solid_objects_reshard`` that depend on the database: locking one
identity before it moves, with whether a live lease holds it (on the database clock)."""

from __future__ import annotations

from typing import Any

from .dialect import Dialect
from .sql import render

#: Take the instance's write lock with the transaction's first statement (a no-op write:
#: SQLite has no row locks and must not upgrade a read lock; elsewhere the row lock).
LOCK_IDENTITY = (
    "UPDATE {t_instances} SET activation_generation = activation_generation "
    "WHERE actor_type = %(actor_type)s AND actor_id = %(actor_id)s"
)

#: The instance and whether a lease that has not expired holds it.
LEASE_OF_IDENTITY = (
    "SELECT id, CASE WHEN activation_token IS NOT NULL AND activation_expires_at > {now} "
    "THEN 1 ELSE 0 END FROM {t_instances} "
    "WHERE actor_type = %(actor_type)s AND actor_id = %(actor_id)s{for_update}"
)


def lock_identity(
    dialect: Dialect, cursor: Any, actor_type: str, actor_id: str
) -> tuple[int, bool] | None:
    """Lock the instance ``(actor_type, actor_id)`` until the caller's transaction ends:
    ``(instance id, leased)``, or ``None`` when there is no such instance. While the lock is
    held no enqueue, lease or fenced commit can write the instance."""
    params = {"actor_type": actor_type, "actor_id": actor_id}
    cursor.execute(render(dialect, LOCK_IDENTITY), params)
    cursor.execute(render(dialect, LEASE_OF_IDENTITY), params)
    row = cursor.fetchone()
    return None if row is None else (int(row[0]), bool(row[1]))


#: The worker processes of this database that still heartbeat (sync callers excluded).
LIVE_WORKERS = (
    "SELECT kind, hostname, pid FROM {t_processes} WHERE shutdown_state <> 'stopped' "
    "AND kind <> 'caller' AND last_heartbeat_at >= {later:silence} ORDER BY kind, hostname, pid"
)


def live_workers(dialect: Dialect, cursor: Any, alive_for: float) -> list[tuple[str, str, int]]:
    """``(kind, hostname, pid)`` of every worker, scheduler or broadcaster process whose last
    heartbeat is at most ``alive_for`` seconds old (database clock)."""
    cursor.execute(render(dialect, LIVE_WORKERS), {"silence": dialect.interval(-alive_for)})
    return [(str(kind), str(host), int(pid)) for kind, host, pid in cursor.fetchall()]
