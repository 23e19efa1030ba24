"""PostgreSQL: ``INSERT ... ON CONFLICT DO NOTHING`` guarded by ``NOT EXISTS``; evidence
from ``pg_locks``.

Writing once
    The INSERT selects only drafts whose key is not there yet (``WHERE NOT EXISTS``), so a
    duplicate normally costs no identity value (``nextval`` runs only for rows the SELECT
    produces); ``ON CONFLICT (idempotency_key, kind) DO NOTHING`` is the guard against a
    concurrent writer of the same key, and never raises, so never aborts the caller's
    transaction. A single row is the plainest such statement (a new entry costs one round
    trip; a duplicate returns nothing and the kept row is read next). Many rows travel as
    one JSON document in a CTE that also returns the rows found kept, so a bulk write is one
    statement per chunk; only a lost race needs a second read.

Gap evidence
    A position is taken (identity ``nextval``) by an INSERT that already holds a
    ``RowExclusiveLock`` on the journal table, and every transaction keeps its locks until it
    ends. So the transactions that could still commit a missing position are exactly those
    holding a write lock on ``tilttek_activity_entry`` in this database, identified by their
    virtual transaction id (unique until restart, and present even before - or without - a
    real xid: an ``ON CONFLICT`` insert waiting on another writer has taken its position
    but has no xid yet, which is why ``pg_current_snapshot()`` alone is not enough).
    A hole is dead once every such transaction seen after the hole was observed has ended
    (the same wait ``CREATE INDEX CONCURRENTLY`` performs). ``pg_locks`` includes fast-path
    locks and prepared transactions (``pid`` NULL).
"""

from __future__ import annotations

import json
from collections.abc import Collection, Sequence
from datetime import datetime
from typing import Any, ClassVar

from ..limits import ENTRY_TABLE
from ..validation import Draft
from .base import Backend, GapStrategy, InsertOutcome, TransactionEvidence

#: The SQLSTATE of a deadlock.
DEADLOCK_DETECTED = "40P01"

#: The columns an insert writes (all but the position).
_COLUMNS = (
    "kind, idempotency_key, member, verb, object, quantity, context, occurred_at, recorded_at"
)
#: The columns an insert returns.
_RETURNED = (
    "position, kind, idempotency_key, member, verb, object, quantity, context, occurred_at, "
    "recorded_at"
)

#: One row: the existence check and the insert in one statement; nothing returned means the
#: key is there (or a concurrent writer just won it) and the kept row is read next. The
#: CASTs type the parameters for server-side binding too (``CAST``, not ``::``: a client-side
#: bound ``-2147483648::integer`` would parse as ``-(2147483648::integer)`` and overflow).
INSERT_ONE_SQL = f"""
INSERT INTO tilttek_activity_entry ({_COLUMNS})
SELECT CAST(%s AS varchar), CAST(%s AS varchar), CAST(%s AS varchar), CAST(%s AS varchar),
       CAST(%s AS varchar), CAST(%s AS integer), CAST(%s AS jsonb), CAST(%s AS timestamptz),
       CAST(%s AS timestamptz)
WHERE NOT EXISTS (
    SELECT 1 FROM tilttek_activity_entry WHERE idempotency_key = %s AND kind = %s
)
ON CONFLICT (idempotency_key, kind) DO NOTHING
RETURNING position
"""

#: Many rows: one JSON document parameter (a short statement that PostgreSQL plans in no
#: time and psycopg quotes in one go, whatever the number of rows). The rows found kept come
#: back in the same statement.
INSERT_MANY_SQL = f"""
WITH draft AS (
    SELECT *
    FROM jsonb_to_recordset(%s::jsonb) AS d(
        ord integer, kind varchar, idempotency_key varchar, member varchar, verb varchar,
        object varchar, quantity integer, context jsonb, occurred_at timestamptz,
        recorded_at timestamptz
    )
), kept AS (
    SELECT {", ".join("e." + c for c in _RETURNED.split(", "))}
    FROM tilttek_activity_entry e
    JOIN draft d ON e.idempotency_key = d.idempotency_key COLLATE "C" AND e.kind = d.kind
), written AS (
    INSERT INTO tilttek_activity_entry ({_COLUMNS})
    SELECT {", ".join("d." + c for c in _COLUMNS.split(", "))}
    FROM draft d
    WHERE NOT EXISTS (
        SELECT 1 FROM kept k WHERE k.idempotency_key = d.idempotency_key AND k.kind = d.kind
    )
    ORDER BY d.ord
    ON CONFLICT (idempotency_key, kind) DO NOTHING
    RETURNING position, kind, idempotency_key
)
SELECT true, position, kind, idempotency_key, NULL::varchar, NULL::varchar, NULL::varchar,
       NULL::integer, NULL::jsonb, NULL::timestamptz, NULL::timestamptz
FROM written
UNION ALL
SELECT false, {_RETURNED} FROM kept
"""


