"""The mailbox protocol as named SQL statements, one method per statement (or group).

:class:`Dialect` holds the portable form, written for MySQL/MariaDB and SQLite; the
PostgreSQL dialect folds several statements into one with data-modifying CTEs and
``RETURNING``. Every method takes an open cursor of the caller's transaction; none opens or
commits a transaction itself (the runtime decides the transaction boundaries). Times come
from the database clock (:attr:`Dialect.now`), never from Python, except on SQLite where the
database is in-process and its clock is this process's clock.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any

from ..conf import table
from ..payloads import MAX_DEPTH
from .rows import MESSAGE_COLUMNS, Completion, JoinedWrite, LeaseRow, MessageRow
from .work_filter import WorkFilter


def as_datetime(value: Any) -> datetime | None:
    """A column value as an aware UTC datetime (drivers return text, naive or aware)."""
    if value is None:
        return None
    if isinstance(value, str):
        value = datetime.fromisoformat(value)
    if value.tzinfo is None:
        return value.replace(tzinfo=UTC)
    return value.astimezone(UTC)


class Dialect:
    """Portable statements (MySQL/MariaDB flavour); subclasses specialise per vendor."""

    vendor = "generic"
    #: SQL for "now" on the database clock.
    now = "CURRENT_TIMESTAMP"
    #: Placeholder for a JSON parameter.
    json = "%s"
    #: Row-locking suffix used when claiming (empty where writers are serialised).
    skip_locked = " FOR UPDATE SKIP LOCKED"
    #: Whether :meth:`commit_group` exists (one autocommit statement per group).
    single_statement_commit = False
    for_update = " FOR UPDATE"
    #: The deepest nesting of arrays/objects a JSON column accepts (checked before writing).
    json_max_depth = MAX_DEPTH
    #: The database carries wake-up hints itself (``NOTIFY`` sent when a transaction commits).
    listen_notify = False
    #: One ``UPDATE ... FROM ... RETURNING`` claims rows and reads them joined to another table.
    update_from_returning = False
    #: A transaction must take the write lock with its first statement (a no-op ``UPDATE``),
    #: never by upgrading a read lock, which could fail at once instead of waiting.
    write_lock_first = False

    def json_text(self, column: str) -> str:
        """``column`` (a JSON column) read as its text."""
        return column

    def __init__(self, connection: Any) -> None:
        self.connection = connection
        self.ops = connection.ops
        self.t_instances = self.qn(table("instances"))
        self.t_messages = self.qn(table("messages"))
        self.t_ready = self.qn(table("ready_messages"))
        self.t_claimed = self.qn(table("claimed_messages"))
        self.t_dead = self.qn(table("dead_letters"))
        self.t_processes = self.qn(table("processes"))
        self.t_effects = self.qn(table("effects"))
        self.t_broadcasts = self.qn(table("broadcasts"))
        self.t_reminders = self.qn(table("reminders"))

    def qn(self, name: str) -> str:
        return self.connection.ops.quote_name(name)

    # -- time ------------------------------------------------------------------------------
    def now_plus(self, seconds: float) -> tuple[str, list[Any]]:
        """SQL and parameters for ``now + seconds`` on the database clock."""
        return f"({self.now} + INTERVAL %s MICROSECOND)", [int(seconds * 1_000_000)]

    def adapt_datetime(self, value: datetime) -> Any:
        return self.ops.adapt_datetimefield_value(value)

    def database_now(self, cursor: Any) -> datetime:
        cursor.execute(f"SELECT {self.now}", [])
        value = as_datetime(cursor.fetchone()[0])
        assert value is not None
        return value

    # -- statement timeouts for deadline-bound sync calls -----------------------------------
    #: Bound lock waits before the transaction starts (its BEGIN may wait for a lock itself).
    lock_wait_before_begin = False

    def bound_lock_wait(self, cursor: Any, seconds: float) -> Any:
        """Bound lock waits of the current transaction; return a token for :meth:`unbound`."""
        return None

    def unbound(self, cursor: Any, token: Any) -> None:
        return None

    # -- enqueue ---------------------------------------------------------------------------
    def allocate_sequence(
        self, cursor: Any, actor_type: str, actor_id: str, state_version: int
    ) -> tuple[int, int, int]:
        """Lock (creating if needed) the instance row and take the next sequence.

        Returns ``(instance_id, sequence, state_revision)``. The row stays locked until the
        surrounding transaction ends, which serialises sequence allocation per actor.
        """
        n = self.now
        cursor.execute(
            f"INSERT INTO {self.t_instances} (actor_type, actor_id, state, state_version, "
            "next_message_sequence, activation_generation, state_revision, created_at, "
            f"updated_at) VALUES (%s, %s, '{{}}', %s, 2, 0, 0, {n}, {n}) "
            "ON DUPLICATE KEY UPDATE next_message_sequence = next_message_sequence + 1, "
            "id = LAST_INSERT_ID(id)",
            [actor_type, actor_id, state_version],
        )
        instance_id = cursor.lastrowid
        cursor.execute(
            f"SELECT next_message_sequence - 1, state_revision FROM {self.t_instances} "
            "WHERE id = %s",
            [instance_id],
        )
        sequence, revision = cursor.fetchone()
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
        """Insert the history row and its ready membership; return the message id."""
        n = self.now
        if available_at is None:
            at_sql, at_params = n, []
        else:
            at_sql, at_params = "%s", [self.adapt_datetime(available_at)]
        cursor.execute(
            f"INSERT INTO {self.t_messages} (instance_id, actor_type, actor_id, operation, "
            "delivery_mode, arguments, sequence, attempt_count, max_attempts, request_id, "
            "idempotency_key, enqueued_at, available_at, created_at, updated_at) VALUES "
            f"(%s, %s, %s, %s, %s, {self.json}, %s, 0, %s, %s, %s, {n}, {at_sql}, {n}, {n})",
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
            ],
        )
        message_id = int(cursor.lastrowid)
        cursor.execute(
            f"INSERT INTO {self.t_ready} (message_id, instance_id, sequence, available_at, "
            f"created_at) VALUES (%s, %s, %s, {at_sql}, {n})",
            [message_id, instance_id, sequence, *at_params],
        )
        return message_id

    def mailbox_length(self, cursor: Any, instance_id: int) -> int:
        cursor.execute(
            f"SELECT (SELECT COUNT(*) FROM {self.t_ready} WHERE instance_id = %s) + "
            f"(SELECT COUNT(*) FROM {self.t_claimed} WHERE instance_id = %s)",
            [instance_id, instance_id],
        )
        return int(cursor.fetchone()[0])

    def find_message_by_key(
        self, cursor: Any, actor_type: str, actor_id: str, idempotency_key: str
    ) -> tuple[Any, ...] | None:
        """``(id, request_id, sequence, operation, arguments, delivery_mode)`` or ``None``."""
        cursor.execute(
            "SELECT m.id, m.request_id, m.sequence, m.operation, m.arguments, m.delivery_mode, "
            f"m.instance_id FROM {self.t_messages} m "
            f"JOIN {self.t_instances} i ON i.id = m.instance_id "
            "WHERE i.actor_type = %s AND i.actor_id = %s AND m.idempotency_key = %s",
            [actor_type, actor_id, idempotency_key],
        )
        return cursor.fetchone()

    # -- claiming an activation ------------------------------------------------------------
    def due_instances(self, cursor: Any, limit: int, work: WorkFilter | None = None) -> list[int]:
        """Instances with a due ready message, oldest first (a non-locking scan).

        Turns run strictly in order, so an actor can run only when its lowest-sequence ready
        message (its head) is due. Due messages behind a head that is not (a retry backing
        off, a message scheduled for later) are left out: otherwise actors waiting for a
        retry would fill the candidate window on every poll, cost a lease and a release each
        time, and starve actors that do have work. The head is one probe of the
        ``(instance_id, sequence)`` index.

        ``work`` limits the scan to the actors a dedicated worker takes (a join with the
        instance row; the same one statement).
        """
        n = self.now
        join, condition, params = self._work_join(work)
        cursor.execute(
            f"SELECT r.instance_id FROM {self.t_ready} r{join} WHERE r.available_at <= {n} "
            f"AND (SELECT h.available_at FROM {self.t_ready} h WHERE h.instance_id = "
            f"r.instance_id ORDER BY h.sequence LIMIT 1) <= {n}{condition} "
            "ORDER BY r.available_at, r.instance_id, r.sequence LIMIT %s",
            [*params, limit],
        )
        seen: dict[int, None] = {}
        for (instance_id,) in cursor.fetchall():
            seen.setdefault(int(instance_id), None)
        return list(seen)

    def others_due(self, cursor: Any, instance_id: int, work: WorkFilter | None = None) -> bool:
        """Whether an actor other than ``instance_id`` could run now (its head is due), among
        those ``work`` takes."""
        n = self.now
        join, condition, params = self._work_join(work)
        cursor.execute(
            f"SELECT 1 FROM {self.t_ready} r{join} WHERE r.instance_id <> %s "
            f"AND r.available_at <= {n} "
            f"AND (SELECT h.available_at FROM {self.t_ready} h WHERE h.instance_id = "
            f"r.instance_id ORDER BY h.sequence LIMIT 1) <= {n}{condition} LIMIT 1",
            [instance_id, *params],
        )
        return cursor.fetchone() is not None

    def _work_join(self, work: WorkFilter | None) -> tuple[str, str, list[str]]:
        """The join with the instance row and the condition ``work`` adds, or nothing."""
        if not work:
            return "", "", []
        condition, params = work.condition("i")
        return f" JOIN {self.t_instances} i ON i.id = r.instance_id", f" AND {condition}", params

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
        """Lock one free candidate instance (skipping locked ones) and take its lease.

        ``cached`` maps instance ids to the state revision this process still holds in
        memory; for those the state column is not transferred when it has not changed.
        """
        if not instance_ids:
            return None
        free = (
            "paused_at IS NULL AND (activation_token IS NULL OR "
            f"activation_expires_at <= {self.now})"
        )
        suffix = self.for_update if wait else self.skip_locked
        candidates = list(instance_ids)
        if len(candidates) > 1:
            # Candidates come oldest work first; the lease must go to the first free one, or
            # the lowest instance id would win every time and a hot actor would starve the
            # others despite yielding. InnoDB locks every row a sorted locking read examines,
            # so find the free ones with a plain read, then lock the first in order.
            placeholders = ", ".join(["%s"] * len(candidates))
            cursor.execute(
                f"SELECT id FROM {self.t_instances} WHERE id IN ({placeholders}) AND {free}",
                candidates,
            )
            found = {int(row[0]) for row in cursor.fetchall()}
            candidates = [i for i in candidates if i in found]
        row = None
        for candidate in candidates[:4]:  # another worker may lock the first meanwhile
            cursor.execute(
                f"SELECT id FROM {self.t_instances} WHERE id = %s AND {free}{suffix}",
                [candidate],
            )
            row = cursor.fetchone()
            if row is not None:
                break
        if row is None and len(candidates) > 4:
            placeholders = ", ".join(["%s"] * (len(candidates) - 4))
            cursor.execute(
                f"SELECT id FROM {self.t_instances} WHERE id IN ({placeholders}) AND {free} "
                f"LIMIT 1{suffix}",
                candidates[4:],
            )
            row = cursor.fetchone()
        if row is None:
            return None
        instance_id = int(row[0])
        expires_sql, expires_params = self.now_plus(lease_seconds)
        n = self.now
        cursor.execute(
            f"UPDATE {self.t_instances} SET activation_owner_id = %s, activation_token = %s, "
            f"activation_expires_at = {expires_sql}, "
            "activation_generation = activation_generation + 1, "
            f"activated_at = {n}, last_claimed_at = {n}, updated_at = {n} WHERE id = %s",
            [owner_id, token, *expires_params, instance_id],
        )
        state_sql, state_params = self.state_unless_cached("i", cached, [instance_id])
        cursor.execute(
            f"SELECT id, actor_type, actor_id, {state_sql}, state_version, "
            "state_revision, activation_generation, "
            f"(SELECT COUNT(*) FROM {self.t_claimed} c WHERE c.instance_id = i.id) "
            f"FROM {self.t_instances} i WHERE id = %s",
            [*state_params, instance_id],
        )
        return self._lease_from_row(cursor.fetchone(), owner_id, token)

    @staticmethod
    def candidate_order(column: str, instance_ids: Sequence[int]) -> tuple[str, list[Any]]:
        """``ORDER BY`` keeping the candidates' order (oldest work first), or nothing."""
        if len(instance_ids) < 2:
            return "", []
        whens = " ".join("WHEN %s THEN %s" for _ in instance_ids)
        params: list[Any] = []
        for position, instance_id in enumerate(instance_ids):
            params.extend([instance_id, position])
        return f" ORDER BY CASE {column} {whens} END", params

    def state_unless_cached(
        self, alias: str, cached: dict[int, int] | None, instance_ids: Sequence[int]
    ) -> tuple[str, list[Any]]:
        """SQL for the state column, ``NULL`` where the cached revision is current."""
        state = f"{alias}.state"
        pairs = [(i, cached[i]) for i in instance_ids if cached and i in cached]
        if not pairs:
            return state, []
        whens = " ".join("WHEN %s THEN %s" for _ in pairs)
        params: list[Any] = [value for pair in pairs for value in pair]
        return (
            f"CASE WHEN {alias}.state_revision = CASE {alias}.id {whens} ELSE -1 END "
            f"THEN NULL ELSE {state} END",
            params,
        )

    @staticmethod
    def _lease_from_row(row: Sequence[Any], owner_id: str, token: str) -> LeaseRow:
        return LeaseRow(
            instance_id=int(row[0]),
            actor_type=row[1],
            actor_id=row[2],
            state=row[3],
            state_version=int(row[4]),
            state_revision=int(row[5]),
            generation=int(row[6]),
            token=token,
            owner_id=owner_id,
            has_stale_claim=bool(row[7]),
        )

    def stale_claim(self, cursor: Any, instance_id: int) -> tuple[int, int, int] | None:
        """The claimed row a previous activation left: ``(message_id, attempts, max)``."""
        cursor.execute(
            f"SELECT c.message_id, m.attempt_count, m.max_attempts FROM {self.t_claimed} c "
            f"JOIN {self.t_messages} m ON m.id = c.message_id WHERE c.instance_id = %s",
            [instance_id],
        )
        row = cursor.fetchone()
        return None if row is None else (int(row[0]), int(row[1]), int(row[2]))

    def unclaim_to_ready(
        self, cursor: Any, instance_id: int, message_id: int, delay_seconds: float = 0.0
    ) -> None:
        """Move a claimed message back to ready (crash recovery, retry, graceful release)."""
        at_sql, at_params = self.now_plus(delay_seconds)
        cursor.execute(
            f"INSERT INTO {self.t_ready} (message_id, instance_id, sequence, available_at, "
            f"created_at) SELECT id, instance_id, sequence, {at_sql}, {self.now} "
            f"FROM {self.t_messages} WHERE id = %s",
            [*at_params, message_id],
        )
        cursor.execute(
            f"DELETE FROM {self.t_claimed} WHERE instance_id = %s AND message_id = %s",
            [instance_id, message_id],
        )

    def hold_lease(self, cursor: Any, lease: LeaseRow) -> bool:
        """Lock the instance row if ``lease`` is still ours and unexpired (``False``: lost).

        A transaction that changes the claimed or ready rows of an instance after its lease
        committed separately (PostgreSQL's recovery of a stale claim) starts with this, so
        it runs under the same row lock as cleanup and the fenced commit, and every later
        statement of it reads what they committed."""
        cursor.execute(
            f"SELECT id FROM {self.t_instances} WHERE id = %s AND activation_owner_id = %s "
            "AND activation_token = %s AND activation_generation = %s "
            f"AND activation_expires_at > {self.now}{self.for_update}",
            [lease.instance_id, lease.owner_id, lease.token, lease.generation],
        )
        return cursor.fetchone() is not None

    # -- dead-process cleanup and graceful release -----------------------------------------
    def instances_held_by(self, cursor: Any, process_ids: Sequence[str]) -> list[int]:
        """Instances the processes lease or hold a claimed turn on (a plain read: each is
        then released under its own row lock by :meth:`release_instance_held_by`)."""
        marks = ", ".join(["%s"] * len(process_ids))
        cursor.execute(
            f"SELECT id FROM {self.t_instances} WHERE activation_owner_id IN ({marks}) "
            f"UNION SELECT instance_id FROM {self.t_claimed} WHERE process_id IN ({marks})",
            [*process_ids, *process_ids],
        )
        return sorted({int(row[0]) for row in cursor.fetchall()})

    def release_instance_held_by(
        self, cursor: Any, instance_id: int, process_ids: Sequence[str]
    ) -> int:
        """Give back what the processes hold on one instance; returns the turns requeued.

        The instance row lock comes first: stale-claim recovery, the fenced commit and the
        claim of a turn all hold it, so they have either committed (and the reads below see
        their rows) or wait for us (and then find the lease gone). Only the claimed rows
        this transaction deletes go back to ready: a claim another activation already
        recovered, or a turn it claimed since, is never requeued."""
        n = self.now
        # A write takes the lock (and on SQLite starts the write transaction at once).
        cursor.execute(
            f"UPDATE {self.t_instances} SET updated_at = {n} WHERE id = %s", [instance_id]
        )
        if cursor.rowcount != 1:
            return 0  # destroyed meanwhile: its rows went with it
        marks = ", ".join(["%s"] * len(process_ids))
        cursor.execute(
            f"SELECT message_id FROM {self.t_claimed} WHERE instance_id = %s "
            f"AND process_id IN ({marks}){self.for_update}",
            [instance_id, *process_ids],
        )
        message_ids = [int(row[0]) for row in cursor.fetchall()]
        if message_ids:
            ids = ", ".join(["%s"] * len(message_ids))
            cursor.execute(
                f"DELETE FROM {self.t_claimed} WHERE instance_id = %s AND message_id IN ({ids})",
                [instance_id, *message_ids],
            )
            cursor.execute(
                f"INSERT INTO {self.t_ready} (message_id, instance_id, sequence, available_at, "
                f"created_at) SELECT id, instance_id, sequence, {n}, {n} FROM {self.t_messages} "
                f"WHERE id IN ({ids})",
                message_ids,
            )
        cursor.execute(
            f"UPDATE {self.t_instances} SET activation_owner_id = NULL, activation_token = NULL, "
            f"activation_expires_at = NULL, updated_at = {n} "
            f"WHERE id = %s AND activation_owner_id IN ({marks})",
            [instance_id, *process_ids],
        )
        return len(message_ids)

    def release_outbox_claims(self, cursor: Any, process_ids: Sequence[str]) -> None:
        """Effects and broadcasts in flight go back to pending; reminder claims are cleared."""
        marks = ", ".join(["%s"] * len(process_ids))
        n = self.now
        for outbox in (self.t_effects, self.t_broadcasts):
            cursor.execute(
                f"UPDATE {outbox} SET status = 'pending', claimed_by = NULL, claimed_at = NULL, "
                f"updated_at = {n} WHERE claimed_by IN ({marks}) AND status = 'processing'",
                process_ids,
            )
        cursor.execute(
            f"UPDATE {self.t_reminders} SET claimed_by = NULL, claimed_at = NULL "
            f"WHERE claimed_by IN ({marks})",
            process_ids,
        )

    # -- turns -----------------------------------------------------------------------------
    def claim_next(self, cursor: Any, lease: LeaseRow) -> MessageRow | None:
        """Move the actor's lowest-sequence ready message to claimed, if it is due."""
        cursor.execute(
            f"SELECT message_id, CASE WHEN available_at <= {self.now} THEN 1 ELSE 0 END "
            f"FROM {self.t_ready} WHERE instance_id = %s ORDER BY sequence LIMIT 1",
            [lease.instance_id],
        )
        row = cursor.fetchone()
        if row is None or not int(row[1]):
            return None
        message_id = int(row[0])
        n = self.now
        cursor.execute(f"DELETE FROM {self.t_ready} WHERE message_id = %s", [message_id])
        cursor.execute(
            f"INSERT INTO {self.t_claimed} (message_id, instance_id, process_id, "
            "activation_token, activation_generation, claimed_at) "
            f"VALUES (%s, %s, %s, %s, %s, {n})",
            [message_id, lease.instance_id, lease.owner_id, lease.token, lease.generation],
        )
        cursor.execute(
            f"UPDATE {self.t_messages} SET attempt_count = attempt_count + 1, "
            f"started_at = {n}, updated_at = {n} WHERE id = %s",
            [message_id],
        )
        cursor.execute(
            f"SELECT {MESSAGE_COLUMNS} FROM {self.t_messages} WHERE id = %s", [message_id]
        )
        return self._message_from_row(cursor.fetchone())

    def prefetch(
        self, cursor: Any, instance_id: int, after_sequence: int, limit: int
    ) -> list[MessageRow]:
        """The next due ready messages after ``after_sequence``, in order, without moving them.

        They are run in the same group as the claimed turn and committed with it.
        """
        if limit <= 0:
            return []
        columns = ", ".join(f"m.{c.strip()}" for c in MESSAGE_COLUMNS.split(","))
        cursor.execute(
            f"SELECT {columns}, r.available_at <= {self.now} FROM {self.t_ready} r "
            f"JOIN {self.t_messages} m ON m.id = r.message_id "
            "WHERE r.instance_id = %s AND r.sequence > %s ORDER BY r.sequence LIMIT %s",
            [instance_id, after_sequence, limit],
        )
        rows: list[MessageRow] = []
        for row in cursor.fetchall():
            if not row[-1]:
                break  # strict order: stop at the first message that is not due yet
            rows.append(self._message_from_row(row))
        return rows

    @staticmethod
    def _message_from_row(row: Sequence[Any]) -> MessageRow:
        return MessageRow(
            id=int(row[0]),
            sequence=int(row[1]),
            operation=row[2],
            arguments=row[3],
            delivery_mode=row[4],
            attempt_count=int(row[5]),
            max_attempts=int(row[6]),
            request_id=row[7],
            idempotency_key=row[8],
        )

    # -- the fenced commit -----------------------------------------------------------------
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
        """Where :attr:`single_statement_commit`: lease a free candidate and claim its first
        due turn in one autocommit statement (PostgreSQL)."""
        raise NotImplementedError

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
        """Where :attr:`single_statement_commit`: the whole fenced commit of a group and the
        claim of the next turn in one autocommit statement (PostgreSQL)."""
        raise NotImplementedError

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
        """Check the lease and write state; delete the claimed row. ``False`` = fenced out.

        One UPDATE checks owner, token, generation and the unexpired database-time lease
        while taking the row lock; the claimed row must still be ours.
        """
        sets, params = self._fence_sets(
            state, state_version, state_revision, release, lease_seconds
        )
        cursor.execute(
            f"UPDATE {self.t_instances} SET {sets} WHERE id = %s AND activation_owner_id = %s "
            "AND activation_token = %s AND activation_generation = %s "
            f"AND activation_expires_at > {self.now}",
            [*params, lease.instance_id, lease.owner_id, lease.token, lease.generation],
        )
        if cursor.rowcount != 1:
            return False
        if claimed_message_id is None:
            return True
        cursor.execute(
            f"DELETE FROM {self.t_claimed} WHERE instance_id = %s AND message_id = %s "
            "AND activation_token = %s",
            [lease.instance_id, claimed_message_id, lease.token],
        )
        return cursor.rowcount == 1

    def _fence_sets(
        self,
        state: str | None,
        state_version: int,
        state_revision: int,
        release: bool,
        lease_seconds: float,
    ) -> tuple[str, list[Any]]:
        n = self.now
        sets = [f"last_used_at = {n}", f"updated_at = {n}"]
        params: list[Any] = []
        if state is not None:
            sets.append(f"state = {self.json}")
            params.append(state)
            sets.append("state_version = %s")
            params.append(state_version)
            sets.append("state_revision = %s")
            params.append(state_revision)
        if release:
            sets.append(
                "activation_owner_id = NULL, activation_token = NULL, activation_expires_at = NULL"
            )
        else:
            expires_sql, expires_params = self.now_plus(lease_seconds)
            sets.append(f"activation_expires_at = {expires_sql}")
            params.extend(expires_params)
        return ", ".join(sets), params

    def complete(self, cursor: Any, completions: Sequence[Completion]) -> None:
        """Write results/rejections and completion times of a committed group of turns."""
        if not completions:
            return
        n = self.now
        ids = [c.message_id for c in completions]
        result_case, result_params = self._case(
            "result", [(c.message_id, c.result) for c in completions if c.result]
        )
        rejection_rows = [(c.message_id, c.rejection) for c in completions if c.rejection]
        rejection_case, rejection_params = self._case("rejection", rejection_rows)
        rejected_at = "rejected_at"
        if rejection_rows:
            marks = ", ".join(["%s"] * len(rejection_rows))
            rejected_at = f"CASE WHEN id IN ({marks}) THEN {n} ELSE rejected_at END"
        unclaimed = [c.message_id for c in completions if not c.claimed]
        attempts = "attempt_count"
        if unclaimed:
            marks = ", ".join(["%s"] * len(unclaimed))
            attempts = f"CASE WHEN id IN ({marks}) THEN attempt_count + 1 ELSE attempt_count END"
        placeholders = ", ".join(["%s"] * len(ids))
        cursor.execute(
            f"UPDATE {self.t_messages} SET result = {result_case}, rejection = {rejection_case}, "
            f"rejected_at = {rejected_at}, attempt_count = {attempts}, "
            f"started_at = COALESCE(started_at, {n}), completed_at = {n}, updated_at = {n} "
            f"WHERE id IN ({placeholders})",
            [*result_params, *rejection_params, *[m for m, _ in rejection_rows], *unclaimed, *ids],
        )
        if unclaimed:
            marks = ", ".join(["%s"] * len(unclaimed))
            cursor.execute(f"DELETE FROM {self.t_ready} WHERE message_id IN ({marks})", unclaimed)

    def _case(self, column: str, pairs: Sequence[tuple[int, str | None]]) -> tuple[str, list[Any]]:
        if not pairs:
            return column, []
        whens = " ".join(f"WHEN %s THEN {self.json}" for _ in pairs)
        params: list[Any] = []
        for message_id, value in pairs:
            params.extend([message_id, value])
        return f"CASE id {whens} ELSE {column} END", params

    def _store_error(self, cursor: Any, message_id: int, claimed: bool, error: str) -> None:
        """The error on the history row; the attempt of an unclaimed (grouped) turn counts."""
        n = self.now
        attempts = "attempt_count" if claimed else "attempt_count + 1"
        cursor.execute(
            f"UPDATE {self.t_messages} SET error = {self.json}, attempt_count = {attempts}, "
            f"last_failed_at = {n}, started_at = COALESCE(started_at, {n}), updated_at = {n} "
            "WHERE id = %s",
            [error, message_id],
        )

    def record_failure(
        self,
        cursor: Any,
        *,
        instance_id: int,
        message_id: int,
        claimed: bool,
        error: str,
        retry_seconds: float,
    ) -> None:
        """Store the error; the message becomes ready again after ``retry_seconds``."""
        self._store_error(cursor, message_id, claimed, error)
        if claimed:
            self.unclaim_to_ready(cursor, instance_id, message_id, retry_seconds)
        else:
            at_sql, at_params = self.now_plus(retry_seconds)
            cursor.execute(
                f"UPDATE {self.t_ready} SET available_at = {at_sql} WHERE message_id = %s",
                [*at_params, message_id],
            )

    def dead_letter(
        self,
        cursor: Any,
        *,
        instance_id: int,
        message_id: int,
        claimed: bool,
        error: str,
        exception_class: str,
        exception_message: str,
        backtrace: str,
    ) -> int:
        """Record the final failure and move the message out of the mailbox for good."""
        n = self.now
        self._store_error(cursor, message_id, claimed, error)
        cursor.execute(
            f"INSERT INTO {self.t_dead} (message_id, instance_id, actor_type, actor_id, "
            "operation, arguments, attempts, exception_class, exception_message, backtrace, "
            "first_failed_at, last_failed_at, created_at, updated_at) "
            "SELECT id, instance_id, actor_type, actor_id, operation, arguments, "
            "CASE WHEN attempt_count < 1 THEN 1 ELSE attempt_count END, "
            f"%s, %s, {self.json}, "
            f"COALESCE(started_at, {n}), {n}, {n}, {n} "
            f"FROM {self.t_messages} WHERE id = %s",
            [exception_class, exception_message, backtrace, message_id],
        )
        dead_id = self._last_id(cursor, self.t_dead, "message_id", message_id)
        table = self.t_claimed if claimed else self.t_ready
        cursor.execute(f"DELETE FROM {table} WHERE message_id = %s", [message_id])
        return dead_id

    def _last_id(self, cursor: Any, table: str, column: str, value: Any) -> int:
        return int(cursor.lastrowid)

    def release(self, cursor: Any, lease: LeaseRow) -> bool:
        """Give the lease up (end of a pass, graceful stop). ``False`` if it was not ours."""
        cursor.execute(
            f"UPDATE {self.t_instances} SET activation_owner_id = NULL, activation_token = NULL, "
            f"activation_expires_at = NULL, updated_at = {self.now} WHERE id = %s "
            "AND activation_token = %s AND activation_generation = %s",
            [lease.instance_id, lease.token, lease.generation],
        )
        return cursor.rowcount == 1

    def has_due(self, cursor: Any, instance_id: int) -> bool:
        """Whether the actor has a due ready message (its head, since order is strict)."""
        cursor.execute(
            f"SELECT 1 FROM {self.t_ready} WHERE instance_id = %s "
            f"AND available_at <= {self.now} LIMIT 1",
            [instance_id],
        )
        return cursor.fetchone() is not None

    def renew(self, cursor: Any, lease: LeaseRow, lease_seconds: float) -> bool:
        expires_sql, expires_params = self.now_plus(lease_seconds)
        cursor.execute(
            f"UPDATE {self.t_instances} SET activation_expires_at = {expires_sql} "
            "WHERE id = %s AND activation_token = %s AND activation_generation = %s "
            f"AND activation_expires_at > {self.now}",
            [*expires_params, lease.instance_id, lease.token, lease.generation],
        )
        return cursor.rowcount == 1

    def yield_head(self, cursor: Any, instance_id: int) -> None:
        """Fairness: send the actor's ready head to the back of the poll order."""
        cursor.execute(
            f"UPDATE {self.t_ready} SET available_at = {self.now} WHERE instance_id = %s "
            f"AND available_at < {self.now}",
            [instance_id],
        )

    def set_attempts(self, cursor: Any, message_id: int, attempts: int) -> None:
        """Set the attempt count of a message (a claim of an exhausted message is undone)."""
        cursor.execute(
            f"UPDATE {self.t_messages} SET attempt_count = %s WHERE id = %s",
            [attempts, message_id],
        )

    def uncount_attempt(self, cursor: Any, message_id: int) -> None:
        """Take back the attempt the claim counted (the activation was refused)."""
        cursor.execute(
            f"UPDATE {self.t_messages} SET attempt_count = attempt_count - 1 "
            "WHERE id = %s AND attempt_count > 0",
            [message_id],
        )

    def load_state(self, cursor: Any, instance_id: int) -> Any:
        """The stored state column of an instance (JSON text, or decoded by the driver)."""
        cursor.execute(f"SELECT state FROM {self.t_instances} WHERE id = %s", [instance_id])
        return cursor.fetchone()[0]

    # -- what a turn staged, written in its fenced commit -----------------------------------
    def insert_effects(
        self,
        cursor: Any,
        *,
        instance_id: int,
        message_id: int,
        effects: Sequence[Any],
        max_attempts: int | Callable[[str], int],
    ) -> None:
        """One ``pending`` outbox row per staged effect (one multi-row ``INSERT``);
        ``max_attempts`` is a number, or the attempts of an effect given its name."""
        n = self.now
        attempts_of = max_attempts if callable(max_attempts) else (lambda name: max_attempts)
        rows = []
        params: list[Any] = []
        for effect in effects:
            rows.append(f"(%s, %s, %s, %s, {self.json}, %s, %s, 'pending', 0, %s, {n}, {n}, {n})")
            params.extend(
                [
                    message_id,
                    instance_id,
                    effect.effect_id,
                    effect.name,
                    effect.arguments,
                    effect.success_operation,
                    effect.failure_operation,
                    attempts_of(effect.name),
                ]
            )
        cursor.execute(
            f"INSERT INTO {self.t_effects} (message_id, instance_id, effect_id, name, arguments, "
            "success_operation, failure_operation, status, attempt_count, max_attempts, "
            f"available_at, created_at, updated_at) VALUES {', '.join(rows)}",
            params,
        )

    def cancel_reminder(self, cursor: Any, instance_id: int, name: str) -> None:
        """Delete the named reminder of an instance (if any)."""
        cursor.execute(
            f"DELETE FROM {self.t_reminders} WHERE instance_id = %s AND name = %s",
            [instance_id, name],
        )

    def upsert_reminder(
        self,
        cursor: Any,
        lease: LeaseRow,
        *,
        name: str,
        operation: str,
        arguments: str,
        at: datetime | None,
        delay: float,
        interval: Any,
        missed_policy: str,
    ) -> bool:
        """Schedule the named reminder (at ``at``, else ``delay`` seconds from now);
        ``True`` when an existing one was moved."""
        if at is not None:
            at_sql, at_params = "%s", [self.adapt_datetime(at)]
        else:
            at_sql, at_params = self.now_plus(delay)
        interval = None if interval is None else self.ops.adapt_decimalfield_value(interval, 20, 6)
        n = self.now
        cursor.execute(
            f"UPDATE {self.t_reminders} SET operation = %s, arguments = {self.json}, "
            f"next_run_at = {at_sql}, interval_seconds = %s, missed_policy = %s, "
            f"status = 'scheduled', claimed_by = NULL, claimed_at = NULL, updated_at = {n} "
            "WHERE instance_id = %s AND name = %s",
            [operation, arguments, *at_params, interval, missed_policy, lease.instance_id, name],
        )
        if cursor.rowcount:
            return True
        cursor.execute(
            f"INSERT INTO {self.t_reminders} (instance_id, actor_type, actor_id, name, "
            "operation, arguments, next_run_at, interval_seconds, occurrence, missed_policy, "
            f"status, created_at, updated_at) VALUES (%s, %s, %s, %s, %s, {self.json}, "
            f"{at_sql}, %s, 0, %s, 'scheduled', {n}, {n})",
            [
                lease.instance_id,
                lease.actor_type,
                lease.actor_id,
                name,
                operation,
                arguments,
                *at_params,
                interval,
                missed_policy,
            ],
        )
        return False

    def insert_broadcasts(
        self,
        cursor: Any,
        lease: LeaseRow,
        *,
        message_id: int,
        state_version: int,
        rows: Sequence[tuple[str, str, str]],
    ) -> None:
        """One ``pending`` broadcast per ``(broadcast_id, observable_name, value)``."""
        if not rows:
            return
        n = self.now
        values = []
        params: list[Any] = []
        for broadcast_id, name, value in rows:
            values.append(f"(%s, %s, %s, %s, {self.json}, %s, %s, 'pending', 0, {n}, {n}, {n})")
            params.extend(
                [
                    message_id,
                    lease.instance_id,
                    broadcast_id,
                    name,
                    value,
                    state_version,
                    lease.generation,
                ]
            )
        cursor.execute(
            f"INSERT INTO {self.t_broadcasts} (message_id, instance_id, broadcast_id, "
            "observable_name, value, state_version, activation_generation, status, "
            f"attempt_count, available_at, created_at, updated_at) VALUES {', '.join(values)}",
            params,
        )

    # -- the process registry --------------------------------------------------------------
    def insert_process(
        self,
        cursor: Any,
        process_id: str,
        kind: str,
        hostname: str,
        pid: int,
        metadata_json: str,
    ) -> None:
        """Register a running process (its heartbeat starts now)."""
        n = self.now
        cursor.execute(
            f"INSERT INTO {self.t_processes} (id, kind, hostname, pid, started_at, "
            "last_heartbeat_at, metadata, shutdown_state, created_at, updated_at) VALUES "
            f"(%s, %s, %s, %s, {n}, {n}, {self.json}, 'running', {n}, {n})",
            [process_id, kind, hostname, pid, metadata_json],
        )

    def heartbeat_process(self, cursor: Any, process_id: str, state: str | None) -> bool:
        """Refresh the heartbeat (and set ``shutdown_state`` to ``state``, noting when a
        drain was requested); ``False`` if the row is gone or stopped."""
        n = self.now
        sets = f"last_heartbeat_at = {n}, updated_at = {n}"
        params: list[Any] = []
        if state is not None:
            sets += ", shutdown_state = %s"
            params.append(state)
            if state == "draining":
                sets += f", shutdown_requested_at = {n}"
        cursor.execute(
            f"UPDATE {self.t_processes} SET {sets} WHERE id = %s AND shutdown_state <> 'stopped'",
            [*params, process_id],
        )
        return bool(cursor.rowcount == 1)

    def heartbeat_processes(self, cursor: Any, process_ids: Sequence[str]) -> set[str]:
        """Refresh the heartbeat of every row in one statement; return the ids still
        running (a second statement only when some row was found stopped)."""
        n = self.now
        marks = ", ".join(["%s"] * len(process_ids))
        cursor.execute(
            f"UPDATE {self.t_processes} SET last_heartbeat_at = {n}, updated_at = {n} "
            f"WHERE id IN ({marks}) AND shutdown_state <> 'stopped'",
            list(process_ids),
        )
        if cursor.rowcount == len(process_ids):
            return set(process_ids)
        cursor.execute(
            f"SELECT id FROM {self.t_processes} WHERE id IN ({marks}) "
            "AND shutdown_state <> 'stopped'",
            list(process_ids),
        )
        return {row[0] for row in cursor.fetchall()}

    def mark_process_stopped(
        self, cursor: Any, process_id: str, silent_for: float | None = None
    ) -> bool:
        """Mark the process stopped (``silent_for``: only if its last heartbeat is at least
        that many seconds old); ``True`` if this statement did it."""
        stale_sql, params = "", []
        if silent_for is not None:
            limit_sql, params = self.now_plus(-silent_for)
            stale_sql = f" AND last_heartbeat_at < {limit_sql}"
        n = self.now
        cursor.execute(
            f"UPDATE {self.t_processes} SET shutdown_state = 'stopped', stopped_at = {n}, "
            f"updated_at = {n} WHERE id = %s AND shutdown_state <> 'stopped'{stale_sql}",
            [process_id, *params],
        )
        return bool(cursor.rowcount == 1)

    def silent_processes(self, cursor: Any, silent_for: float) -> list[str]:
        """Processes not stopped whose last heartbeat is more than ``silent_for`` s old."""
        limit_sql, params = self.now_plus(-silent_for)
        cursor.execute(
            f"SELECT id FROM {self.t_processes} WHERE shutdown_state <> 'stopped' "
            f"AND last_heartbeat_at < {limit_sql}",
            params,
        )
        return [row[0] for row in cursor.fetchall()]

    def claims_without_lease(self, cursor: Any, work: WorkFilter | None = None) -> list[int]:
        """Instances whose claimed turn belongs to no live lease (expired, released or
        taken over), at most 100, among those ``work`` takes."""
        condition, params = work.condition("i") if work else ("1 = 1", [])
        cursor.execute(
            f"SELECT c.instance_id FROM {self.t_claimed} c JOIN {self.t_instances} i "
            "ON i.id = c.instance_id WHERE (i.activation_token IS NULL "
            f"OR i.activation_expires_at <= {self.now} "
            f"OR i.activation_token <> c.activation_token) AND {condition} LIMIT 100",
            params,
        )
        return [int(row[0]) for row in cursor.fetchall()]

    # -- reading and destroying an instance from its reference ----------------------------
    def committed_state(
        self, cursor: Any, actor_type: str, actor_id: str
    ) -> tuple[int, Any, int, int] | None:
        """``(instance_id, state, state_version, state_revision)`` as committed, or ``None``
        (a plain read: no lock, may race an in-flight turn)."""
        cursor.execute(
            f"SELECT id, state, state_version, state_revision FROM {self.t_instances} "
            "WHERE actor_type = %s AND actor_id = %s",
            [actor_type, actor_id],
        )
        return cursor.fetchone()

    def destroy_instance(self, cursor: Any, actor_type: str, actor_id: str) -> bool:
        """Lock the instance row and delete it (the database cascades everything it owns);
        ``False`` when there is none. Runs inside the caller's transaction."""
        cursor.execute(
            f"SELECT id FROM {self.t_instances} WHERE actor_type = %s "
            f"AND actor_id = %s{self.for_update}",
            [actor_type, actor_id],
        )
        row = cursor.fetchone()
        if row is None:
            return False
        cursor.execute(f"DELETE FROM {self.t_instances} WHERE id = %s", [row[0]])
        return True

    # -- reading a message's outcome -------------------------------------------------------
    def message_outcome(self, cursor: Any, message_id: int) -> tuple[Any, ...] | None:
        """``(completed_at, rejected_at, result, rejection, error, in_ready, in_claimed,
        dead, attempt_count, sequence, instance_id, available_at_of_ready)``."""
        cursor.execute(
            "SELECT m.completed_at, m.rejected_at, m.result, m.rejection, m.error, "
            f"(SELECT COUNT(*) FROM {self.t_ready} r WHERE r.message_id = m.id), "
            f"(SELECT COUNT(*) FROM {self.t_claimed} c WHERE c.message_id = m.id), "
            f"(SELECT COUNT(*) FROM {self.t_dead} d WHERE d.message_id = m.id), "
            "m.attempt_count, m.sequence, m.instance_id "
            f"FROM {self.t_messages} m WHERE m.id = %s",
            [message_id],
        )
        return cursor.fetchone()
