"""MySQL and MariaDB: ``INSERT IGNORE`` after full validation, evidence from ``INNODB_TRX``.

Writing once
    Never by a bare ``INSERT IGNORE``: a duplicate makes InnoDB lock the gap before the
    existing key, and writers of one key waiting on a transaction that rolls back deadlock
    each other (1213 rolls back the victim's whole transaction). :mod:`.innodb` explains the
    protocol used instead: a plain read, a per-key ``GET_LOCK`` mutex, a ``FOR UPDATE`` read
    that waits for a concurrent writer's row without gap locks, then the insert of what is
    still absent. On MariaDB it is one compound statement (a new entry, a duplicate and a
    bulk chunk each cost one round trip); on MySQL one statement per step. A write that is
    its own transaction (autocommit, or ``record_activities`` outside any transaction) has
    nothing of the caller's to lose: it stays a bare ``INSERT IGNORE`` whose deadlocks are
    retried. The insert is
    still ``INSERT IGNORE`` (against writers that do not take the mutex), and IGNORE also
    downgrades *every* other error to a warning and stores a coerced value, which is why
    everything is validated in Python first and why any warning other than 1062 raises
    (after deleting what the statement wrote). A key is only inserted once seen absent, so a
    duplicate no longer burns an auto-increment value. On MySQL (no ``RETURNING``) a
    multi-row insert that wrote only some rows cannot tell which, so it is rolled back to a
    savepoint and replayed row by row.

Gap evidence
    ``information_schema.INNODB_TRX`` lists running InnoDB transactions, but is served from a
    cache that is only refreshed after 0.1 s without readers, so a read may describe the
    past. The evidence query therefore carries a fresh nonce and runs inside a transaction
    of our own that has already started in InnoDB: the data is trusted only when our own
    row shows, as its current statement (``trx_query``), the very query with that nonce -
    proof that the cache was filled while it ran, after the hole was observed. Otherwise we
    wait a little and ask again; if it stays stale, the hole waits for the next round.
    Transactions are identified by ``thread id @ trx_started`` (the trx id changes when a
    transaction starts writing; a reused identity only makes us wait longer), counted as
    possible writers when they hold locks, and limited to sessions whose default database
    is the journal's (``PROCESSLIST.DB``), so other schemas on the same server do not hold
    our holes open. Reading ``INNODB_TRX`` needs the PROCESS privilege; without it (or
    inside a caller's transaction, where our probe transaction would not be fresh) catch-up
    falls back to ``GAP_SETTLE_SECONDS``.
"""

from __future__ import annotations

import logging
import re
import time
import uuid
from collections.abc import Collection, Iterable, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, ClassVar

from django.db import DatabaseError, OperationalError, transaction

from ..errors import ActivityError, InvalidActivity
from ..fields import binary_collation
from ..validation import Draft
from .base import (
    Backend,
    EvidenceDelayed,
    GapStrategy,
    Identity,
    InsertOutcome,
    Row,
    TransactionEvidence,
    dated,
)
from .innodb import compound_write, lock_name

if TYPE_CHECKING:
    # Only for the annotation: importing the backend at run time needs the MySQL driver.
    from django.db.backends.mysql.base import DatabaseWrapper as MySQLConnection

logger = logging.getLogger("tilttek_activity")

DUPLICATE_KEY = 1062
LOCK_WAIT_TIMEOUT = 1205
DEADLOCK = 1213
#: Attempts of a write that is alone in its transaction, when deadlocks keep choosing it.
ALONE_ATTEMPTS = 5
#: INNODB_TRX's cache refreshes once nobody has read it for 0.1 s.
CACHE_IDLE_SECONDS = 0.12
EVIDENCE_ATTEMPTS = 4

#: ``{nonce}`` comes first: INNODB_TRX truncates ``trx_query`` to 1024 characters.
EVIDENCE_SQL = """/* tilttek_activity evidence {nonce} */
SELECT CONCAT(t.trx_mysql_thread_id, '@', t.trx_started),
       CASE WHEN t.trx_mysql_thread_id = CONNECTION_ID() THEN t.trx_query END,
       t.trx_lock_structs
FROM information_schema.INNODB_TRX t
LEFT JOIN information_schema.PROCESSLIST p ON p.ID = t.trx_mysql_thread_id
WHERE t.trx_mysql_thread_id = CONNECTION_ID() OR p.DB IS NULL OR p.DB = DATABASE()
"""

