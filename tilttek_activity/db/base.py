"""What every backend offers, with the SQL that is the same on every platform."""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, tzinfo
from functools import cached_property
from typing import Any, ClassVar, Literal

from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.models import F
from django.db.models.expressions import Combinable

from ..limits import CHECKPOINT_TABLE, ENTRY_TABLE
from ..records import COLUMNS
from ..validation import Draft

Row = Sequence[Any]
Identity = tuple[str, str]
#: How catch-up decides that a missing position is dead:
#: ``serialised`` writers cannot commit out of order (SQLite), so a hole is dead on sight;
#: ``evidence`` asks the database which transactions are running (PostgreSQL, MySQL);
#: ``settle`` waits ``GAP_SETTLE_SECONDS`` (no evidence available).
GapStrategy = Literal["serialised", "evidence", "settle"]


@dataclass
class InsertOutcome:
    """What an insert-once statement learnt: positions it wrote, and rows it found kept."""

    created: dict[Identity, int] = field(default_factory=dict)
    kept: dict[Identity, Row] = field(default_factory=dict)


@dataclass(frozen=True)
class TransactionEvidence:
    """Transactions seen running by one look at the database (our own excluded).

    ``writers``: those that may write the journal (they could hold a missing position);
    ``alive``: those among the ``known`` identifiers passed in that are still running.
    """

    writers: frozenset[str]
    alive: frozenset[str]


class EvidenceDelayed(Exception):
    """The database could not give fresh evidence this time; ask again later (no settle
    time applies: the evidence exists, it was just not readable yet)."""


