"""The broadcast outbox, statement by statement (the protocol: ``outbox/broadcasts.py``).

Every statement is portable: the claim locks candidate rows with ``{skip_locked}`` where the
database has row locks (SQLite serialises writers instead). Each function takes a cursor of
the caller's transaction and opens none itself.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .. import payloads
from .dialect import Dialect
from .sql import in_list, render

#: The idle poll: is any pending row due? One indexed, non-locking read.
ANY_DUE = "SELECT id FROM {t_broadcasts} WHERE status = 'pending' AND available_at <= {now} LIMIT 1"

#: Due pending rows, oldest first, locked (skipping rows another claim holds).
DUE_CANDIDATES = (
    "SELECT id, instance_id FROM {t_broadcasts} WHERE status = 'pending' "
    "AND available_at <= {now} ORDER BY available_at, id LIMIT %(limit)s{skip_locked}"
)

#: The unfinished rows of some actors up to a row id, in id order per actor; the third
#: column says whether the row is pending but not due yet (waiting for its retry).
UNFINISHED_OF_ACTORS = (
    "SELECT instance_id, id, CASE WHEN status = 'pending' AND available_at > {now} "
    "THEN 1 ELSE 0 END FROM {t_broadcasts} WHERE status IN ('pending', 'processing') "
    "AND instance_id IN ({instances}) AND id <= %(last_id)s ORDER BY instance_id, id"
)

#: The claim itself: rows to ``processing`` under a process.
MARK_PROCESSING = (
    "UPDATE {t_broadcasts} SET status = 'processing', claimed_by = %(process_id)s, "
    "claimed_at = {now}, updated_at = {now} WHERE id IN ({ids})"
)

#: What the Channels message of each claimed row needs, joined to its message.
CLAIMED_ROWS = (
    "SELECT b.id, b.broadcast_id, b.instance_id, b.observable_name, b.value{as_text}, "
    "b.attempt_count, m.actor_type, m.actor_id, m.sequence "
    "FROM {t_broadcasts} b JOIN {t_messages} m ON m.id = b.message_id "
    "WHERE b.id IN ({ids}) ORDER BY b.id"
)

#: Outcomes change only rows still ``processing`` under the recording process (a claim that
#: dead-process cleanup handed back belongs to whoever claims it next).
FENCE = " AND status = 'processing' AND claimed_by = %(process_id)s"

#: Rows back to ``pending``, due when a leading row of their actor is (derived table:
#: MySQL cannot read the table it updates in a plain subquery). ``{fence}`` is empty at
#: claim time and :data:`FENCE` when recording.
FOLLOW_LEADER = (
    "UPDATE {t_broadcasts} SET status = 'pending', claimed_by = NULL, claimed_at = NULL, "
    "available_at = (SELECT a FROM (SELECT available_at AS a FROM {t_broadcasts} "
    "WHERE id = %(leader)s) AS leader), updated_at = {now} WHERE id IN ({ids}){fence}"
)

#: Delivered rows.
MARK_DELIVERED = (
    "UPDATE {t_broadcasts} SET status = 'delivered', delivered_at = {now}, claimed_by = NULL, "
    "updated_at = {now} WHERE id IN ({ids})" + FENCE
)

#: A failed delivery that will be tried again ``%(retry_in)s`` from now.
MARK_RETRYING = (
    "UPDATE {t_broadcasts} SET status = 'pending', available_at = {later:retry_in}, "
    "attempt_count = attempt_count + 1, error = %(error)s{json_cast}, claimed_by = NULL, "
    "claimed_at = NULL, updated_at = {now} WHERE id = %(id)s" + FENCE
)

#: A failed delivery with no attempt left: ``dead``, kept for inspection.
MARK_DEAD = (
    "UPDATE {t_broadcasts} SET status = 'dead', attempt_count = attempt_count + 1, "
    "error = %(error)s{json_cast}, claimed_by = NULL, claimed_at = NULL, updated_at = {now} "
    "WHERE id = %(id)s" + FENCE
)

#: A claimed row as :data:`CLAIMED_ROWS` reads it, its value decoded: id, broadcast id,
#: instance id, observable, value, failed attempts so far, actor type, actor id, the
#: sequence of the message whose turn made the change.
ClaimedRow = tuple[int, str, int, str, Any, int, str, str, int]


def any_due(cursor: Any, dialect: Dialect) -> bool:
    cursor.execute(render(dialect, ANY_DUE), {})
    return cursor.fetchone() is not None


def due_candidates(cursor: Any, dialect: Dialect, limit: int) -> dict[int, int]:
    """``{row id: instance id}`` of up to ``limit`` due rows, locked."""
    cursor.execute(render(dialect, DUE_CANDIDATES), {"limit": limit})
    return {int(row_id): int(instance_id) for row_id, instance_id in cursor.fetchall()}


def unfinished_of_actors(
    cursor: Any, dialect: Dialect, instance_ids: Sequence[int], last_id: int
) -> list[tuple[int, int, bool]]:
    """``(instance id, row id, waiting for its retry)`` per unfinished row."""
    instances, params = in_list("instance", instance_ids)
    cursor.execute(
        render(dialect, UNFINISHED_OF_ACTORS, instances=instances),
        {**params, "last_id": last_id},
    )
    return [
        (int(instance_id), int(row_id), bool(int(retrying)))
        for instance_id, row_id, retrying in cursor.fetchall()
    ]


def mark_processing(cursor: Any, dialect: Dialect, process_id: str, ids: Sequence[int]) -> None:
    marks, params = in_list("id", ids)
    cursor.execute(
        render(dialect, MARK_PROCESSING, ids=marks), {**params, "process_id": process_id}
    )


def claimed_rows(cursor: Any, dialect: Dialect, ids: Sequence[int]) -> list[ClaimedRow]:
    marks, params = in_list("id", ids)
    cursor.execute(render(dialect, CLAIMED_ROWS, ids=marks), params)
    return [
        (
            int(row[0]),
            row[1],
            int(row[2]),
            row[3],
            payloads.decode(row[4]) if isinstance(row[4], str | bytes) else row[4],
            int(row[5]),
            row[6],
            row[7],
            int(row[8]),
        )
        for row in cursor.fetchall()
    ]


def follow_leader(
    cursor: Any,
    dialect: Dialect,
    ids: Sequence[int],
    leader: int,
    *,
    fenced_for: str | None = None,
) -> None:
    """Give ``ids`` back as pending, due when row ``leader`` is; with ``fenced_for``, only
    those still claimed by that process."""
    marks, params = in_list("id", ids)
    params["leader"] = leader
    fence = ""
    if fenced_for is not None:
        fence = FENCE
        params["process_id"] = fenced_for
    cursor.execute(render(dialect, FOLLOW_LEADER, ids=marks, fence=fence), params)


def mark_delivered(cursor: Any, dialect: Dialect, process_id: str, ids: Sequence[int]) -> None:
    marks, params = in_list("id", ids)
    cursor.execute(render(dialect, MARK_DELIVERED, ids=marks), {**params, "process_id": process_id})


def mark_failed(
    cursor: Any,
    dialect: Dialect,
    process_id: str,
    row_id: int,
    error: str,
    *,
    retry_in: float | None,
) -> None:
    """Record a failed delivery (``error``: JSON text): pending again ``retry_in`` seconds
    from now, or ``dead`` when ``retry_in`` is ``None``."""
    params: dict[str, Any] = {"id": row_id, "error": error, "process_id": process_id}
    if retry_in is None:
        cursor.execute(render(dialect, MARK_DEAD), params)
    else:
        params["retry_in"] = dialect.interval(retry_in)
        cursor.execute(render(dialect, MARK_RETRYING), params)