#: Aliases whose INNODB_TRX we may not read (no PROCESS privilege): settle time instead.
_unreadable: set[str] = set()


class _Ambiguous(Exception):
    """A multi-row INSERT IGNORE wrote some rows, and MySQL does not say which."""


def _refused(level: str, code: int, message: str) -> InvalidActivity:
    """IGNORE downgraded an error to a warning: the value was refused (nothing is kept)."""
    match = re.search(r"column '(\w+)'", str(message))
    return InvalidActivity(
        match.group(1) if match else "entry",
        f"the database refused the value ({level} {code}: {message})",
    )


def _compound_results(cursor: Any) -> tuple[dict[Identity, int], list[Row]]:
    """The compound statement's result sets: the rows it wrote (a bulk ``RETURNING``), and
    its answer, one row per draft."""
    written: dict[Identity, int] = {}
    answer: list[Row] = []
    while True:
        rows = list(cursor.fetchall())
        if cursor.description and cursor.description[0][0] == "written_position":
            written.update({(key, kind): position for position, kind, key in rows})
        elif cursor.description:
            answer = rows
        if not cursor.nextset():
            return written, answer


def _lock_timeout(drafts: Sequence[Draft]) -> OperationalError:
    """Waiting for the writer of a key timed out, like an InnoDB lock wait (1205): this
    statement did nothing and the transaction goes on."""
    keys = ", ".join(repr(d.idempotency_key) for d in drafts[:3])
    return OperationalError(
        LOCK_WAIT_TIMEOUT,
        f"Lock wait timeout exceeded waiting for the writer of idempotency key(s) {keys}",
    )