#: One staged draft (``insert_staged``, ``joined_insert``): ``ord`` and the values; a NULL
#: ``occurred_at`` is dated by the database like ``recorded_at``.
STAGED_ROW = (
    "(CAST(%s AS integer), CAST(%s AS varchar), CAST(%s AS varchar), CAST(%s AS varchar), "
    "CAST(%s AS varchar), CAST(%s AS varchar), CAST(%s AS integer), CAST(%s AS jsonb), "
    "CAST(%s AS timestamptz))"
)

#: Staged drafts, dated by the database clock (``now()``: when the writing transaction
#: began, to the second). ``{rows}`` are ``STAGED_ROW``s, ``{guard}`` an optional
#: ``, relation`` of the embedding statement (no row there: nothing is written).
STAGED_INSERT_SQL = f"""
INSERT INTO tilttek_activity_entry ({_COLUMNS})
SELECT v.kind, v.idempotency_key, v.member, v.verb, v.object, v.quantity, v.context,
       COALESCE(v.occurred_at, date_trunc('second', now())), date_trunc('second', now())
FROM (VALUES {{rows}}) AS v(
    ord, kind, idempotency_key, member, verb, object, quantity, context, occurred_at
){{guard}}
WHERE NOT EXISTS (
    SELECT 1 FROM tilttek_activity_entry e
    WHERE e.idempotency_key = v.idempotency_key AND e.kind = v.kind
)
ORDER BY v.ord
ON CONFLICT (idempotency_key, kind) DO NOTHING
RETURNING position, kind, idempotency_key
"""


#: The transactions running now that may write the journal (they hold a writing lock on
#: it), and which of the known ones are still running (catch-up's evidence on holes).
EVIDENCE_SQL = """
WITH here AS (
    SELECT oid AS db FROM pg_database WHERE datname = current_database()
), locks AS (
    SELECT l.virtualtransaction AS vxid,
           (l.locktype = 'relation' AND l.database = here.db
            AND l.relation = to_regclass(%s)
            AND l.mode NOT IN ('AccessShareLock', 'RowShareLock')) AS writes
    FROM pg_locks l CROSS JOIN here
    WHERE l.pid IS DISTINCT FROM pg_backend_pid()
)
SELECT vxid, bool_or(writes) FROM locks
WHERE writes OR vxid = ANY(%s::text[])
GROUP BY vxid
"""


def _document_row(index: int, draft: Draft) -> str:
    """One draft as a JSON object of the bulk document. The context goes in as the draft's
    own JSON text (re-encoding it would write big floats with an exponent, which jsonb turns
    into integers)."""
    row = json.dumps(
        {
            "ord": index,
            "kind": draft.kind,
            "idempotency_key": draft.idempotency_key,
            "member": draft.member,
            "verb": draft.verb,
            "object": draft.object,
            "quantity": draft.quantity,
            "occurred_at": draft.occurred_at.isoformat(),
            "recorded_at": draft.recorded_at.isoformat(),
        },
        ensure_ascii=False,
        separators=(",", ":"),
    )
    return f'{row[:-1]},"context":{draft.context_json}}}'


