"""The dialect: what one database can do and how it spells it, and every capability of the
mailbox protocol, declared with its signature.

A :class:`Dialect` holds

- **flags**: what the database can do (``single_statement_commit``, ``listen_notify``,
  ``update_from_returning``, ``write_lock_first``, ``lock_wait_before_begin``,
  ``append_in_one_statement``, ``lease_on_enqueue``, ``claim_moves_in_place``,
  ``claim_moves_with_results``, ``insert_returning``, ``commit_by_autocommit``) and its
  limits (``json_max_depth``, ``append_batch``);
- **fragments** the named statements are written with, filled in by
  :func:`solid_objects.db.sql.render`: the quoted tables (``{t_instances}``...), the
  database clock ``{now}``, the locking suffixes ``{for_update}`` and ``{skip_locked}``, the
  casts ``{json_cast}`` (after a JSON parameter) and ``{as_text}`` (a JSON column read as
  text), and ``{later:NAME}``, the database clock plus the interval parameter ``NAME``
  (its value from :meth:`Dialect.interval`);
- **capabilities**: one method per protocol statement (or group of statements), declared
  here; each vendor class (``postgresql.py``, ``mysql.py``, ``sqlite.py``) names the
  variant it runs, written in the module of its protocol step: ``mailbox.py``,
  ``leases.py``, ``claims.py``, ``batches.py``, ``fence.py``, ``processes.py``,
  ``instances.py``.

Every capability takes an open cursor of the caller's transaction; none opens or commits a
transaction itself (the runtime decides the transaction boundaries). Times come from the
database clock, never from Python, except on SQLite where the database is in-process and its
clock is this process's clock.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any

from ..conf import table
from ..payloads import MAX_DEPTH
from .rows import (
    Appended,
    AppendedAndLeased,
    BatchedTurn,
    Completion,
    JoinedWrite,
    LeaseRow,
    MailboxFullAt,
    MessageRow,
    NewMessage,
    StagedEffectRow,
)
from .work_filter import WorkFilter


def as_datetime(value: Any) -> datetime | None:
    """A column value as an aware UTC datetime (drivers return text, naive or aware)."""
    if value is None:
        return None
    if isinstance(value, str):
        value = datetime.fromisoformat(value)
    if not isinstance(value, datetime):
        raise TypeError(f"not a timestamp: {value!r}")
    if value.tzinfo is None:
        return value.replace(tzinfo=UTC)
    return value.astimezone(UTC)


#: The database clock, read (``{now}``: the dialect's clock).
DATABASE_NOW = "SELECT {now}"


class Later(str):
    """The fragment ``{later:NAME}``: the database clock plus the interval parameter
    ``%(NAME)s``. The text is a template with ``{name}`` where the parameter goes."""

    __slots__ = ()

    def __format__(self, name: str) -> str:
        return str.format(self, name=name)


class Dialect:
    """Flags, fragments and the declared capabilities; each vendor subclass overrides them."""

    vendor = "generic"

    # -- flags -------------------------------------------------------------------------------
    #: Whether :meth:`acquire_and_claim` and :meth:`commit_group` exist (one autocommit
    #: statement for a lease and its first claim, and for a group's whole fenced commit).
    single_statement_commit = False
    #: The database carries wake-up hints itself (``NOTIFY`` sent when a transaction commits).
    listen_notify = False
    #: One ``UPDATE ... FROM ... RETURNING`` claims rows and reads them joined to another table.
    update_from_returning = False
    #: A transaction must take the write lock with its first statement (a no-op ``UPDATE``),
    #: never by upgrading a read lock, which could fail at once instead of waiting.
    write_lock_first = False
    #: Bound lock waits before the transaction starts (its BEGIN may wait for a lock itself).
    lock_wait_before_begin = False
    #: The deepest nesting of arrays/objects a JSON column accepts (checked before writing).
    json_max_depth = MAX_DEPTH
    #: :meth:`append_messages` is one statement that also checks the mailbox limit (writing
    #: nothing when it refuses), so a single enqueue can run as one autocommit statement.
    append_in_one_statement = False
    #: A sync caller's enqueue takes the actor's lease in the same autocommit statement
    #: (:meth:`append_and_lease`, its lock wait bounded inside it), and the first claim of
    #: that lease is one more (:meth:`claim_held`).
    lease_on_enqueue = False
    #: A group's commit in a transaction moves the claimed row in place to the next turn
    #: and reads the next group's messages with it (:meth:`commit_and_claim_next`); a first
    #: claim reads them with its head (:meth:`claim_and_read_ahead`).
    claim_moves_in_place = False
    #: With :attr:`claim_moves_in_place`: one multiple-table ``UPDATE`` writes the group's
    #: results and moves the claimed row (``fence.COMPLETE_AND_MOVE_CLAIM_MYSQL``).
    claim_moves_with_results = False
    #: ``INSERT ... VALUES (...), (...) RETURNING`` returns the generated ids.
    insert_returning = False
    #: The most messages :meth:`append_messages` takes at once (its parameters must fit).
    append_batch = 500
    #: Turning autocommit back on commits the open transaction (MySQL/MariaDB), so the
    #: library's own short transactions end with that one round trip instead of Django's
    #: COMMIT followed by it (``db/transactions.py``).
    commit_by_autocommit = False

    # -- fragments -----------------------------------------------------------------------------
    #: The database clock.
    now = "CURRENT_TIMESTAMP"
    #: Placeholder of a positional JSON parameter (``%s`` plus the cast the column needs).
    json = "%s"
    #: The cast after a named JSON parameter (``%(state)s{json_cast}``).
    json_cast = ""
    #: The cast reading a JSON column as its text (``m.arguments{as_text}``).
    as_text = ""
    #: Row-locking suffix of a claim that skips rows others hold (empty where writers are
    #: serialised by the database lock).
    skip_locked = " FOR UPDATE SKIP LOCKED"
    #: Row-locking suffix of a read that waits for the row lock.
    for_update = " FOR UPDATE"
    #: ``{later:NAME}``: the database clock plus the interval parameter ``NAME``.
    later = Later("(CURRENT_TIMESTAMP + INTERVAL %({name})s MICROSECOND)")

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
        self.t_rate_limits = self.qn(table("rate_limits"))

    def qn(self, name: str) -> str:
        return str(self.connection.ops.quote_name(name))

    # -- time ----------------------------------------------------------------------------------
    def interval(self, seconds: float) -> Any:
        """The value of an interval parameter of ``{later:NAME}``."""
        return int(seconds * 1_000_000)

    #: ``now + seconds`` with one positional parameter (:meth:`now_plus`).
    now_plus_positional = "(CURRENT_TIMESTAMP + INTERVAL %s MICROSECOND)"

    def now_plus(self, seconds: float) -> tuple[str, list[Any]]:
        """SQL and its one positional parameter for ``now + seconds`` on the database clock,
        for the maintenance statements (``retention.py``), which keep their own SQL with
        positional parameters; the statements of ``db/`` use ``{later:NAME}``."""
        return self.now_plus_positional, [self.interval(seconds)]

    def epoch(self, column: str) -> str:
        """Seconds since 1970 (UTC) of the datetime ``column``, as SQL."""
        raise NotImplementedError

    def adapt_datetime(self, value: datetime) -> Any:
        return self.ops.adapt_datetimefield_value(value)

    def database_now(self, cursor: Any) -> datetime:
        """The database clock, read."""
        cursor.execute(DATABASE_NOW.format(now=self.now), [])
        value = as_datetime(cursor.fetchone()[0])
        assert value is not None
        return value

    # -- statement timeouts for deadline-bound sync calls -------------------------------------
    def bound_lock_wait(self, cursor: Any, seconds: float) -> Any:
        """Bound lock waits of the current transaction; return a token for :meth:`unbound`."""
        return None

    def unbound(self, cursor: Any, token: Any) -> None:
        """Undo :meth:`bound_lock_wait` (``token`` is what it returned)."""
        return None

    # -- enqueue (db/mailbox.py) ---------------------------------------------------------------
    def allocate_sequence(
        self, cursor: Any, actor_type: str, actor_id: str, state_version: int
    ) -> tuple[int, int, int]:
        """Lock (creating if needed) the instance row and take the next sequence.

        Returns ``(instance_id, sequence, state_revision)``. The row stays locked until the
        surrounding transaction ends, which serialises sequence allocation per actor.
        """
        raise NotImplementedError

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
        raise NotImplementedError

    def mailbox_length(self, cursor: Any, instance_id: int) -> int:
        """Ready and claimed messages of the instance (for ``MAX_MAILBOX_LENGTH``)."""
        raise NotImplementedError

    def find_message_by_key(
        self, cursor: Any, actor_type: str, actor_id: str, idempotency_key: str
    ) -> tuple[Any, ...] | None:
        """``(id, request_id, sequence, operation, arguments, delivery_mode, instance_id)``
        of the message enqueued under ``idempotency_key``, or ``None``."""
        raise NotImplementedError

    def find_message_by_request_id(
        self, cursor: Any, request_id: str
    ) -> tuple[int, int, int] | None:
        """``(id, sequence, instance_id)`` of the message with this request id, or ``None``."""
        raise NotImplementedError

    def find_messages_by_keys(
        self, cursor: Any, keys: list[tuple[str, str, str]]
    ) -> dict[tuple[str, str, str], tuple[Any, ...]]:
        """What :meth:`find_message_by_key` returns, for many ``(actor_type, actor_id,
        idempotency_key)`` at once (the keys never used are absent)."""
        raise NotImplementedError

    def allocate_sequences(
        self, cursor: Any, actors: dict[tuple[str, str], list[int]]
    ) -> dict[tuple[str, str], tuple[int, int, int]]:
        """For ``{(actor_type, actor_id): [state_version, count]}``, create or lock each
        instance row and take its next ``count`` sequences; return ``{actor: (instance_id,
        next_message_sequence, state_revision)}`` as they are afterwards."""
        raise NotImplementedError

    def append_message(self, cursor: Any, message: NewMessage, cap: int) -> Appended:
        """:meth:`append_messages` for one message (an enqueue), in the fewest statements."""
        raise NotImplementedError

    def append_and_lease(
        self,
        cursor: Any,
        message: NewMessage,
        cap: int,
        *,
        lock_wait: float | None,
        owner_id: str,
        token: str,
        lease_seconds: float,
        cached: tuple[int, int] | None = None,
    ) -> AppendedAndLeased | MailboxFullAt:
        """Where :attr:`lease_on_enqueue`: :meth:`append_message` in ONE autocommit
        statement that also takes the actor's lease for ``owner_id`` under ``token`` when it
        is free (decided under the instance row lock the append takes), waiting at most
        ``lock_wait`` seconds for that lock (``None``: no bound), and claims the message
        when it is the actor's next turn. ``cached``: ``(instance id, state revision)``
        this process keeps warm (its state is then not sent)."""
        raise NotImplementedError

    def append_messages(self, cursor: Any, messages: list[NewMessage], cap: int) -> Appended:
        """Append ``messages`` (at most :attr:`append_batch`), each actor's in their order,
        with their ready memberships, unless an actor's mailbox would then hold more than
        ``cap`` messages: see :data:`~solid_objects.db.mailbox.Appended`."""
        raise NotImplementedError

    # -- finding work and leasing an actor (db/leases.py) -------------------------------------
    def due_instances(
        self, cursor: Any, limit: int, work: WorkFilter | None = None
    ) -> dict[int, int]:
        """Instances whose head (lowest-sequence ready message) is due, oldest work first,
        among those ``work`` takes (a non-locking scan of ``limit`` due messages), each
        with how many of its due messages the scan saw."""
        raise NotImplementedError

    def others_due(self, cursor: Any, instance_id: int, work: WorkFilter | None = None) -> bool:
        """Whether an actor other than ``instance_id`` could run now (its head is due), among
        those ``work`` takes."""
        raise NotImplementedError

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
        """Lock the first free candidate (skipping locked ones unless ``wait``) and take its
        lease: owner, ``token``, ``generation + 1``, expiry on the database clock.

        ``cached`` maps instance ids to the state revision this process still holds in
        memory; for those the state column is not transferred when it has not changed.
        """
        raise NotImplementedError

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
        due turn in ONE autocommit statement.

        Returns the lease, the claimed message (``None`` when the head is not due, or when a
        dead activation left a claimed row: the caller then recovers it in a transaction)
        and whether another due message follows (so a group knows whether to read ahead).
        """
        raise NotImplementedError

    def commit_and_claim_next(
        self,
        cursor: Any,
        lease: LeaseRow,
        *,
        claimed_message_id: int,
        state: str | None,
        state_version: int,
        state_revision: int,
        lease_seconds: float,
        completions: Sequence[Completion],
        read_ahead: int,
    ) -> tuple[bool, MessageRow | None, list[MessageRow]]:
        """Where :attr:`claim_moves_in_place`: inside the caller's transaction, the fenced
        commit of a group that staged nothing, its lease renewed, and the claim of the next
        due turn (the claimed row moved in place, or deleted when none is due). Returns
        ``(fenced, the next claimed message, up to read_ahead due messages after it)``."""
        raise NotImplementedError

    def claim_held(
        self,
        cursor: Any,
        instance_id: int,
        *,
        owner_id: str,
        token: str,
        cached: dict[int, int] | None = None,
    ) -> tuple[LeaseRow, MessageRow | None, bool] | None:
        """Where :attr:`lease_on_enqueue`: :meth:`acquire_and_claim` for a lease an earlier
        statement took (:meth:`append_and_lease`), named by its owner and token: lock the
        instance row while the lease is still ours and unexpired and claim its first due
        turn (``None``: the lease is not ours)."""
        raise NotImplementedError

    def claim_batch(
        self,
        cursor: Any,
        instance_ids: Sequence[int],
        *,
        limit: int,
        owner_id: str,
        token: str,
        lease_seconds: float,
        cached: dict[int, int] | None = None,
        apart: Sequence[str] = (),
    ) -> list[tuple[LeaseRow, MessageRow | None]]:
        """Lease up to ``limit`` free candidates (in order, skipping locked ones, and
        leaving out those of the actor types ``apart``) under one ``token``, and claim the
        due head of each: one pair per lease taken, its message ``None`` when a dead
        activation left a claimed row or the head is not due (the caller finishes those one
        by one). PostgreSQL: one autocommit statement."""
        raise NotImplementedError

    def commit_batch(
        self, cursor: Any, turns: Sequence[BatchedTurn], *, owner_id: str, token: str
    ) -> set[int]:
        """The fenced commit of one turn per actor for several actors, releasing their
        leases: each instance's fence is checked on its own; only the fenced ones are
        written, and their ids returned. PostgreSQL: one autocommit statement."""
        raise NotImplementedError

    def hold_lease(self, cursor: Any, lease: LeaseRow) -> bool:
        """Lock the instance row if ``lease`` is still ours and unexpired (``False``: lost).

        A transaction that changes the claimed or ready rows of an instance after its lease
        committed separately starts with this, so it runs under the same row lock as
        cleanup and the fenced commit, and every later statement reads what they committed.
        """
        raise NotImplementedError

    def renew(self, cursor: Any, lease: LeaseRow, lease_seconds: float) -> bool:
        """Push the lease's expiry out (``False``: it was lost or had expired)."""
        raise NotImplementedError

    def release(self, cursor: Any, lease: LeaseRow) -> bool:
        """Give the lease up (end of a pass, graceful stop). ``False`` if it was not ours."""
        raise NotImplementedError

    def has_due(self, cursor: Any, instance_id: int) -> bool:
        """Whether the actor has a due ready message (its head, since order is strict)."""
        raise NotImplementedError

    def load_state(self, cursor: Any, instance_id: int) -> Any:
        """The stored state column of an instance (JSON text, or decoded by the driver)."""
        raise NotImplementedError

    # -- claiming turns (db/claims.py) ---------------------------------------------------------
    def claim_and_read_ahead(
        self, cursor: Any, lease: LeaseRow, read_ahead: int
    ) -> tuple[MessageRow | None, list[MessageRow]]:
        """Where :attr:`claim_moves_in_place`: :meth:`claim_next`, with up to
        ``read_ahead`` due messages after the claimed one read by the same statement (the
        first group's read-ahead)."""
        raise NotImplementedError

    def claim_next(self, cursor: Any, lease: LeaseRow) -> MessageRow | None:
        """Move the actor's lowest-sequence ready message to claimed and count its attempt,
        if it is due."""
        raise NotImplementedError

    def prefetch(
        self, cursor: Any, instance_id: int, after_sequence: int, limit: int
    ) -> list[MessageRow]:
        """The next due ready messages after ``after_sequence``, in order, without moving
        them (they run in the group of the claimed turn and commit with it)."""
        raise NotImplementedError

    def stale_claim(self, cursor: Any, instance_id: int) -> tuple[int, int, int] | None:
        """The claimed row a previous activation left: ``(message_id, attempts, max)``."""
        raise NotImplementedError

    def own_claim(self, cursor: Any, instance_id: int, token: str) -> MessageRow | None:
        """The message claimed under ``token`` (by a statement of this activation whose
        reply was lost), if any."""
        raise NotImplementedError

    def unclaim_to_ready(
        self, cursor: Any, instance_id: int, message_id: int, delay_seconds: float = 0.0
    ) -> None:
        """Move a claimed message back to ready (crash recovery, retry, graceful release)."""
        raise NotImplementedError

    def set_attempts(self, cursor: Any, message_id: int, attempts: int) -> None:
        """Set the attempt count of a message (a claim of an exhausted message is undone)."""
        raise NotImplementedError

    def uncount_attempt(self, cursor: Any, message_id: int) -> None:
        """Take back the attempt the claim counted (the activation was refused)."""
        raise NotImplementedError

    # -- the fenced commit (db/fence.py) -------------------------------------------------------
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
        raise NotImplementedError

    def complete(self, cursor: Any, completions: Sequence[Completion]) -> None:
        """Write results/rejections and completion times of a committed group of turns."""
        raise NotImplementedError

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
        raise NotImplementedError

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
        """Record the final failure and move the message out of the mailbox for good;
        returns the dead letter's id."""
        raise NotImplementedError

    def yield_head(self, cursor: Any, instance_id: int) -> None:
        """Fairness: send the actor's ready head to the back of the poll order."""
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
        result_hint: str = "result",
        waited_hint: str | None = None,
    ) -> tuple[bool, MessageRow | None, bool]:
        """Where :attr:`single_statement_commit`: the whole fenced commit of a group, and the
        claim of the next turn, in ONE autocommit statement. Returns ``(fenced, the next
        claimed message, due work left without a hint sent)``; a hand-off hint carries
        ``result_hint`` as its result payload; ``waited_hint``, if given, is the payload of
        the ``result`` hint the statement sends when its fence holds."""
        raise NotImplementedError

    def insert_effects(
        self,
        cursor: Any,
        *,
        instance_id: int,
        message_id: int,
        effects: Sequence[StagedEffectRow],
        max_attempts: int | Callable[[str], int],
    ) -> None:
        """One ``pending`` outbox row per staged effect (one multi-row ``INSERT``);
        ``max_attempts`` is a number, or the attempts of an effect given its name."""
        raise NotImplementedError

    def cancel_reminder(self, cursor: Any, instance_id: int, name: str) -> None:
        """Delete the named reminder of an instance (if any)."""
        raise NotImplementedError

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
        cron: str | None = None,
        time_zone: str | None = None,
    ) -> bool:
        """Schedule the named reminder (at ``at``, else ``delay`` seconds from now);
        ``True`` when an existing one was moved."""
        raise NotImplementedError

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
        raise NotImplementedError

    # -- the process registry and dead-process cleanup (db/processes.py) ----------------------
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
        raise NotImplementedError

    def heartbeat_process(self, cursor: Any, process_id: str, state: str | None) -> bool:
        """Refresh the heartbeat (and set ``shutdown_state`` to ``state``, noting when a
        drain was requested); ``False`` if the row is gone or stopped."""
        raise NotImplementedError

    def heartbeat_processes(self, cursor: Any, process_ids: Sequence[str]) -> set[str]:
        """Refresh the heartbeat of every row in one statement; return the ids still
        running (a second statement only when some row was found stopped)."""
        raise NotImplementedError

    def mark_process_stopped(
        self, cursor: Any, process_id: str, silent_for: float | None = None
    ) -> bool:
        """Mark the process stopped (``silent_for``: only if its last heartbeat is at least
        that many seconds old); ``True`` if this statement did it."""
        raise NotImplementedError

    def silent_processes(self, cursor: Any, silent_for: float) -> list[str]:
        """Processes not stopped whose last heartbeat is more than ``silent_for`` s old."""
        raise NotImplementedError

    def claims_without_lease(self, cursor: Any, work: WorkFilter | None = None) -> list[int]:
        """Instances whose claimed turn belongs to no live lease (expired, released or
        taken over), at most 100, among those ``work`` takes."""
        raise NotImplementedError

    def instances_held_by(self, cursor: Any, process_ids: Sequence[str]) -> list[int]:
        """Instances the processes lease or hold a claimed turn on (a plain read: each is
        then released under its own row lock by :meth:`release_instance_held_by`)."""
        raise NotImplementedError

    def release_instance_held_by(
        self, cursor: Any, instance_id: int, process_ids: Sequence[str]
    ) -> int:
        """Give back what the processes hold on one instance; returns the turns requeued."""
        raise NotImplementedError

    def release_outbox_claims(self, cursor: Any, process_ids: Sequence[str]) -> None:
        """Effects and broadcasts in flight go back to pending; reminder claims are cleared."""
        raise NotImplementedError

    # -- an instance and a message seen from a reference (db/instances.py) --------------------
    def committed_state(
        self, cursor: Any, actor_type: str, actor_id: str
    ) -> tuple[int, Any, int, int] | None:
        """``(instance_id, state, state_version, state_revision)`` as committed, or ``None``
        (a plain read: no lock, may race an in-flight turn)."""
        raise NotImplementedError

    def destroy_instance(self, cursor: Any, actor_type: str, actor_id: str) -> bool:
        """Lock the instance row and delete it (the database cascades everything it owns);
        ``False`` when there is none."""
        raise NotImplementedError

    def message_outcome(self, cursor: Any, message_id: int) -> tuple[Any, ...] | None:
        """``(completed_at, rejected_at, result, rejection, error, in_ready, in_claimed,
        dead, attempt_count, sequence, instance_id)`` of a message, or ``None``."""
        raise NotImplementedError