class MySQLBackend(Backend):
    connection: MySQLConnection
    vendor: ClassVar[str] = "mysql"
    gap_strategy: ClassVar[GapStrategy] = "evidence"
    kept_read_suffix: ClassVar[str] = " LOCK IN SHARE MODE"

    @property
    def returning(self) -> bool:
        """MariaDB 10.5+ returns inserted rows (``INSERT ... RETURNING``)."""
        return bool(self.connection.features.can_return_columns_from_insert)

    def _values(self, drafts: Sequence[Draft]) -> tuple[str, list[Any]]:
        row = "(" + ", ".join(["%s"] * 9) + ")"
        params: list[Any] = []
        for draft in drafts:
            params.extend(self.draft_params(draft))
        sql = (
            f"INSERT IGNORE INTO {self.entry_table} ({self.insert_columns}) "
            f"VALUES {', '.join([row] * len(drafts))}"
        )
        return sql, params

    @property
    def compound(self) -> bool:
        """MariaDB runs anonymous compound statements (``BEGIN NOT ATOMIC``): the whole
        write-once protocol of :mod:`.innodb` in one round trip. MySQL needs one statement
        per step."""
        return self.connection.mysql_is_mariadb

    @property
    def json_table(self) -> bool:
        """``JSON_TABLE`` (MariaDB 10.6+), which the compound statement of a bulk chunk reads
        its drafts with."""
        return self.connection.mysql_version >= (10, 6)

    def insert_once(self, drafts: Sequence[Draft]) -> InsertOutcome:
        """Write once (see :mod:`.innodb`): inside a caller's transaction without ever
        waiting on the unique index; alone in a transaction, a plain ``INSERT IGNORE``
        whose deadlocks are retried."""
        if self.alone or self.outside_transaction():
            return self._insert_alone(drafts)
        if self.compound and (len(drafts) == 1 or self.json_table):
            return self._insert_compound(drafts)
        return self._insert_stepwise(drafts)

    def retryable(self, exc: BaseException) -> bool:
        return bool(exc.args) and exc.args[0] == DEADLOCK

    def database_now(self) -> datetime:
        with self.connection.cursor() as cursor:
            cursor.execute("SELECT UTC_TIMESTAMP()")
            value: datetime = cursor.fetchone()[0]
        return value.replace(tzinfo=UTC)

    def insert_staged(self, drafts: Sequence[Draft], *, reserved: bool) -> InsertOutcome:
        """Reserved keys on MariaDB: one plain ``INSERT ... RETURNING`` dated by
        ``UTC_TIMESTAMP()`` (no IGNORE, no mutex: no other writer can hold these keys, so
        a duplicate, which only a forged key could cause, is an error that rolls the
        owner's transaction back). Otherwise the write-once protocol, dated by one read of
        the database clock."""
        if not (reserved and self.returning and self.connection.timezone_name == "UTC"):
            return self.insert_once(dated(drafts, self.database_now()))
        row = "(" + ", ".join(["%s"] * 7) + ", COALESCE(%s, UTC_TIMESTAMP()), UTC_TIMESTAMP())"
        params: list[Any] = []
        for draft in drafts:
            values = self.draft_params(draft)[:7]
            moment = self.adapt_datetime(draft.occurred_at) if draft.occurred_at_given else None
            params.extend([*values, moment])
        sql = (
            f"INSERT INTO {self.entry_table} ({self.insert_columns}) "
            f"VALUES {', '.join([row] * len(drafts))} "
            f"RETURNING {self.columns[0]}, {self.columns[1]}, {self.columns[2]}"
        )
        outcome = InsertOutcome()
        with self.connection.cursor() as cursor:
            cursor.execute(sql, params)
            rows = cursor.fetchall()
            written = {(key, kind): position for position, kind, key in rows}
            if cursor.warning_count:
                self._refuse_warnings(cursor, list(written.values()))
        outcome.created.update(written)
        return outcome

    def _insert_alone(self, drafts: Sequence[Draft]) -> InsertOutcome:
        """The write is the whole transaction (autocommit, or the one ``record_activities``
        opened): nothing of the caller's can be lost, so the short path serves, and a
        deadlock among such writers is retried (by the caller of a ``record_activities``
        transaction, which InnoDB rolled back whole)."""
        for attempt in range(1, ALONE_ATTEMPTS + 1):
            outcome = InsertOutcome()
            pending = list(drafts)
            try:
                if len(pending) > 1:
                    # A plain read of the keys first: duplicates are not sent, so they burn
                    # no auto-increment value (a lost race is still handled by IGNORE).
                    outcome.kept.update(self.read_kept([d.identity for d in pending], lock=False))
                    pending = [d for d in pending if d.identity not in outcome.kept]
                if pending:
                    self._insert_absent(pending, outcome)
                return outcome
            except OperationalError as exc:
                if self.alone or attempt == ALONE_ATTEMPTS or not self.retryable(exc):
                    raise
                logger.info("Retrying an activity write after a deadlock (%s)", exc)
        raise AssertionError("unreachable")

    def _lock_names(self, drafts: Sequence[Draft]) -> list[str]:
        database = str(self.connection.settings_dict["NAME"])
        return [lock_name(database, d.kind, d.idempotency_key) for d in drafts]

    def _insert_compound(self, drafts: Sequence[Draft]) -> InsertOutcome:
        sql, params = compound_write(
            drafts,
            self._lock_names(drafts),
            [self.draft_params(d) for d in drafts],
            binary_collation(self.connection) or "utf8mb4_bin",
        )
        with self.connection.cursor() as cursor:
            cursor.execute(sql, params)
            written, answer = _compound_results(cursor)
            written.update({drafts[row[4]].identity: row[5] for row in answer if row[5]})
            if answer and answer[0][2] is not None:  # IGNORE downgraded an error
                if written:
                    marks = ", ".join(["%s"] * len(written))
                    cursor.execute(
                        f"DELETE FROM {self.entry_table} WHERE {self.columns[0]} IN ({marks})",
                        list(written.values()),
                    )
                raise _refused("Warning", answer[0][2], answer[0][3])
        outcome = InsertOutcome(created=written)
        waited = []
        for row in answer:
            draft, stored = drafts[row[4]], row[6:]
            if draft.identity in written:
                continue
            if stored[0] is None:  # its mutex timed out
                waited.append(draft)
            else:
                outcome.kept[draft.identity] = stored
        if waited:
            raise _lock_timeout(waited)
        return outcome

    def _insert_stepwise(self, drafts: Sequence[Draft]) -> InsertOutcome:
        """The steps of :mod:`.innodb`, one statement each (MySQL)."""
        outcome = InsertOutcome()
        outcome.kept.update(self.read_kept([d.identity for d in drafts], lock=False))
        pending = [d for d in drafts if d.identity not in outcome.kept]
        if not pending:
            return outcome
        names = sorted(set(self._lock_names(pending)))
        self._get_locks(names, pending)
        try:
            outcome.kept.update(self.read_kept([d.identity for d in pending], lock=False))
            pending = [d for d in pending if d.identity not in outcome.kept]
            if pending:
                outcome.kept.update(self._read_for_update([d.identity for d in pending]))
                pending = [d for d in pending if d.identity not in outcome.kept]
            if pending:
                self._insert_absent(pending, outcome)
        finally:
            self._release_locks(names)
        return outcome

    def _get_locks(self, names: Sequence[str], drafts: Sequence[Draft]) -> None:
        """Every mutex, in name order (evaluated left to right), or none."""
        calls = ", ".join("GET_LOCK(%s, @@innodb_lock_wait_timeout)" for _ in names)
        with self.connection.cursor() as cursor:
            cursor.execute(f"SELECT {calls}", list(names))
            got = cursor.fetchone()
        if any(value != 1 for value in got):
            self._release_locks(names)
            raise _lock_timeout(drafts)

    def _release_locks(self, names: Sequence[str]) -> None:
        calls = ", ".join("RELEASE_LOCK(%s)" for _ in names)
        with self.connection.cursor() as cursor:
            cursor.execute(f"DO {calls}", list(names))

    def read_settled(self, identities: Iterable[Identity]) -> dict[Identity, Row]:
        """A plain read, then a ``FOR UPDATE`` read of what it did not show (the wait of
        :mod:`.innodb`): a shared-lock wait on a row whose writer rolls back would leave this
        transaction a gap lock that makes later inserts deadlock."""
        wanted = list(identities)
        rows = self.read_kept(wanted, lock=False)
        missing = [identity for identity in wanted if identity not in rows]
        if missing:
            rows.update(self._read_for_update(missing))
        return rows

    def _read_for_update(self, identities: Sequence[Identity]) -> dict[Identity, Row]:
        """The rows of these identities, waiting for a concurrent writer's uncommitted row
        with an exclusive record lock (READ COMMITTED: an absent key takes no lock)."""
        condition = " OR ".join(
            f"({self.columns[2]} = %s AND {self.columns[1]} = %s)" for _ in identities
        )
        params = [value for identity in identities for value in identity]
        sql = f"SELECT {self.select_list} FROM {self.entry_table} WHERE {condition} FOR UPDATE"
        with self.connection.cursor() as cursor:
            cursor.execute(sql, params)
            rows = cursor.fetchall()
        return {(row[2], row[1]): row for row in rows}

    def _insert_absent(self, drafts: Sequence[Draft], outcome: InsertOutcome) -> None:
        """INSERT IGNORE of keys seen absent under their mutexes (IGNORE only guards
        against writers that do not take the mutex)."""
        if self.returning:
            self._insert_returning(drafts, outcome)
        elif len(drafts) == 1:
            self._insert_one(drafts[0], outcome)
        else:
            try:
                with transaction.atomic(using=self.alias):
                    self._insert_many(drafts, outcome)
            except _Ambiguous:
                for draft in drafts:
                    self._insert_one(draft, outcome)

    def _insert_returning(self, drafts: Sequence[Draft], outcome: InsertOutcome) -> None:
        sql, params = self._values(drafts)
        sql += f" RETURNING {self.columns[0]}, {self.columns[1]}, {self.columns[2]}"
        with self.connection.cursor() as cursor:
            cursor.execute(sql, params)
            rows = cursor.fetchall()
            warnings = cursor.warning_count
            written = {(key, kind): position for position, kind, key in rows}
            if warnings:
                self._refuse_warnings(cursor, list(written.values()))
        outcome.created.update(written)

    def _insert_one(self, draft: Draft, outcome: InsertOutcome) -> None:
        sql, params = self._values([draft])
        with self.connection.cursor() as cursor:
            cursor.execute(sql, params)
            written = [cursor.lastrowid] if cursor.rowcount == 1 else []
            if cursor.warning_count:
                self._refuse_warnings(cursor, written)
        if written:
            outcome.created[draft.identity] = written[0]

    def _insert_many(self, drafts: Sequence[Draft], outcome: InsertOutcome) -> None:
        sql, params = self._values(drafts)
        with self.connection.cursor() as cursor:
            cursor.execute(sql, params)
            count = cursor.rowcount
            if cursor.warning_count:
                self._refuse_warnings(cursor, [])  # the savepoint rolls the rows back
        if count == 0:
            return
        if count != len(drafts):
            raise _Ambiguous
        identities: list[Identity] = [d.identity for d in drafts]
        for identity, row in self.read_kept(identities, lock=False).items():
            outcome.created[identity] = row[0]

    def _refuse_warnings(self, cursor: Any, written: Sequence[int]) -> None:
        """Raise on any warning but a duplicate key, after removing what was written."""
        cursor.execute("SHOW WARNINGS")
        bad = [row for row in cursor.fetchall() if int(row[1]) != DUPLICATE_KEY]
        if not bad:
            return
        if written:
            placeholders = ", ".join(["%s"] * len(written))
            cursor.execute(
                f"DELETE FROM {self.entry_table} WHERE {self.columns[0]} IN ({placeholders})",
                list(written),
            )
        level, code, message = bad[0][:3]
        raise _refused(level, code, message)

    def create_checkpoint(self, name: str, now: datetime) -> None:
        with self.connection.cursor() as cursor:
            cursor.execute(
                f"INSERT IGNORE INTO {self.checkpoint_table} (projection, position, updated_at) "
                "VALUES (%s, 0, %s)",
                [name, self.adapt_datetime(now)],
            )
            if cursor.warning_count:
                cursor.execute("SHOW WARNINGS")
                bad = [row for row in cursor.fetchall() if int(row[1]) != DUPLICATE_KEY]
                if bad:
                    raise ActivityError(f"cannot create the checkpoint of {name!r}: {bad[0]}")

    def transaction_evidence(self, known: Collection[str]) -> TransactionEvidence | None:
        if self.connection.in_atomic_block or self.alias in _unreadable:
            # Inside a caller's transaction our own InnoDB transaction may predate the hole:
            # seeing it listed would not prove the cache is fresh.
            return None
        known_set = set(known)
        for attempt in range(EVIDENCE_ATTEMPTS):
            if attempt:
                time.sleep(CACHE_IDLE_SECONDS)
            try:
                rows = self._read_innodb_trx()
            except DatabaseError as exc:
                _unreadable.add(self.alias)
                logger.warning(
                    "Cannot read information_schema.INNODB_TRX on %r (%s): holes in the "
                    "activity journal will be passed after GAP_SETTLE_SECONDS instead of "
                    "on evidence. Grant the PROCESS privilege to fix this.",
                    self.alias,
                    exc,
                )
                return None
            if any(is_current for _, is_current, _ in rows):
                return TransactionEvidence(
                    writers=frozenset(
                        trx for trx, is_current, locks in rows if not is_current and locks
                    ),
                    alive=frozenset(trx for trx, _, _ in rows if trx in known_set),
                )
        raise EvidenceDelayed("information_schema.INNODB_TRX kept serving a stale cache")

    def _read_innodb_trx(self) -> list[tuple[str, bool, int]]:
        """``(identity, is our current statement, lock structs)`` per listed transaction."""
        nonce = uuid.uuid4().hex
        with transaction.atomic(using=self.alias), self.connection.cursor() as cursor:
            # Start our own InnoDB transaction, so that the cache can show our statement.
            cursor.execute(f"SELECT 1 FROM {self.entry_table} LIMIT 1")
            cursor.fetchall()
            cursor.execute(EVIDENCE_SQL.format(nonce=nonce))
            return [
                (str(trx), nonce in str(query or ""), int(locks or 0))
                for trx, query, locks in cursor.fetchall()
            ]
