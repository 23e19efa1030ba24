"""SQLite 3.35+: writers are serialised by the database lock, so no row locks are needed.

Every write transaction should start with a write (``UPDATE``/``INSERT``) so a deferred
``BEGIN`` never has to upgrade a read lock; we recommend ``"transaction_mode": "IMMEDIATE"``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .dialect import Dialect
from .rows import LeaseRow

_FORMAT = "'%%Y-%%m-%%d %%H:%%M:%%f'"


class SQLiteDialect(Dialect):
    vendor = "sqlite"
    now = f"strftime({_FORMAT}, 'now')"
    skip_locked = ""
    for_update = ""
    write_lock_first = True

    def now_plus(self, seconds: float) -> tuple[str, list[Any]]:
        return f"strftime({_FORMAT}, 'now', %s)", [f"{seconds:+.6f} seconds"]

    #: BEGIN IMMEDIATE (the recommended transaction mode) waits for the database lock.
    lock_wait_before_begin = True

    def bound_lock_wait(self, cursor: Any, seconds: float) -> Any:
        cursor.execute("PRAGMA busy_timeout", [])
        previous = cursor.fetchone()[0]
        cursor.execute(f"PRAGMA busy_timeout = {max(1, int(seconds * 1000))}", [])
        return previous

    def unbound(self, cursor: Any, token: Any) -> None:
        if token is not None:
            cursor.execute(f"PRAGMA busy_timeout = {int(token)}", [])

    def allocate_sequence(
        self, cursor: Any, actor_type: str, actor_id: str, state_version: int
    ) -> tuple[int, int, int]:
        n = self.now
        cursor.execute(
            f"INSERT INTO {self.t_instances} (actor_type, actor_id, state, state_version, "
            "next_message_sequence, activation_generation, state_revision, created_at, "
            f"updated_at) VALUES (%s, %s, '{{}}', %s, 2, 0, 0, {n}, {n}) "
            "ON CONFLICT (actor_type, actor_id) DO UPDATE SET "
            "next_message_sequence = next_message_sequence + 1 "
            "RETURNING id, next_message_sequence - 1, state_revision",
            [actor_type, actor_id, state_version],
        )
        instance_id, sequence, revision = cursor.fetchone()
        return int(instance_id), int(sequence), int(revision)

    def acquire_lease(
        self,
        cursor: Any,
        instance_ids: Sequence[int],
        *,
        owner_id: str,
        token: str,
        lease_seconds: float,
        cached: dict[int, int] | None = None,
        wait: bool = False,
    ) -> LeaseRow | None:
        if not instance_ids:
            return None
        placeholders = ", ".join(["%s"] * len(instance_ids))
        expires_sql, expires_params = self.now_plus(lease_seconds)
        n = self.now
        t = self.t_instances
        state_sql, state_params = self.state_unless_cached(t, cached, instance_ids)
        # The first free candidate in the given order (oldest work first), not the lowest id.
        order_sql, order_params = self.candidate_order("id", instance_ids)
        cursor.execute(
            f"UPDATE {self.t_instances} SET activation_owner_id = %s, activation_token = %s, "
            f"activation_expires_at = {expires_sql}, "
            "activation_generation = activation_generation + 1, "
            f"activated_at = {n}, last_claimed_at = {n}, updated_at = {n} "
            f"WHERE id = (SELECT id FROM {self.t_instances} WHERE id IN ({placeholders}) "
            "AND paused_at IS NULL AND (activation_token IS NULL OR "
            f"activation_expires_at <= {n}){order_sql} LIMIT 1) "
            f"RETURNING id, actor_type, actor_id, {state_sql}, state_version, "
            "state_revision, activation_generation, "
            f"(SELECT COUNT(*) FROM {self.t_claimed} c "
            f"WHERE c.instance_id = {self.t_instances}.id)",
            [
                owner_id,
                token,
                *expires_params,
                *instance_ids,
                *order_params,
                *state_params,
            ],
        )
        row = cursor.fetchone()
        return None if row is None else self._lease_from_row(row, owner_id, token)
