"""How many database connections a worker process holds, and whether the configured pool
can give them.

A worker process opens one Django connection per thread that touches the database: each
role thread (``--threads`` actor threads; under ``--all-roles`` one effect, one reminder
and one broadcast thread), the supervisor's main thread (heartbeats, lease renewal,
dead-process cleanup), the hand-back watchdog of the actor threads' batches (a connection
now and then, see :mod:`solid_objects.hand_back`) and, under ``--all-roles``, the hourly
retention thread. On
PostgreSQL the ``LISTEN`` wake-up listener adds one dedicated connection, outside Django's
handling and outside any pool.

With Django's native PostgreSQL pool (``OPTIONS["pool"]``) every thread's connection is
borrowed from the pool for as long as the thread holds it, so the pool must hold them all;
``pool=True`` means psycopg's default of 4.

With shards a worker serves each shard with a supervisor of its own
(:mod:`.shard_group`), so these counts hold per shard it serves, on that shard's alias; an
effect thread running a rate-limited effect also opens one connection to the home alias
``DATABASE``, where the rates' rows are.
"""

from __future__ import annotations

from typing import Any

#: psycopg_pool's ``ConnectionPool`` default ``min_size`` (and ``max_size`` when unset).
PSYCOPG_POOL_DEFAULT = 4
#: The effect, reminder and broadcast role threads of ``--all-roles``.
EXTRA_ROLE_THREADS = 3


def connections_needed(actor_threads: int = 1, all_roles: bool = False) -> int:
    """Django connections of one ``run_actor_worker`` process (the listener not counted)."""
    threads = max(actor_threads, 0) + (EXTRA_ROLE_THREADS if all_roles else 0)
    periodic = 1 if all_roles else 0
    watchdog = 1 if actor_threads > 0 else 0
    return threads + 1 + periodic + watchdog


def pool_max_size(settings_dict: dict[str, Any]) -> int | None:
    """The ``max_size`` of Django's native pool configured for an alias; ``None`` when the
    alias does not use one."""
    pool = (settings_dict.get("OPTIONS") or {}).get("pool")
    if not pool:
        return None
    if pool is True:
        return PSYCOPG_POOL_DEFAULT
    if isinstance(pool, dict):
        size = pool.get("max_size") or pool.get("min_size") or PSYCOPG_POOL_DEFAULT
        return int(size)
    return None
