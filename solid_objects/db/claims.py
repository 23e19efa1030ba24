"""Claiming a turn: "the claim query", and what recovery does with claims.

A claim moves the actor's lowest-sequence ready message (its *head*), if it is due, from
``ready_messages`` to ``claimed_messages`` under the lease's token and generation, and
counts the attempt on the history row, committed *before* the handler runs. Everywhere it
happens it is the same three parts: find the head, move it if due, count the attempt.
MySQL and SQLite run them as separate statements (:func:`claim_next`); PostgreSQL writes
them as the CTEs below, used alone (:func:`claim_next_postgresql`), behind the lease
(:func:`acquire_and_claim_postgresql`) and behind the fenced commit
(``fence.commit_group_postgresql``, which moves the claimed row in place).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .dialect import Dialect
from .leases import (
    FIRST_FREE_CANDIDATE_POSTGRESQL,
    LEASE_SETS,
    SKIP_LOCKED_CANDIDATE_POSTGRESQL,
    state_unless_cached,
)
from .rows import LeaseRow, MessageRow, lease_from_row, message_from_row
from .sql import in_list, render

#: The columns of a claimed message, of the history row ``m`` (see ``rows.message_from_row``).
MESSAGE_COLUMNS = (
    "m.id, m.sequence, m.operation, m.arguments{as_text}, m.delivery_mode, m.attempt_count, "
    "m.max_attempts, m.request_id, m.idempotency_key"
)

#: The same of the history row ``n`` (where ``m`` names another relation).
MESSAGE_COLUMNS_N = (
    "n.id, n.sequence, n.operation, n.arguments{as_text}, n.delivery_mode, n.attempt_count, "
    "n.max_attempts, n.request_id, n.idempotency_key"
)

# -- MySQL, SQLite: the claim in four statements, the head read with its message --------

#: The head of the actor's mailbox, whether it is due, and its message (as it is before
#: the claim counts the attempt).
HEAD = (
    "SELECT CASE WHEN r.available_at <= {now} THEN 1 ELSE 0 END, " + MESSAGE_COLUMNS + " "
    "FROM {t_ready} r JOIN {t_messages} m ON m.id = r.message_id "
    "WHERE r.instance_id = %(instance_id)s ORDER BY r.sequence LIMIT 1"
)

#: The head and the messages after it (``{not_followers}``: :data:`NOT_FOLLOWERS`, or
#: nothing), each with whether it is due: a claim and the next group's read-ahead in one
#: read.
HEAD_AND_AHEAD = (
    "SELECT CASE WHEN r.available_at <= {now} THEN 1 ELSE 0 END, " + MESSAGE_COLUMNS + " "
    "FROM {t_ready} r JOIN {t_messages} m ON m.id = r.message_id "
    "WHERE r.instance_id = %(instance_id)s{not_followers} ORDER BY r.sequence LIMIT %(limit)s"
)

#: The messages :data:`HEAD_AND_AHEAD` leaves out (``{ids}``: a group's followers, still in
#: ready until its commit deletes them).
NOT_FOLLOWERS = " AND r.message_id NOT IN ({ids})"

#: Take the head out of ready.
UNREADY = "DELETE FROM {t_ready} WHERE message_id = %(message_id)s"

#: Claim it under the lease.
INSERT_CLAIM = (
    "INSERT INTO {t_claimed} (message_id, instance_id, process_id, activation_token, "
    "activation_generation, claimed_at) VALUES (%(message_id)s, %(instance_id)s, "
    "%(owner_id)s, %(token)s, %(generation)s, {now})"
)

#: Count the attempt.
COUNT_ATTEMPT = (
    "UPDATE {t_messages} SET attempt_count = attempt_count + 1, started_at = {now}, "
    "updated_at = {now} WHERE id = %(message_id)s"
)


# -- PostgreSQL: the claim as three CTEs ----------------------------------------------------

#: Part 1: the head of the leased actor ``%(instance_id)s``.
HEAD_CTE_POSTGRESQL = (
    "head AS (SELECT h.id, h.available_at FROM {t_ready} h "
    "WHERE h.instance_id = %(instance_id)s ORDER BY h.sequence LIMIT 1)"
)

#: Part 1 behind a lease ``i`` taken by the same statement (none when a claimed row is left).
HEAD_OF_NEW_LEASE_CTE_POSTGRESQL = (
    "head AS (SELECT h.id, h.available_at FROM {t_ready} h, i "
    "WHERE h.instance_id = i.id AND NOT i.stale ORDER BY h.sequence LIMIT 1)"
)

#: Part 2: move the head out of ready, if it is due.
MOVE_HEAD_CTE_POSTGRESQL = (
    "moved AS (DELETE FROM {t_ready} x USING head WHERE x.id = head.id "
    "AND head.available_at <= {now} RETURNING x.message_id)"
)


#: Part 3: count the attempt of the message claimed (the relation ``cl``, the claimed row
#: just inserted, holds its id) and return the message.
COUNT_CLAIMED_ATTEMPT_POSTGRESQL = (
    "UPDATE {t_messages} n SET attempt_count = n.attempt_count + 1, started_at = {now}, "
    "updated_at = {now} FROM cl WHERE n.id = cl.message_id "
    "RETURNING " + MESSAGE_COLUMNS_N
)

#: Part 3 where the claimed row is moved in place (the relation ``moved``, the head taken
#: out of ready, holds the id: ``fence.COMMIT_GROUP_AND_CLAIM_POSTGRESQL``).
COUNT_MOVED_ATTEMPT_POSTGRESQL = (
    "UPDATE {t_messages} n SET attempt_count = n.attempt_count + 1, started_at = {now}, "
    "updated_at = {now} FROM moved WHERE n.id = moved.message_id "
    "RETURNING " + MESSAGE_COLUMNS_N
)


#: The claim of the next turn of a held lease, in one statement.
CLAIM_NEXT_POSTGRESQL = (
    "WITH " + HEAD_CTE_POSTGRESQL + ", " + MOVE_HEAD_CTE_POSTGRESQL + ", "
    "cl AS (INSERT INTO {t_claimed} (message_id, instance_id, process_id, activation_token, "
    "activation_generation, claimed_at) SELECT moved.message_id, %(instance_id)s, "
    "%(owner_id)s, %(token)s, %(generation)s, {now} FROM moved RETURNING message_id) "
    + COUNT_CLAIMED_ATTEMPT_POSTGRESQL
)

#: Part 1 behind the lease ``i`` of the known instance ``%(instance_id)s`` (none when a
#: claimed row is left): found by the id itself, a prepared plan walks the (instance,
#: sequence) index to the first row instead of sorting the mailbox.
HEAD_OF_HELD_LEASE_CTE_POSTGRESQL = (
    "head AS (SELECT h.id, h.available_at FROM {t_ready} h "
    "WHERE h.instance_id = %(instance_id)s AND EXISTS (SELECT 1 FROM i WHERE NOT i.stale) "
    "ORDER BY h.sequence LIMIT 1)"
)

#: The first claim behind a lease ``i`` the same statement took or locked (after its
#: ``head``), and whether another due message follows (so the group knows whether to
#: read ahead).
FIRST_CLAIM_BEHIND_HEAD_POSTGRESQL = (
    MOVE_HEAD_CTE_POSTGRESQL + ", "
    "cl AS (INSERT INTO {t_claimed} (message_id, instance_id, process_id, activation_token, "
    "activation_generation, claimed_at) SELECT moved.message_id, i.id, %(owner_id)s, "
    "%(token)s, i.activation_generation, {now} FROM moved, i RETURNING message_id), "
    "m AS (" + COUNT_CLAIMED_ATTEMPT_POSTGRESQL + ") "
    "SELECT i.id, i.actor_type, i.actor_id, i.state, i.state_version, i.state_revision, "
    "i.activation_generation, i.stale, m.*, "
    "(SELECT COUNT(*) FROM (SELECT 1 FROM {t_ready} d WHERE d.instance_id = i.id "
    "AND d.available_at <= {now} LIMIT 2) AS z) > (SELECT COUNT(*) FROM moved) "
    "FROM i LEFT JOIN m ON TRUE"
)

#: The lease's columns as the claim statements return them (``{state}``: the state unless
#: the cached revision is current).
LEASE_COLUMNS_I = (
    "i.id, i.actor_type, i.actor_id, {state} AS state, i.state_version, i.state_revision, "
    "i.activation_generation, EXISTS (SELECT 1 FROM {t_claimed} c WHERE c.instance_id = i.id) "
    "AS stale"
)

#: A lease and the claim of its first turn, in one autocommit statement.
ACQUIRE_AND_CLAIM_POSTGRESQL = (
    "WITH i AS (UPDATE {t_instances} AS i SET " + LEASE_SETS + " "
    "WHERE i.id = (" + FIRST_FREE_CANDIDATE_POSTGRESQL + ") "
    "RETURNING "
    + LEASE_COLUMNS_I
    + "), "
    + HEAD_OF_NEW_LEASE_CTE_POSTGRESQL
    + ", "
    + FIRST_CLAIM_BEHIND_HEAD_POSTGRESQL
)

#: The first claim of a lease taken by an earlier statement (a sync caller's enqueue took
#: it): the instance row locked while the lease, named by its owner and its token, is
#: still ours and unexpired; nothing when it is not.
CLAIM_HELD_POSTGRESQL = (
    "WITH i AS (SELECT " + LEASE_COLUMNS_I + " FROM {t_instances} i "
    "WHERE i.id = %(instance_id)s AND i.activation_owner_id = %(owner_id)s "
    "AND i.activation_token = %(token)s AND i.activation_expires_at > {now} FOR UPDATE), "
    + HEAD_OF_HELD_LEASE_CTE_POSTGRESQL
    + ", "
    + FIRST_CLAIM_BEHIND_HEAD_POSTGRESQL
)

# -- reading ahead and recovery -------------------------------------------------------------

#: The ready messages after a sequence, in order, and whether each is due.
PREFETCH = (
    "SELECT " + MESSAGE_COLUMNS + ", r.available_at <= {now} FROM {t_ready} r "
    "JOIN {t_messages} m ON m.id = r.message_id WHERE r.instance_id = %(instance_id)s "
    "AND r.sequence > %(after)s ORDER BY r.sequence LIMIT %(limit)s"
)

#: The claimed row a previous activation left, with its attempts.
STALE_CLAIM = (
    "SELECT c.message_id, m.attempt_count, m.max_attempts FROM {t_claimed} c "
    "JOIN {t_messages} m ON m.id = c.message_id WHERE c.instance_id = %(instance_id)s"
)

#: The claimed row of a lease's own token and its message: a claim the same activation made
#: in a statement whose reply was lost (a sync caller's enqueue that also claimed).
OWN_CLAIM = (
    "SELECT " + MESSAGE_COLUMNS + " FROM {t_claimed} c JOIN {t_messages} m "
    "ON m.id = c.message_id WHERE c.instance_id = %(instance_id)s "
    "AND c.activation_token = %(token)s"
)

#: Put a claimed message back to ready, due after a delay (then :data:`DELETE_CLAIM`).
REQUEUE = (
    "INSERT INTO {t_ready} (message_id, instance_id, sequence, available_at, created_at) "
    "SELECT id, instance_id, sequence, {later:delay}, {now} FROM {t_messages} "
    "WHERE id = %(message_id)s"
)

#: Delete a claimed row.
DELETE_CLAIM = (
    "DELETE FROM {t_claimed} WHERE instance_id = %(instance_id)s AND message_id = %(message_id)s"
)

#: Set a message's attempt count.
SET_ATTEMPTS = "UPDATE {t_messages} SET attempt_count = %(attempts)s WHERE id = %(message_id)s"

#: Take back one counted attempt.
UNCOUNT_ATTEMPT = (
    "UPDATE {t_messages} SET attempt_count = attempt_count - 1 "
    "WHERE id = %(message_id)s AND attempt_count > 0"
)


def _claim_params(lease: LeaseRow, **more: Any) -> dict[str, Any]:
    return {
        "instance_id": lease.instance_id,
        "owner_id": lease.owner_id,
        "token": lease.token,
        "generation": lease.generation,
        **more,
    }


def claim_next(dialect: Dialect, cursor: Any, lease: LeaseRow) -> MessageRow | None:
    """MySQL, SQLite: read the head with its message, then move it and count the attempt
    (the message read is the claimed one: only the lease holder, under the instance row
    lock, changes a ready or claimed message's row)."""
    cursor.execute(render(dialect, HEAD), {"instance_id": lease.instance_id})
    row = cursor.fetchone()
    if row is None or not int(row[0]):
        return None
    return _claim_read(dialect, cursor, lease, message_from_row(row[1:]))


def claim_and_read_ahead(
    dialect: Dialect, cursor: Any, lease: LeaseRow, read_ahead: int
) -> tuple[MessageRow | None, list[MessageRow]]:
    """MySQL, SQLite: :func:`claim_next`, the head read together with up to ``read_ahead``
    due messages after it (the first group's read-ahead, without a statement of its own)."""
    head, ahead = head_and_ahead(dialect, cursor, lease.instance_id, read_ahead)
    if head is None:
        return None, []
    return _claim_read(dialect, cursor, lease, head), ahead


def head_and_ahead(
    dialect: Dialect,
    cursor: Any,
    instance_id: int,
    read_ahead: int,
    leaving_out: Sequence[int] = (),
) -> tuple[MessageRow | None, list[MessageRow]]:
    """The actor's due head (``None`` if the head is not due) and up to ``read_ahead`` due
    messages after it, in order (the read stops at the first one not due), the messages
    ``leaving_out`` left out."""
    not_followers = ""
    params: dict[str, Any] = {}
    if leaving_out:
        marks, params = in_list("leaving_out", leaving_out)
        not_followers = render(dialect, NOT_FOLLOWERS, ids=marks)
    cursor.execute(
        render(dialect, HEAD_AND_AHEAD, not_followers=not_followers),
        {"instance_id": instance_id, "limit": read_ahead + 1, **params},
    )
    rows = cursor.fetchall()
    if not rows or not int(rows[0][0]):
        return None, []
    ahead: list[MessageRow] = []
    for row in rows[1:]:
        if not int(row[0]):
            break
        ahead.append(message_from_row(row[1:]))
    return message_from_row(rows[0][1:]), ahead


def _claim_read(dialect: Dialect, cursor: Any, lease: LeaseRow, message: MessageRow) -> MessageRow:
    """Claim the due head just read: out of ready, claimed under the lease, its attempt
    counted."""
    params = _claim_params(lease, message_id=message.id)
    cursor.execute(render(dialect, UNREADY), params)
    cursor.execute(render(dialect, INSERT_CLAIM), params)
    cursor.execute(render(dialect, COUNT_ATTEMPT), params)
    message.attempt_count += 1
    return message


def claim_next_postgresql(dialect: Dialect, cursor: Any, lease: LeaseRow) -> MessageRow | None:
    cursor.execute(render(dialect, CLAIM_NEXT_POSTGRESQL), _claim_params(lease))
    row = cursor.fetchone()
    return None if row is None else message_from_row(row)


def acquire_and_claim_postgresql(
    dialect: Dialect,
    cursor: Any,
    instance_ids: Sequence[int],
    *,
    owner_id: str,
    token: str,
    lease_seconds: float,
    cached: dict[int, int] | None = None,
) -> tuple[LeaseRow, MessageRow | None, bool] | None:
    if not instance_ids:
        return None
    state, state_params = state_unless_cached(dialect, "i", cached, instance_ids)
    cursor.execute(
        render(
            dialect,
            ACQUIRE_AND_CLAIM_POSTGRESQL,
            state=state,
            lock=SKIP_LOCKED_CANDIDATE_POSTGRESQL,
        ),
        {
            "owner_id": owner_id,
            "token": token,
            "lease": dialect.interval(lease_seconds),
            "ids": list(instance_ids),
            **state_params,
        },
    )
    row = cursor.fetchone()
    if row is None:
        return None
    return _lease_and_first(row, owner_id, token)


def claim_held_postgresql(
    dialect: Dialect,
    cursor: Any,
    instance_id: int,
    *,
    owner_id: str,
    token: str,
    cached: dict[int, int] | None = None,
) -> tuple[LeaseRow, MessageRow | None, bool] | None:
    state, state_params = state_unless_cached(dialect, "i", cached, [instance_id])
    cursor.execute(
        render(dialect, CLAIM_HELD_POSTGRESQL, state=state),
        {"instance_id": instance_id, "owner_id": owner_id, "token": token, **state_params},
    )
    row = cursor.fetchone()
    return None if row is None else _lease_and_first(row, owner_id, token)


def _lease_and_first(
    row: Sequence[Any], owner_id: str, token: str
) -> tuple[LeaseRow, MessageRow | None, bool]:
    """The lease, its claimed message and whether more is due, from a first-claim row."""
    lease = lease_from_row(row[:8], owner_id, token)
    message = None if row[8] is None else message_from_row(row[8:17])
    return lease, message, bool(row[17])


def prefetch(
    dialect: Dialect, cursor: Any, instance_id: int, after_sequence: int, limit: int
) -> list[MessageRow]:
    """Strict order: the read stops at the first message that is not due yet."""
    if limit <= 0:
        return []
    cursor.execute(
        render(dialect, PREFETCH),
        {"instance_id": instance_id, "after": after_sequence, "limit": limit},
    )
    rows: list[MessageRow] = []
    for row in cursor.fetchall():
        if not row[-1]:
            break
        rows.append(message_from_row(row))
    return rows


def stale_claim(dialect: Dialect, cursor: Any, instance_id: int) -> tuple[int, int, int] | None:
    cursor.execute(render(dialect, STALE_CLAIM), {"instance_id": instance_id})
    row = cursor.fetchone()
    return None if row is None else (int(row[0]), int(row[1]), int(row[2]))


def own_claim(dialect: Dialect, cursor: Any, instance_id: int, token: str) -> MessageRow | None:
    cursor.execute(render(dialect, OWN_CLAIM), {"instance_id": instance_id, "token": token})
    row = cursor.fetchone()
    return None if row is None else message_from_row(row)


def unclaim_to_ready(
    dialect: Dialect, cursor: Any, instance_id: int, message_id: int, delay_seconds: float = 0.0
) -> None:
    params = {
        "instance_id": instance_id,
        "message_id": message_id,
        "delay": dialect.interval(delay_seconds),
    }
    cursor.execute(render(dialect, REQUEUE), params)
    cursor.execute(render(dialect, DELETE_CLAIM), params)


def set_attempts(dialect: Dialect, cursor: Any, message_id: int, attempts: int) -> None:
    cursor.execute(render(dialect, SET_ATTEMPTS), {"message_id": message_id, "attempts": attempts})


def uncount_attempt(dialect: Dialect, cursor: Any, message_id: int) -> None:
    cursor.execute(render(dialect, UNCOUNT_ATTEMPT), {"message_id": message_id})