class PostgreSQLBackend(Backend):
    vendor: ClassVar[str] = "postgresql"
    gap_strategy: ClassVar[GapStrategy] = "evidence"

    def insert_once(self, drafts: Sequence[Draft]) -> InsertOutcome:
        outcome = InsertOutcome()
        if len(drafts) == 1:
            draft = drafts[0]
            params = [*self.draft_params(draft), draft.idempotency_key, draft.kind]
            with self.connection.cursor() as cursor:
                cursor.execute(INSERT_ONE_SQL, params)
                row = cursor.fetchone()
            if row is not None:
                outcome.created[draft.identity] = row[0]
            return outcome
        document = "[" + ",".join(_document_row(index, d) for index, d in enumerate(drafts)) + "]"
        with self.connection.cursor() as cursor:
            cursor.execute(INSERT_MANY_SQL, [document])
            rows = cursor.fetchall()
        for created, *row in rows:
            identity = (row[2], row[1])
            if created:
                outcome.created[identity] = row[0]
            else:
                outcome.kept[identity] = row
        return outcome

    joins_inserts: ClassVar[bool] = True

    def insert_staged(self, drafts: Sequence[Draft], *, reserved: bool) -> InsertOutcome:
        """One statement whatever the keys: ``ON CONFLICT DO NOTHING`` waits for a
        concurrent writer of the same key and never aborts the transaction."""
        sql, params = self._staged(drafts, "")
        outcome = InsertOutcome()
        with self.connection.cursor() as cursor:
            cursor.execute(sql, params)
            for position, kind, key in cursor.fetchall():
                outcome.created[(key, kind)] = position
        return outcome

    def joined_insert(self, drafts: Sequence[Draft], guard: str) -> tuple[str, dict[str, Any]]:
        params: dict[str, Any] = {}
        rows = []
        for index, values in enumerate(_staged_values(drafts)):
            names = [f"journal_{index}_{column}" for column in range(len(values))]
            params.update(zip(names, values, strict=True))
            rows.append(STAGED_ROW % tuple(f"%({name})s" for name in names))
        sql = STAGED_INSERT_SQL.format(rows=", ".join(rows), guard=f", {guard}").strip()
        return sql, params

    def _staged(self, drafts: Sequence[Draft], guard: str) -> tuple[str, list[Any]]:
        params = [value for values in _staged_values(drafts) for value in values]
        rows = ", ".join([STAGED_ROW] * len(drafts))
        return STAGED_INSERT_SQL.format(rows=rows, guard=guard).strip(), params

    def max_rows_per_statement(self, params_per_row: int) -> int | None:
        return None  # one parameter per column, whatever the number of rows

    def retryable(self, exc: BaseException) -> bool:
        return getattr(exc.__cause__, "sqlstate", None) == DEADLOCK_DETECTED

    def create_checkpoint(self, name: str, now: datetime) -> None:
        with self.connection.cursor() as cursor:
            cursor.execute(
                f"INSERT INTO {self.checkpoint_table} (projection, position, updated_at) "
                "VALUES (%s, 0, %s) ON CONFLICT (projection) DO NOTHING",
                [name, self.adapt_datetime(now)],
            )

    def transaction_evidence(self, known: Collection[str]) -> TransactionEvidence | None:
        if self.connection.in_atomic_block and not self._reads_fresh_snapshots():
            # Under REPEATABLE READ the reads that follow would use a snapshot older than
            # this evidence: it would prove nothing about what they can see.
            return None
        with self.connection.cursor() as cursor:
            cursor.execute(EVIDENCE_SQL, [ENTRY_TABLE, list(known)])
            rows = cursor.fetchall()
        known_set = set(known)
        return TransactionEvidence(
            writers=frozenset(vxid for vxid, writes in rows if writes),
            alive=frozenset(vxid for vxid, _ in rows if vxid in known_set),
        )

    def _reads_fresh_snapshots(self) -> bool:
        from django.db.backends.postgresql.psycopg_any import IsolationLevel

        level = getattr(self.connection, "isolation_level", None)
        return level is None or level in (
            IsolationLevel.READ_UNCOMMITTED,
            IsolationLevel.READ_COMMITTED,
        )


def _staged_values(drafts: Sequence[Draft]) -> list[list[Any]]:
    """The values of each draft's :data:`STAGED_ROW`, in its order."""
    return [
        [
            index,
            draft.kind,
            draft.idempotency_key,
            draft.member,
            draft.verb,
            draft.object,
            draft.quantity,
            draft.context_json,
            draft.occurred_at if draft.occurred_at_given else None,
        ]
        for index, draft in enumerate(drafts)
    ]