class Backend:
    """The generic shape; vendor modules override what they do better."""

    vendor: ClassVar[str] = "generic"
    gap_strategy: ClassVar[GapStrategy] = "settle"
    #: appended to the kept-row read (MySQL reads the latest committed row with a lock)
    kept_read_suffix: ClassVar[str] = ""

    def __init__(self, connection: BaseDatabaseWrapper) -> None:
        self.connection = connection
        self.alias: str = connection.alias
        quote = connection.ops.quote_name
        self.entry_table = quote(ENTRY_TABLE)
        self.checkpoint_table = quote(CHECKPOINT_TABLE)
        self.columns = [quote(name) for name in COLUMNS]

    # -- values -----------------------------------------------------------------------------

    @property
    def timezone(self) -> tzinfo:
        """The zone naive datetimes read from this connection are in."""
        zone = self.connection.timezone
        # None only with USE_TZ = False, which the system check refuses (tilttek_activity.E003).
        return UTC if zone is None else zone

    def adapt_datetime(self, value: datetime) -> Any:
        return self.connection.ops.adapt_datetimefield_value(value)

    def draft_params(self, draft: Draft) -> list[Any]:
        """Insert parameters in ``insert_columns`` order."""
        recorded_at = self.adapt_datetime(draft.recorded_at)
        occurred_at = (
            recorded_at
            if draft.occurred_at is draft.recorded_at
            else self.adapt_datetime(draft.occurred_at)
        )
        return [
            draft.kind,
            draft.idempotency_key,
            draft.member,
            draft.verb,
            draft.object,
            draft.quantity,
            draft.context_json,
            occurred_at,
            recorded_at,
        ]

    @cached_property
    def insert_columns(self) -> str:
        return ", ".join(self.columns[1:])

    @cached_property
    def select_list(self) -> str:
        """The raw select list, in ``COLUMNS`` order."""
        return ", ".join(self.columns)

    def select_fields(self) -> list[str | Combinable]:
        """The same select list for ORM-compiled reads (``values_list``)."""
        return [F(name) for name in COLUMNS]

    def max_rows_per_statement(self, params_per_row: int) -> int | None:
        limit = self.connection.features.max_query_params
        return None if limit is None else max(1, limit // params_per_row)

    # -- writing ----------------------------------------------------------------------------

    #: True while the transaction holds nothing but this library's own writes (the one
    #: ``record_activities`` opens when called outside any transaction): a deadlock there
    #: loses nothing of the caller's, so the whole write is retried (:meth:`retryable`).
    alone: bool = False

    def outside_transaction(self) -> bool:
        """Whether each statement is its own transaction (autocommit, no atomic block)."""
        return not self.connection.in_atomic_block and self.connection.get_autocommit()

    def retryable(self, exc: BaseException) -> bool:
        """Whether ``exc`` is a deadlock, which a write that was alone in its transaction
        may simply retry."""
        return False

    def insert_once(self, drafts: Sequence[Draft]) -> InsertOutcome:
        """Insert every draft whose ``(idempotency_key, kind)`` is not there yet, without
        aborting the surrounding transaction. Drafts have distinct identities."""
        raise NotImplementedError

    def read_kept(
        self, identities: Iterable[Identity], *, lock: bool = True
    ) -> dict[Identity, Row]:
        """The stored rows for these identities. With ``lock``, read the latest committed
        version even under REPEATABLE READ (MySQL's locking read)."""
        wanted = set(identities)
        if not wanted:
            return {}
        keys = sorted({key for key, _ in wanted})
        placeholders = ", ".join(["%s"] * len(keys))
        sql = (
            f"SELECT {self.select_list} FROM {self.entry_table} "
            f"WHERE {self.columns[2]} IN ({placeholders})"
        )
        if lock:
            sql += self.kept_read_suffix
        with self.connection.cursor() as cursor:
            cursor.execute(sql, keys)
            rows = cursor.fetchall()
        return {(row[2], row[1]): row for row in rows if (row[2], row[1]) in wanted}

    def read_settled(self, identities: Iterable[Identity]) -> dict[Identity, Row]:
        """The stored rows for these identities once no other open transaction is still
        writing them (``cancel_activity`` reads the recorded entry this way)."""
        return self.read_kept(identities)

    # -- writing inside an owner's transaction (staged entries) ------------------------------

    #: Whether :meth:`joined_insert` exists: an INSERT another statement can embed.
    joins_inserts: ClassVar[bool] = False

    def database_now(self) -> datetime:
        """The database's time, aware, to the second. Here the process's clock (SQLite runs
        in-process: its clock is the process's)."""
        return datetime.now(UTC).replace(microsecond=0)

    def insert_staged(self, drafts: Sequence[Draft], *, reserved: bool) -> InsertOutcome:
        """Insert-once inside the caller's transaction, dated by the database when written
        (``recorded_at``, and ``occurred_at`` unless given). ``reserved``: only this
        transaction can write these keys (the caller derived them from something it holds
        locked), so there is no race to guard against. Drafts have distinct identities."""
        return self.insert_once(dated(drafts, self.database_now()))

    def joined_insert(self, drafts: Sequence[Draft], guard: str) -> tuple[str, dict[str, Any]]:
        """``INSERT ... RETURNING position`` of reserved drafts, writing nothing unless the
        relation ``guard`` of the embedding statement has a row (see ``joins_inserts``).
        Its parameters are named (``%(journal_...)s``), like the embedding statement's."""
        raise NotImplementedError

    def read_positions(self, positions: Sequence[int]) -> list[Row]:
        """The entries at these positions, in position order."""
        if not positions:
            return []
        placeholders = ", ".join(["%s"] * len(positions))
        sql = (
            f"SELECT {self.select_list} FROM {self.entry_table} "
            f"WHERE {self.columns[0]} IN ({placeholders}) ORDER BY {self.columns[0]}"
        )
        with self.connection.cursor() as cursor:
            cursor.execute(sql, list(positions))
            rows: list[Row] = cursor.fetchall()
        return rows

    # -- reading ----------------------------------------------------------------------------

    def read_after(self, position: int, limit: int) -> list[Row]:
        """Up to ``limit`` entries after ``position``, in position order (catch-up)."""
        sql = (
            f"SELECT {self.select_list} FROM {self.entry_table} "
            f"WHERE {self.columns[0]} > %s ORDER BY {self.columns[0]} LIMIT %s"
        )
        with self.connection.cursor() as cursor:
            cursor.execute(sql, [position, limit])
            rows: list[Row] = cursor.fetchall()
            return rows

    def head(self) -> int:
        """The highest visible position (0 for an empty journal)."""
        with self.connection.cursor() as cursor:
            cursor.execute(f"SELECT MAX({self.columns[0]}) FROM {self.entry_table}")
            value = cursor.fetchone()[0]
        return int(value or 0)

    def positions_after(self, position: int, limit: int) -> list[int]:
        """Visible positions after ``position`` (status: where the holes are)."""
        sql = (
            f"SELECT {self.columns[0]} FROM {self.entry_table} "
            f"WHERE {self.columns[0]} > %s ORDER BY {self.columns[0]} LIMIT %s"
        )
        with self.connection.cursor() as cursor:
            cursor.execute(sql, [position, limit])
            return [row[0] for row in cursor.fetchall()]

    def read_compiled(self, sql: str, params: Sequence[Any]) -> list[Row]:
        """The rows of a read the ORM compiled for this connection (``sql``, ``params``:
        ``query.get_compiler(...).as_sql()``), fetched raw so the caller decodes them
        itself (``reading.select_entries``)."""
        with self.connection.cursor() as cursor:
            cursor.execute(sql, list(params))
            rows: list[Row] = cursor.fetchall()
        return rows

    # -- checkpoints ------------------------------------------------------------------------

    def checkpoint_position(self, name: str) -> int:
        """The projection's checkpoint, read without a lock (0 when it has none yet)."""
        sql = f"SELECT position FROM {self.checkpoint_table} WHERE projection = %s"
        with self.connection.cursor() as cursor:
            cursor.execute(sql, [name])
            row = cursor.fetchone()
        return 0 if row is None else int(row[0])

    lock_checkpoint_sql: ClassVar[str] = (
        "SELECT position FROM {table} WHERE projection = %s FOR UPDATE"
    )

    def lock_checkpoint(self, name: str) -> int | None:
        """Lock the projection's checkpoint row until the transaction ends; None if absent."""
        sql = self.lock_checkpoint_sql.format(table=self.checkpoint_table)
        with self.connection.cursor() as cursor:
            cursor.execute(sql, [name])
            row = cursor.fetchone()
        return None if row is None else int(row[0])

    def create_checkpoint(self, name: str, now: datetime) -> None:
        """Create the checkpoint row at position 0 unless it exists (insert-once)."""
        raise NotImplementedError

    def advance_checkpoint(self, name: str, position: int, now: datetime) -> None:
        sql = (
            f"UPDATE {self.checkpoint_table} SET position = %s, updated_at = %s "
            "WHERE projection = %s"
        )
        with self.connection.cursor() as cursor:
            cursor.execute(sql, [position, self.adapt_datetime(now), name])

    # -- gaps -------------------------------------------------------------------------------

    def transaction_evidence(self, known: Collection[str]) -> TransactionEvidence | None:
        """Which transactions are running now; None when the database cannot tell here
        (catch-up then falls back to ``GAP_SETTLE_SECONDS``). May raise
        :class:`EvidenceDelayed`."""
        return None


def dated(drafts: Sequence[Draft], now: datetime) -> list[Draft]:
    """The drafts as written at ``now``: ``recorded_at``, and ``occurred_at`` unless given."""
    return [
        replace(d, recorded_at=now, occurred_at=d.occurred_at if d.occurred_at_given else now)
        for d in drafts
    ]
