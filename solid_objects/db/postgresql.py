"""PostgreSQL 14+: the protocol folded into few statements with CTEs and ``RETURNING``.

``now()`` is the transaction's start time, so each transaction reads the clock once.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from .dialect import Dialect
from .notify import CHANNEL, notify_enabled
from .rows import MESSAGE_COLUMNS, Completion, JoinedWrite, LeaseRow, MessageRow

NOTIFY_CHANNEL = CHANNEL


class PostgreSQLDialect(Dialect):
    vendor = "postgresql"
    now = "now()"
    json = "%s::jsonb"
    listen_notify = True
    update_from_returning = True

    def json_text(self, column: str) -> str:
        return f"{column}::text"

    @property
    def notify(self) -> bool:
        """Whether enqueue sends ``NOTIFY`` in its transaction: when the wake-up transport
        is LISTEN/NOTIFY (``WAKE_UP`` "auto" or "postgresql"; see
        :mod:`solid_objects.db.notify`)."""
        return notify_enabled(self)

    def now_plus(self, seconds: float) -> tuple[str, list[Any]]:
        return "(now() + %s * interval '1 microsecond')", [int(seconds * 1_000_000)]

    def bound_lock_wait(self, cursor: Any, seconds: float) -> Any:
        milliseconds = f"{max(1, int(seconds * 1000))}ms"
        cursor.execute(
            "SELECT set_config('lock_timeout', %s, true), "
            "set_config('statement_timeout', %s, true)",
            [milliseconds, milliseconds],
        )
        return None  # SET LOCAL ends with the transaction

    def allocate_sequence(
        self, cursor: Any, actor_type: str, actor_id: str, state_version: int
    ) -> tuple[int, int, int]:
        t = self.t_instances
        cursor.execute(
            f"INSERT INTO {t} AS i (actor_type, actor_id, state, state_version, "
            "next_message_sequence, activation_generation, state_revision, created_at, "
            "updated_at) VALUES (%s, %s, '{}', %s, 2, 0, 0, now(), now()) "
            "ON CONFLICT (actor_type, actor_id) DO UPDATE SET "
            "next_message_sequence = i.next_message_sequence + 1 "
            "RETURNING i.id, i.next_message_sequence - 1, i.state_revision",
            [actor_type, actor_id, state_version],
        )
        instance_id, sequence, revision = cursor.fetchone()
        return int(instance_id), int(sequence), int(revision)

    def insert_message(
        self,
        cursor: Any,
        *,
        instance_id: int,
        actor_type: str,
        actor_id: str,
        sequence: int,
        operation: str,
        delivery_mode: str,
        arguments: str,
        max_attempts: int,
        request_id: str,
        idempotency_key: str | None,
        available_at: datetime | None,
    ) -> int:
        if available_at is None:
            at_sql, at_params = "now()", []
        else:
            at_sql, at_params = "%s", [self.adapt_datetime(available_at)]
        notify = ", pg_notify(%s, '')" if self.notify else ""
        cursor.execute(
            f"WITH m AS (INSERT INTO {self.t_messages} (instance_id, actor_type, actor_id, "
            "operation, delivery_mode, arguments, sequence, attempt_count, max_attempts, "
            "request_id, idempotency_key, enqueued_at, available_at, created_at, updated_at) "
            "VALUES (%s, %s, %s, %s, %s, %s::jsonb, %s, 0, %s, %s, %s, now(), "
            f"{at_sql}, now(), now()) RETURNING id, available_at), "
            f"r AS (INSERT INTO {self.t_ready} (message_id, instance_id, sequence, "
            "available_at, created_at) SELECT id, %s, %s, available_at, now() FROM m) "
            f"SELECT id{notify} FROM m",
            [
                instance_id,
                actor_type,
                actor_id,
                operation,
                delivery_mode,
                arguments,
                sequence,
                max_attempts,
                request_id,
                idempotency_key,
                *at_params,
                instance_id,
                sequence,
                *([NOTIFY_CHANNEL] if self.notify else []),
            ],
        )
        return int(cursor.fetchone()[0])

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
        t = self.t_instances
        lock = "FOR UPDATE" if wait else "FOR UPDATE SKIP LOCKED"
        state_sql, state_params = self.state_unless_cached("i", cached, instance_ids)
        # The first free candidate in the given order (oldest work first), not the lowest
        # id; LockRows sits above the sort, so only the row returned is locked.
        order_sql, order_params = "", []
        if len(instance_ids) > 1:
            order_sql, order_params = (
                " ORDER BY array_position(%s::bigint[], id)",
                [list(instance_ids)],
            )
        cursor.execute(
            f"UPDATE {t} AS i SET activation_owner_id = %s, activation_token = %s, "
            "activation_expires_at = now() + %s * interval '1 microsecond', "
            "activation_generation = i.activation_generation + 1, "
            "activated_at = now(), last_claimed_at = now(), updated_at = now() "
            f"WHERE i.id = (SELECT id FROM {t} WHERE id = ANY(%s) AND paused_at IS NULL "
            f"AND (activation_token IS NULL OR activation_expires_at <= now()){order_sql} "
            f"LIMIT 1 {lock}) "
            f"RETURNING i.id, i.actor_type, i.actor_id, {state_sql}, "
            "i.state_version, i.state_revision, i.activation_generation, "
            f"EXISTS (SELECT 1 FROM {self.t_claimed} c WHERE c.instance_id = i.id)",
            [
                owner_id,
                token,
                int(lease_seconds * 1_000_000),
                list(instance_ids),
                *order_params,
                *state_params,
            ],
        )
        row = cursor.fetchone()
        return None if row is None else self._lease_from_row(row, owner_id, token)

    def acquire_and_claim(
        self,
        cursor: Any,
        instance_ids: Sequence[int],
        *,
        owner_id: str,
        token: str,
        lease_seconds: float,
        cached: dict[int, int] | None = None,
    ) -> tuple[LeaseRow, MessageRow | None, bool] | None:
        """Lease a free candidate and claim its first due turn in ONE autocommit statement.

        Returns the lease, the claimed message (``None`` when the head is not due, or when a
        dead activation left a claimed row: the caller then recovers it in a transaction)
        and whether another due message follows (so a group knows whether to read ahead).
        """
        if not instance_ids:
            return None
        t = self.t_instances
        state_sql, state_params = self.state_unless_cached("i", cached, instance_ids)
        order_sql, order_params = "", []
        if len(instance_ids) > 1:
            order_sql, order_params = (
                " ORDER BY array_position(%s::bigint[], id)",
                [list(instance_ids)],
            )
        columns = ", ".join(f"n.{c.strip()}" for c in MESSAGE_COLUMNS.split(","))
        columns = columns.replace("n.arguments", "n.arguments::text")
        cursor.execute(
            f"WITH i AS (UPDATE {t} AS i SET activation_owner_id = %s, activation_token = %s, "
            "activation_expires_at = now() + %s * interval '1 microsecond', "
            "activation_generation = i.activation_generation + 1, "
            "activated_at = now(), last_claimed_at = now(), updated_at = now() "
            f"WHERE i.id = (SELECT id FROM {t} WHERE id = ANY(%s) AND paused_at IS NULL "
            f"AND (activation_token IS NULL OR activation_expires_at <= now()){order_sql} "
            "LIMIT 1 FOR UPDATE SKIP LOCKED) "
            f"RETURNING i.id, i.actor_type, i.actor_id, {state_sql} AS state, "
            "i.state_version, i.state_revision, i.activation_generation, "
            f"EXISTS (SELECT 1 FROM {self.t_claimed} c WHERE c.instance_id = i.id) AS stale), "
            f"head AS (SELECT h.id, h.available_at FROM {self.t_ready} h, i "
            "WHERE h.instance_id = i.id AND NOT i.stale ORDER BY h.sequence LIMIT 1), "
            f"moved AS (DELETE FROM {self.t_ready} x USING head WHERE x.id = head.id "
            "AND head.available_at <= now() RETURNING x.message_id), "
            f"cl AS (INSERT INTO {self.t_claimed} (message_id, instance_id, process_id, "
            "activation_token, activation_generation, claimed_at) "
            "SELECT moved.message_id, i.id, %s, %s, i.activation_generation, now() "
            "FROM moved, i RETURNING message_id), "
            f"m AS (UPDATE {self.t_messages} n SET attempt_count = n.attempt_count + 1, "
            "started_at = now(), updated_at = now() FROM cl WHERE n.id = cl.message_id "
            f"RETURNING {columns}) "
            "SELECT i.id, i.actor_type, i.actor_id, i.state, i.state_version, "
            "i.state_revision, i.activation_generation, i.stale, m.*, "
            f"(SELECT COUNT(*) FROM (SELECT 1 FROM {self.t_ready} d WHERE d.instance_id = i.id "
            "AND d.available_at <= now() LIMIT 2) AS z) > (SELECT COUNT(*) FROM moved) "
            "FROM i LEFT JOIN m ON TRUE",
            [
                owner_id,
                token,
                int(lease_seconds * 1_000_000),
                list(instance_ids),
                *order_params,
                *state_params,
                owner_id,
                token,
            ],
        )
        row = cursor.fetchone()
        if row is None:
            return None
        lease = self._lease_from_row(row[:8], owner_id, token)
        message = None if row[8] is None else self._message_from_row(row[8:17])
        return lease, message, bool(row[17])

    def claim_next(self, cursor: Any, lease: LeaseRow) -> MessageRow | None:
        columns = ", ".join(f"m.{c.strip()}" for c in MESSAGE_COLUMNS.split(","))
        columns = columns.replace("m.arguments", "m.arguments::text")
        cursor.execute(
            f"WITH head AS (SELECT id FROM {self.t_ready} WHERE instance_id = %s "
            "ORDER BY sequence LIMIT 1), "
            f"moved AS (DELETE FROM {self.t_ready} r USING head WHERE r.id = head.id "
            "AND r.available_at <= now() RETURNING r.message_id), "
            f"claimed AS (INSERT INTO {self.t_claimed} (message_id, instance_id, process_id, "
            "activation_token, activation_generation, claimed_at) "
            "SELECT message_id, %s, %s, %s, %s, now() FROM moved RETURNING message_id) "
            f"UPDATE {self.t_messages} m SET attempt_count = m.attempt_count + 1, "
            "started_at = now(), updated_at = now() FROM claimed "
            f"WHERE m.id = claimed.message_id RETURNING {columns}",
            [lease.instance_id, lease.instance_id, lease.owner_id, lease.token, lease.generation],
        )
        row = cursor.fetchone()
        return None if row is None else self._message_from_row(row)

    def prefetch(
        self, cursor: Any, instance_id: int, after_sequence: int, limit: int
    ) -> list[MessageRow]:
        if limit <= 0:
            return []
        columns = ", ".join(f"m.{c.strip()}" for c in MESSAGE_COLUMNS.split(","))
        columns = columns.replace("m.arguments", "m.arguments::text")
        cursor.execute(
            f"SELECT {columns}, r.available_at <= now() FROM {self.t_ready} r "
            f"JOIN {self.t_messages} m ON m.id = r.message_id "
            "WHERE r.instance_id = %s AND r.sequence > %s ORDER BY r.sequence LIMIT %s",
            [instance_id, after_sequence, limit],
        )
        rows: list[MessageRow] = []
        for row in cursor.fetchall():
            if not row[-1]:
                break
            rows.append(self._message_from_row(row))
        return rows

    def fence(
        self,
        cursor: Any,
        lease: LeaseRow,
        *,
        claimed_message_id: int | None,
        state: str | None,
        state_version: int,
        state_revision: int,
        release: bool,
        lease_seconds: float,
    ) -> bool:
        sets, params = self._fence_sets(
            state, state_version, state_revision, release, lease_seconds
        )
        fence = (
            f"UPDATE {self.t_instances} SET {sets} WHERE id = %s AND activation_owner_id = %s "
            "AND activation_token = %s AND activation_generation = %s "
            "AND activation_expires_at > now() RETURNING id"
        )
        fence_params = [*params, lease.instance_id, lease.owner_id, lease.token, lease.generation]
        if claimed_message_id is None:
            cursor.execute(f"WITH f AS ({fence}) SELECT COUNT(*), 1 FROM f", fence_params)
        else:
            cursor.execute(
                f"WITH f AS ({fence}), u AS (DELETE FROM {self.t_claimed} c USING f "
                "WHERE c.instance_id = f.id AND c.message_id = %s AND c.activation_token = %s "
                "RETURNING c.message_id) SELECT (SELECT COUNT(*) FROM f), "
                "(SELECT COUNT(*) FROM u)",
                [*fence_params, claimed_message_id, lease.token],
            )
        fenced, unclaimed = cursor.fetchone()
        return bool(fenced == 1 and unclaimed == 1)

    #: A group without outbox rows commits in one autocommit statement (see commit_group).
    single_statement_commit = True

    def commit_group(
        self,
        cursor: Any,
        lease: LeaseRow,
        *,
        claimed_message_id: int,
        state: str | None,
        state_version: int,
        state_revision: int,
        release: bool,
        lease_seconds: float,
        completions: Sequence[Completion],
        claim_next: bool,
        hand_off: bool = False,
        notify: bool = False,
        joined: JoinedWrite | None = None,
    ) -> tuple[bool, MessageRow | None, bool]:
        """The whole fenced commit of a group, and the claim of the next turn, in ONE
        statement run in autocommit: one round trip and one commit per group.

        ``f`` (the fence) checks owner, token, generation, the unexpired lease and that the
        claimed row is still ours, and takes the instance row lock; every other part joins
        on it, so if the fence fails nothing at all is written. The claimed row is moved to
        the next message (``cu``) or deleted when there is none (``cd``); updating it in
        place keeps the one-claim-per-actor unique index out of the statement's way. The
        next message is the actor's lowest-sequence ready row outside the group, and only
        if it is due (strict order).

        ``hand_off`` (a sync caller releasing the lease at its own message): if a due message
        follows the group, ``NOTIFY`` work and result hints in the same statement when
        ``notify``, so they go out exactly when it commits; the third value returned says
        whether such work is left without a hint sent (the caller publishes it otherwise).

        ``joined`` (journal entries the group recorded): its INSERT becomes one more part
        of the statement, joined on ``f`` like every other part, and learns the positions it
        returned once the statement committed.
        """
        sets, params = self._fence_sets(
            state, state_version, state_revision, release or claim_next, lease_seconds
        )
        followers = [c.message_id for c in completions if not c.claimed]
        if claim_next:
            # Keep the lease only if a due message follows the group (the same condition the
            # claim below uses); otherwise this statement also releases it.
            keep = (
                f"EXISTS (SELECT 1 FROM (SELECT k.available_at FROM {self.t_ready} k "
                "WHERE k.instance_id = %s AND k.message_id <> ALL(%s) ORDER BY k.sequence "
                "LIMIT 1) AS kk WHERE kk.available_at <= now())"
            )
            sets = sets.replace(
                "activation_owner_id = NULL, activation_token = NULL, activation_expires_at = NULL",
                f"activation_owner_id = CASE WHEN {keep} THEN activation_owner_id END, "
                f"activation_token = CASE WHEN {keep} THEN activation_token END, "
                f"activation_expires_at = CASE WHEN {keep} THEN now() + %s * "
                "interval '1 microsecond' END",
            )
            keep_params = [lease.instance_id, followers]
            params = [
                *params,
                *keep_params,
                *keep_params,
                *keep_params,
                int(lease_seconds * 1_000_000),
            ]
        rows = ", ".join(["(%s::bigint, %s::text, %s::text, %s::int)"] * len(completions))
        values: list[Any] = []
        for completion in completions:
            values.extend(
                [
                    completion.message_id,
                    completion.result,
                    completion.rejection,
                    0 if completion.claimed else 1,
                ]
            )
        fence = (
            f"f AS (UPDATE {self.t_instances} SET {sets} WHERE id = %s "
            "AND activation_owner_id = %s AND activation_token = %s "
            "AND activation_generation = %s AND activation_expires_at > now() "
            f"AND EXISTS (SELECT 1 FROM {self.t_claimed} WHERE instance_id = %s "
            "AND message_id = %s AND activation_token = %s) RETURNING id), "
            f"d AS (UPDATE {self.t_messages} m SET result = v.result::jsonb, "
            "rejection = v.rejection::jsonb, "
            "rejected_at = CASE WHEN v.rejection IS NULL THEN m.rejected_at ELSE now() END, "
            "attempt_count = m.attempt_count + v.bump, "
            "started_at = COALESCE(m.started_at, now()), completed_at = now(), "
            f"updated_at = now() FROM (VALUES {rows}) AS v(id, result, rejection, bump), f "
            "WHERE m.id = v.id RETURNING m.id), "
            f"r AS (DELETE FROM {self.t_ready} r USING f WHERE r.message_id = ANY(%s) "
            "RETURNING r.message_id)"
        )
        fence_params = [
            *params,
            lease.instance_id,
            lease.owner_id,
            lease.token,
            lease.generation,
            lease.instance_id,
            claimed_message_id,
            lease.token,
            *values,
            followers,
        ]
        joined_sql, joined_column = "", "NULL"
        joined_params: list[Any] = []
        if joined is not None:
            statement, joined_params = joined.statement("f")
            joined_sql, joined_column = f", j AS ({statement})", "ARRAY(SELECT position FROM j)"
        if not claim_next:
            left_sql, left_params = "FALSE", []
            if hand_off:
                # Due work left after the group (the statement's snapshot still shows the
                # followers' ready rows: they are excluded by id).
                due = (
                    f"FROM {self.t_ready} k, f WHERE k.instance_id = f.id "
                    "AND k.message_id <> ALL(%s) AND k.available_at <= now() LIMIT 1"
                )
                if notify:
                    left_sql = (
                        "(SELECT COUNT(*) FROM (SELECT pg_notify(%s, 'work'), "
                        f"pg_notify(%s, 'result') {due}) AS hint) < 0"
                    )
                    left_params = [NOTIFY_CHANNEL, NOTIFY_CHANNEL, followers]
                else:
                    left_sql, left_params = f"EXISTS (SELECT 1 {due})", [followers]
            cursor.execute(
                f"WITH {fence}{joined_sql}, u AS (DELETE FROM {self.t_claimed} c USING f "
                "WHERE c.instance_id = f.id AND c.message_id = %s RETURNING c.message_id) "
                "SELECT (SELECT COUNT(*) FROM f), (SELECT COUNT(*) FROM u), "
                f"(SELECT COUNT(*) FROM d), (SELECT COUNT(*) FROM r), {left_sql}, "
                f"{joined_column}",
                [*fence_params, *joined_params, claimed_message_id, *left_params],
            )
            fenced, unclaimed, _done, _dropped, left, positions = cursor.fetchone()
            if joined is not None and fenced == 1:
                joined.returned(positions or [])
            return bool(fenced == 1 and unclaimed == 1), None, bool(left)
        columns = ", ".join(f"n.{c.strip()}" for c in MESSAGE_COLUMNS.split(","))
        columns = columns.replace("n.arguments", "n.arguments::text")
        cursor.execute(
            f"WITH {fence}{joined_sql}, "
            f"head AS (SELECT h.id, h.message_id, h.available_at FROM {self.t_ready} h, f "
            "WHERE h.instance_id = f.id AND h.message_id <> ALL(%s) "
            "ORDER BY h.sequence LIMIT 1), "
            f"moved AS (DELETE FROM {self.t_ready} x USING head WHERE x.id = head.id "
            "AND head.available_at <= now() RETURNING x.message_id), "
            f"cu AS (UPDATE {self.t_claimed} c SET message_id = moved.message_id, "
            "claimed_at = now() FROM moved, f WHERE c.instance_id = f.id "
            "AND c.message_id = %s RETURNING c.message_id), "
            f"cd AS (DELETE FROM {self.t_claimed} c USING f WHERE c.instance_id = f.id "
            "AND c.message_id = %s AND NOT EXISTS (SELECT 1 FROM moved) "
            "RETURNING c.message_id), "
            f"nxt AS (UPDATE {self.t_messages} n SET attempt_count = n.attempt_count + 1, "
            "started_at = now(), updated_at = now() FROM moved "
            f"WHERE n.id = moved.message_id RETURNING {columns}) "
            "SELECT (SELECT COUNT(*) FROM f), "
            "(SELECT COUNT(*) FROM cu) + (SELECT COUNT(*) FROM cd), "
            f"(SELECT COUNT(*) FROM d), (SELECT COUNT(*) FROM r), {joined_column}, nxt.* "
            "FROM (SELECT 1) AS one LEFT JOIN nxt ON TRUE",
            [*fence_params, *joined_params, followers, claimed_message_id, claimed_message_id],
        )
        row = cursor.fetchone()
        fenced, unclaimed = row[0], row[1]
        if joined is not None and fenced == 1:
            joined.returned(row[4] or [])
        if not (fenced == 1 and unclaimed == 1):
            return False, None, False
        next_message = None if row[5] is None else self._message_from_row(row[5:])
        return True, next_message, False

    def state_unless_cached(
        self, alias: str, cached: dict[int, int] | None, instance_ids: Sequence[int]
    ) -> tuple[str, list[Any]]:
        sql, params = super().state_unless_cached(alias, cached, instance_ids)
        return sql.replace(
            f"{alias}.state END", f"{alias}.state::text END"
        ) if params else f"{alias}.state::text", params

    def _last_id(self, cursor: Any, table: str, column: str, value: Any) -> int:
        cursor.execute(f"SELECT id FROM {table} WHERE {column} = %s", [value])
        return int(cursor.fetchone()[0])

    def find_message_by_key(
        self, cursor: Any, actor_type: str, actor_id: str, idempotency_key: str
    ) -> tuple[Any, ...] | None:
        cursor.execute(
            "SELECT m.id, m.request_id, m.sequence, m.operation, m.arguments::text, "
            f"m.delivery_mode, m.instance_id FROM {self.t_messages} m JOIN {self.t_instances} i "
            "ON i.id = m.instance_id "
            "WHERE i.actor_type = %s AND i.actor_id = %s AND m.idempotency_key = %s",
            [actor_type, actor_id, idempotency_key],
        )
        return cursor.fetchone()
