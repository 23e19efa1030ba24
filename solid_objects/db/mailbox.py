"""Enqueue, statement by statement: allocate the actors' next sequences, insert the
messages and their ready memberships, find messages by their idempotency keys.

The sequences are taken on the instance row, whose lock (held until the enqueuing
transaction ends) serialises enqueues per actor. PostgreSQL does everything of one enqueue,
or of a whole batch, in one statement with data-modifying CTEs (:data:`APPEND_ONE_POSTGRESQL`,
:data:`APPEND_POSTGRESQL`), the mailbox limit included. SQLite creates-or-bumps the rows
with ``ON CONFLICT ... RETURNING``; MySQL bumps existing rows with one ``UPDATE`` and
serialises the creation of a new one with a named lock (see :func:`allocate_sequence_mysql`);
MariaDB reads the sequence back in the message's own ``INSERT ... RETURNING``.
"""

from __future__ import annotations

import hashlib
import logging
from datetime import datetime
from typing import Any

from ..payloads import compact
from .dialect import Dialect
from .leases import state_unless_cached
from .rows import (
    Appended,
    AppendedAndLeased,
    MailboxFullAt,
    MessageRow,
    NewMessage,
    lease_from_row,
)
from .sql import each, in_list, milliseconds, render

logger = logging.getLogger("solid_objects")

#: Longest wait for the creation lock of a new actor on MySQL (seconds); it is held only
#: while one creator's INSERT runs.
CREATION_LOCK_WAIT = 60

#: SQLite: create the instance row or take its next sequence, returning ``(id, sequence,
#: state_revision)``.
ALLOCATE_SEQUENCE_SQLITE = (
    "INSERT INTO {t_instances} (actor_type, actor_id, state, state_version, "
    "next_message_sequence, activation_generation, state_revision, created_at, updated_at) "
    "VALUES (%(actor_type)s, %(actor_id)s, '{{}}', %(state_version)s, 2, 0, 0, {now}, {now}) "
    "ON CONFLICT (actor_type, actor_id) DO UPDATE SET "
    "next_message_sequence = next_message_sequence + 1 "
    "RETURNING id, next_message_sequence - 1, state_revision"
)

#: MySQL: take the next sequence of an existing instance (its id into ``LAST_INSERT_ID``).
BUMP_SEQUENCE_MYSQL = (
    "UPDATE {t_instances} SET next_message_sequence = next_message_sequence + 1, "
    "id = LAST_INSERT_ID(id) WHERE actor_type = %(actor_type)s AND actor_id = %(actor_id)s"
)

#: MySQL: create the instance (or bump it, when another creator won meanwhile).
CREATE_INSTANCE_MYSQL = (
    "INSERT INTO {t_instances} (actor_type, actor_id, state, state_version, "
    "next_message_sequence, activation_generation, state_revision, created_at, updated_at) "
    "VALUES (%(actor_type)s, %(actor_id)s, '{{}}', %(state_version)s, 2, 0, 0, {now}, {now}) "
    "ON DUPLICATE KEY UPDATE next_message_sequence = next_message_sequence + 1, "
    "id = LAST_INSERT_ID(id)"
)

#: MySQL: take the named lock serialising the creation of one actor.
GET_CREATION_LOCK_MYSQL = "SELECT GET_LOCK(%(name)s, %(wait)s)"

#: MySQL: release it.
RELEASE_CREATION_LOCK_MYSQL = "SELECT RELEASE_LOCK(%(name)s)"

#: MySQL: the sequence just taken and the state revision, by id.
SEQUENCE_OF = (
    "SELECT next_message_sequence - 1, state_revision FROM {t_instances} WHERE id = %(id)s"
)

#: Insert the history row of a message (``{available_at}``: ``{now}`` or a parameter).
INSERT_MESSAGE = (
    "INSERT INTO {t_messages} (instance_id, actor_type, actor_id, operation, delivery_mode, "
    "arguments, sequence, attempt_count, max_attempts, request_id, idempotency_key, "
    "enqueued_at, available_at, created_at, updated_at) VALUES (%(instance_id)s, "
    "%(actor_type)s, %(actor_id)s, %(operation)s, %(delivery_mode)s, "
    "%(arguments)s{json_cast}, %(sequence)s, 0, %(max_attempts)s, %(request_id)s, "
    "%(idempotency_key)s, {now}, {available_at}, {now}, {now})"
)

#: MariaDB: the history row of the instance just bumped, taking the sequence from its row,
#: unless its mailbox is full (then no row: nothing inserted), returning ``(id, sequence)``.
INSERT_MESSAGE_RETURNING_MARIADB = (
    "INSERT INTO {t_messages} (instance_id, actor_type, actor_id, operation, delivery_mode, "
    "arguments, sequence, attempt_count, max_attempts, request_id, idempotency_key, "
    "enqueued_at, available_at, created_at, updated_at) SELECT id, %(actor_type)s, "
    "%(actor_id)s, %(operation)s, %(delivery_mode)s, %(arguments)s, "
    "next_message_sequence - 1, 0, %(max_attempts)s, %(request_id)s, %(idempotency_key)s, "
    "{now}, {available_at}, {now}, {now} FROM {t_instances} WHERE id = %(instance_id)s AND "
    "(next_message_sequence - 1 - state_revision <= %(cap)s OR "
    "(SELECT COUNT(*) FROM {t_ready} WHERE instance_id = %(instance_id)s) + "
    "(SELECT COUNT(*) FROM {t_claimed} WHERE instance_id = %(instance_id)s) < %(cap)s) "
    "RETURNING id, sequence"
)

#: Its ready membership (after :data:`INSERT_MESSAGE`, with the id it returned).
INSERT_READY = (
    "INSERT INTO {t_ready} (message_id, instance_id, sequence, available_at, created_at) "
    "VALUES (%(message_id)s, %(instance_id)s, %(sequence)s, {available_at}, {now})"
)

#: Messages in the mailbox (ready or claimed).
MAILBOX_LENGTH = (
    "SELECT (SELECT COUNT(*) FROM {t_ready} WHERE instance_id = %(instance_id)s) + "
    "(SELECT COUNT(*) FROM {t_claimed} WHERE instance_id = %(instance_id)s)"
)

#: A message by its request id: ``(id, sequence, instance_id)``.
FIND_MESSAGE_BY_REQUEST_ID = (
    "SELECT id, sequence, instance_id FROM {t_messages} WHERE request_id = %(request_id)s"
)

#: The message an actor was sent under an idempotency key.
FIND_MESSAGE_BY_KEY = (
    "SELECT m.id, m.request_id, m.sequence, m.operation, m.arguments{as_text}, "
    "m.delivery_mode, m.instance_id FROM {t_messages} m "
    "JOIN {t_instances} i ON i.id = m.instance_id "
    "WHERE i.actor_type = %(actor_type)s AND i.actor_id = %(actor_id)s "
    "AND m.idempotency_key = %(idempotency_key)s"
)


def allocate_sequence_sqlite(
    dialect: Dialect, cursor: Any, actor_type: str, actor_id: str, state_version: int
) -> tuple[int, int, int]:
    """One ``INSERT ... ON CONFLICT ... RETURNING``."""
    return _allocate_returning(
        dialect, cursor, ALLOCATE_SEQUENCE_SQLITE, actor_type, actor_id, state_version
    )


def _allocate_returning(
    dialect: Dialect,
    cursor: Any,
    template: str,
    actor_type: str,
    actor_id: str,
    state_version: int,
) -> tuple[int, int, int]:
    cursor.execute(
        render(dialect, template),
        {"actor_type": actor_type, "actor_id": actor_id, "state_version": state_version},
    )
    instance_id, sequence, revision = cursor.fetchone()
    return int(instance_id), int(sequence), int(revision)


def allocate_sequence_mysql(
    dialect: Dialect, cursor: Any, actor_type: str, actor_id: str, state_version: int
) -> tuple[int, int, int]:
    """An existing actor is one ``UPDATE`` (waiters queue on its record lock). Creating one
    is serialised by a named lock held only while the ``INSERT`` runs: InnoDB checks a
    duplicate key with a next-key lock, and when the creator that several sessions wait for
    rolls back, their locks become gap locks that block each other's inserts, a deadlock
    that would roll back a whole caller's transaction. With one waiter at a time on the new
    key there is no such cycle."""
    params = {"actor_type": actor_type, "actor_id": actor_id, "state_version": state_version}
    cursor.execute(render(dialect, BUMP_SEQUENCE_MYSQL), params)
    if cursor.rowcount != 1:
        created = _create_instance_mysql(dialect, cursor, params)
        if created is not None:
            return created
    instance_id = int(cursor.lastrowid)
    cursor.execute(render(dialect, SEQUENCE_OF), {"id": instance_id})
    sequence, revision = cursor.fetchone()
    return instance_id, int(sequence), int(revision)


def _create_instance_mysql(
    dialect: Dialect, cursor: Any, params: dict[str, Any]
) -> tuple[int, int, int] | None:
    """Create the instance under its creation lock: ``(id, 1, 0)``, or ``None`` when
    another creator won meanwhile (its row was bumped, its id is ``cursor.lastrowid``)."""
    actor_type, actor_id = params["actor_type"], params["actor_id"]
    name = _creation_lock(dialect, actor_type, actor_id)
    cursor.execute(
        render(dialect, GET_CREATION_LOCK_MYSQL), {"name": name, "wait": CREATION_LOCK_WAIT}
    )
    locked = cursor.fetchone()[0] == 1
    if not locked:
        logger.warning(
            "creation lock of %s/%s not acquired; inserting anyway", actor_type, actor_id
        )
    try:
        cursor.execute(render(dialect, CREATE_INSTANCE_MYSQL), params)
        created = cursor.rowcount == 1  # 2: another creator won meanwhile
    finally:
        if locked:
            cursor.execute(render(dialect, RELEASE_CREATION_LOCK_MYSQL), {"name": name})
            cursor.fetchone()
    return (int(cursor.lastrowid), 1, 0) if created else None


def _creation_lock(dialect: Dialect, actor_type: str, actor_id: str) -> str:
    """A server-wide lock name (at most 64 characters) for one actor of one database."""
    key = "\0".join(
        [str(dialect.connection.settings_dict["NAME"]), dialect.t_instances, actor_type, actor_id]
    )
    digest = hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()
    return "solid_objects:" + digest[:48]


def _message_params(
    dialect: Dialect, available_at: datetime | None, **values: Any
) -> tuple[str, dict[str, Any]]:
    """The ``{available_at}`` fragment and the parameters of a message's rows."""
    if available_at is None:
        return dialect.now, values
    return "%(available_at)s", {**values, "available_at": dialect.adapt_datetime(available_at)}


def insert_message(
    dialect: Dialect,
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
    """MySQL, SQLite: the history row, then its ready membership."""
    at_sql, params = _message_params(
        dialect,
        available_at,
        instance_id=instance_id,
        actor_type=actor_type,
        actor_id=actor_id,
        sequence=sequence,
        operation=operation,
        delivery_mode=delivery_mode,
        arguments=arguments,
        max_attempts=max_attempts,
        request_id=request_id,
        idempotency_key=idempotency_key,
    )
    cursor.execute(render(dialect, INSERT_MESSAGE, available_at=at_sql), params)
    message_id = int(cursor.lastrowid)
    ready = {"message_id": message_id, "instance_id": instance_id, "sequence": sequence}
    if available_at is not None:
        ready["available_at"] = params["available_at"]
    cursor.execute(render(dialect, INSERT_READY, available_at=at_sql), ready)
    return message_id


def append_message(dialect: Dialect, cursor: Any, message: NewMessage, cap: int) -> Appended:
    """One message: its sequence (``dialect.allocate_sequence``), the mailbox limit where
    it could be reached, the history row and its ready membership."""
    instance_id, sequence, revision = dialect.allocate_sequence(
        cursor, message.actor_type, message.actor_id, message.state_version
    )
    # Every message at or below state_revision has finished, so the mailbox holds at most
    # sequence - revision messages: count only when that could reach the cap.
    if sequence - revision > cap and dialect.mailbox_length(cursor, instance_id) >= cap:
        return MailboxFullAt(message.actor_type, message.actor_id)
    return [
        (
            _insert_history_row(dialect, cursor, message, instance_id, sequence),
            instance_id,
            sequence,
        )
    ]


def _insert_history_row(
    dialect: Dialect, cursor: Any, message: NewMessage, instance_id: int, sequence: int
) -> int:
    """The message's history row at ``sequence`` of ``instance_id``; its id."""
    return dialect.insert_message(
        cursor,
        instance_id=instance_id,
        actor_type=message.actor_type,
        actor_id=message.actor_id,
        sequence=sequence,
        operation=message.operation,
        delivery_mode=message.delivery_mode,
        arguments=message.arguments,
        max_attempts=message.max_attempts,
        request_id=message.request_id,
        idempotency_key=message.idempotency_key,
        available_at=message.available_at,
    )


def append_message_mysql(dialect: Dialect, cursor: Any, message: NewMessage, cap: int) -> Appended:
    """MariaDB (``INSERT ... RETURNING``), an existing actor: the bump, then the history
    row reading its sequence from the bumped row and checking the mailbox limit in the
    same statement, then the ready row (no read of the sequence between). A new actor, or
    MySQL: :func:`append_message`."""
    if not dialect.insert_returning:
        return append_message(dialect, cursor, message, cap)
    params = {
        "actor_type": message.actor_type,
        "actor_id": message.actor_id,
        "state_version": message.state_version,
    }
    cursor.execute(render(dialect, BUMP_SEQUENCE_MYSQL), params)
    if cursor.rowcount != 1:
        created = _create_instance_mysql(dialect, cursor, params)
        if created is None:  # another creator won: its row is bumped, ours to append to
            instance_id = int(cursor.lastrowid)
        else:
            instance_id, sequence, _ = created
            message_id = _insert_history_row(dialect, cursor, message, instance_id, sequence)
            return [(message_id, instance_id, sequence)]
    else:
        instance_id = int(cursor.lastrowid)
    at_sql, values = _message_params(
        dialect,
        message.available_at,
        instance_id=instance_id,
        actor_type=message.actor_type,
        actor_id=message.actor_id,
        operation=message.operation,
        delivery_mode=message.delivery_mode,
        arguments=message.arguments,
        max_attempts=message.max_attempts,
        request_id=message.request_id,
        idempotency_key=message.idempotency_key,
        cap=cap,
    )
    cursor.execute(render(dialect, INSERT_MESSAGE_RETURNING_MARIADB, available_at=at_sql), values)
    row = cursor.fetchone()
    if row is None:
        return MailboxFullAt(message.actor_type, message.actor_id)
    message_id, sequence = int(row[0]), int(row[1])
    ready = {"message_id": message_id, "instance_id": instance_id, "sequence": sequence}
    if message.available_at is not None:
        ready["available_at"] = values["available_at"]
    cursor.execute(render(dialect, INSERT_READY, available_at=at_sql), ready)
    return [(message_id, instance_id, sequence)]


def mailbox_length(dialect: Dialect, cursor: Any, instance_id: int) -> int:
    cursor.execute(render(dialect, MAILBOX_LENGTH), {"instance_id": instance_id})
    return int(cursor.fetchone()[0])


def find_message_by_request_id(
    dialect: Dialect, cursor: Any, request_id: str
) -> tuple[int, int, int] | None:
    cursor.execute(render(dialect, FIND_MESSAGE_BY_REQUEST_ID), {"request_id": request_id})
    row = cursor.fetchone()
    return None if row is None else (int(row[0]), int(row[1]), int(row[2]))


def find_message_by_key(
    dialect: Dialect, cursor: Any, actor_type: str, actor_id: str, idempotency_key: str
) -> tuple[Any, ...] | None:
    cursor.execute(
        render(dialect, FIND_MESSAGE_BY_KEY),
        {"actor_type": actor_type, "actor_id": actor_id, "idempotency_key": idempotency_key},
    )
    row = cursor.fetchone()
    return None if row is None else tuple(row)


# -- appending many messages at once (enqueue_many, and a single enqueue on PostgreSQL) -------
#: PostgreSQL: a whole batch in one statement. The instances are created or locked in key
#: order and take ``n`` sequences each, unless that would overfill the mailbox (the
#: ``WHERE`` of the conflict update: no row comes back, so none of its messages is
#: inserted); the messages take their sequences from the instance rows returned, and their
#: ready memberships follow. The actors are array parameters, the messages one JSON array
#: of arrays (their arguments embedded as they are), so the text never changes.
APPEND_POSTGRESQL = (
    "WITH a AS (SELECT * FROM unnest(%(types)s::text[], %(ids)s::text[], %(versions)s::int[], "
    "%(counts)s::bigint[]) AS a(actor_type, actor_id, state_version, n)), "
    "i AS (INSERT INTO {t_instances} AS i (actor_type, actor_id, state, state_version, "
    "next_message_sequence, activation_generation, state_revision, created_at, updated_at) "
    "SELECT actor_type, actor_id, '{{}}'::jsonb, state_version, n + 1, 0, 0, {now}, {now} "
    "FROM a ORDER BY actor_type, actor_id "
    "ON CONFLICT (actor_type, actor_id) DO UPDATE SET next_message_sequence = "
    "i.next_message_sequence + EXCLUDED.next_message_sequence - 1 "
    "WHERE CASE WHEN i.next_message_sequence + EXCLUDED.next_message_sequence - 2 "
    "- i.state_revision <= %(cap)s THEN true ELSE "
    "(SELECT COUNT(*) FROM {t_ready} WHERE instance_id = i.id) + "
    "(SELECT COUNT(*) FROM {t_claimed} WHERE instance_id = i.id) + "
    "EXCLUDED.next_message_sequence - 1 <= %(cap)s END "
    "RETURNING i.id, i.actor_type, i.actor_id, i.next_message_sequence), "
    "m AS (INSERT INTO {t_messages} (instance_id, actor_type, actor_id, operation, "
    "delivery_mode, arguments, sequence, attempt_count, max_attempts, request_id, "
    "idempotency_key, enqueued_at, available_at, created_at, updated_at) "
    "SELECT i.id, x.actor_type, x.actor_id, x.operation, x.delivery_mode, x.arguments, "
    "i.next_message_sequence - x.back, 0, x.max_attempts, x.request_id, x.idempotency_key, "
    "{now}, COALESCE(x.available_at, {now}), {now}, {now} "
    "FROM (SELECT e->0 AS arguments, e->>1 AS actor_type, e->>2 AS actor_id, "
    "e->>3 AS operation, e->>4 AS delivery_mode, (e->>5)::bigint AS back, "
    "(e->>6)::int AS max_attempts, e->>7 AS request_id, e->>8 AS idempotency_key, "
    "(e->>9)::timestamptz AS available_at "
    "FROM jsonb_array_elements(%(messages)s::jsonb) AS e) AS x "
    "JOIN i ON i.actor_type = x.actor_type AND i.actor_id = x.actor_id "
    "RETURNING id, instance_id, sequence, available_at, request_id), "
    "r AS (INSERT INTO {t_ready} (message_id, instance_id, sequence, available_at, created_at) "
    "SELECT id, instance_id, sequence, available_at, {now} FROM m) "
    "SELECT request_id, id, instance_id, sequence{notify} FROM m"
)

#: PostgreSQL: the mailbox limit of the instance row ``i`` an enqueue bumps (counted only
#: when the row's counters say the limit could be reached).
WITHIN_CAP_POSTGRESQL = (
    "CASE WHEN i.next_message_sequence - i.state_revision <= %(cap)s THEN true ELSE "
    "(SELECT COUNT(*) FROM {t_ready} WHERE instance_id = i.id) + "
    "(SELECT COUNT(*) FROM {t_claimed} WHERE instance_id = i.id) < %(cap)s END"
)

#: PostgreSQL: the history row and the ready row of one message behind the instance row
#: ``i`` (its ``id`` and ``sequence``), with plain parameters.
ONE_MESSAGE_CTES_POSTGRESQL = (
    "m AS (INSERT INTO {t_messages} (instance_id, actor_type, actor_id, operation, "
    "delivery_mode, arguments, sequence, attempt_count, max_attempts, request_id, "
    "idempotency_key, enqueued_at, available_at, created_at, updated_at) "
    "SELECT i.id, %(actor_type)s, %(actor_id)s, %(operation)s, %(delivery_mode)s, "
    "%(arguments)s::jsonb, i.sequence, 0, %(max_attempts)s, %(request_id)s, "
    "%(idempotency_key)s, {now}, COALESCE(%(available_at)s::timestamptz, {now}), {now}, "
    "{now} FROM i RETURNING id, instance_id, sequence, available_at), "
    "r AS (INSERT INTO {t_ready} (message_id, instance_id, sequence, available_at, created_at) "
    "SELECT id, instance_id, sequence, available_at, {now} FROM m)"
)

#: PostgreSQL: :data:`APPEND_POSTGRESQL` for one message, with plain parameters (a single
#: enqueue: cheaper to send than arrays).
APPEND_ONE_POSTGRESQL = (
    "WITH i AS (INSERT INTO {t_instances} AS i (actor_type, actor_id, state, state_version, "
    "next_message_sequence, activation_generation, state_revision, created_at, updated_at) "
    "VALUES (%(actor_type)s, %(actor_id)s, '{{}}', %(state_version)s, 2, 0, 0, {now}, {now}) "
    "ON CONFLICT (actor_type, actor_id) DO UPDATE SET "
    "next_message_sequence = i.next_message_sequence + 1 "
    "WHERE " + WITHIN_CAP_POSTGRESQL + " "
    "RETURNING i.id, i.next_message_sequence - 1 AS sequence), "
    + ONE_MESSAGE_CTES_POSTGRESQL
    + " SELECT id, instance_id, sequence{notify} FROM m"
)

#: PostgreSQL: the instance row ``i`` of an enqueue's conflict update, as it was before the
#: update, is free to lease: not paused, not leased or its lease expired.
FREE_BEFORE_UPDATE_POSTGRESQL = (
    "(i.paused_at IS NULL AND (i.activation_token IS NULL OR i.activation_expires_at <= {now}))"
)

#: PostgreSQL: the lease the enqueue of :data:`APPEND_AND_LEASE_ONE_POSTGRESQL` takes when
#: the row is free (:data:`FREE_BEFORE_UPDATE_POSTGRESQL`), column by column.
LEASE_IF_FREE_POSTGRESQL = (
    "activation_owner_id = CASE WHEN "
    + FREE_BEFORE_UPDATE_POSTGRESQL
    + " THEN %(owner_id)s ELSE i.activation_owner_id END, "
    "activation_token = CASE WHEN "
    + FREE_BEFORE_UPDATE_POSTGRESQL
    + " THEN %(token)s ELSE i.activation_token END, "
    "activation_expires_at = CASE WHEN "
    + FREE_BEFORE_UPDATE_POSTGRESQL
    + " THEN {later:lease} ELSE i.activation_expires_at END, "
    "activation_generation = i.activation_generation + CASE WHEN "
    + FREE_BEFORE_UPDATE_POSTGRESQL
    + " THEN 1 ELSE 0 END, "
    "activated_at = CASE WHEN "
    + FREE_BEFORE_UPDATE_POSTGRESQL
    + " THEN {now} ELSE i.activated_at END, "
    "last_claimed_at = CASE WHEN "
    + FREE_BEFORE_UPDATE_POSTGRESQL
    + " THEN {now} ELSE i.last_claimed_at END"
)

#: PostgreSQL, a sync caller's enqueue as one autocommit statement: the message as
#: :data:`APPEND_ONE_POSTGRESQL` appends it, and the actor's lease taken for the caller if
#: it is free, decided on the instance row the statement locks (exact: no other statement
#: is between). The lock wait is bounded by ``%(wait)s``: ``lock_timeout`` is set in the
#: statement's own transaction by the row source of the insert, which the executor reads
#: before it inserts the row or waits for the conflicting one. Workers are woken only when
#: the caller did not take the lease.
#:
#: When the caller took the lease and its message is the actor's next turn, the statement
#: also claims it (``direct``): the message is inserted with its attempt counted and a
#: claimed row instead of a ready one, as the first claim would (one round trip and one
#: commit fewer). "Next" is decided on the locked row, never on the statement's snapshot:
#: the new sequence follows the state revision (the sequence of the last turn that changed
#: the state), so every earlier message is final; an enqueue committed while this one
#: waited for the row lock has a lower sequence and makes the test fail, as does any
#: earlier message still pending, a claim left by a dead activation, a query or a turn
#: that changed nothing since the last state change (then the claim is its own statement,
#: ``take_up``). ``{state}``: the state, unless the caller's cached revision is current.
APPEND_AND_LEASE_ONE_POSTGRESQL = (
    "WITH w AS MATERIALIZED (SELECT set_config('lock_timeout', %(wait)s, true) AS w), "
    "u AS (INSERT INTO {t_instances} AS i (actor_type, actor_id, state, state_version, "
    "next_message_sequence, activation_generation, state_revision, created_at, updated_at, "
    "activation_owner_id, activation_token, activation_expires_at, activated_at, "
    "last_claimed_at) "
    "SELECT %(actor_type)s, %(actor_id)s, '{{}}', %(state_version)s, 2, 1, 0, {now}, {now}, "
    "%(owner_id)s, %(token)s, {later:lease}, {now}, {now} FROM w "
    "ON CONFLICT (actor_type, actor_id) DO UPDATE SET "
    "next_message_sequence = i.next_message_sequence + 1, "
    + LEASE_IF_FREE_POSTGRESQL
    + " WHERE "
    + WITHIN_CAP_POSTGRESQL
    + " "
    "RETURNING i.id, i.next_message_sequence - 1 AS sequence, "
    "CASE WHEN i.activation_token = %(token)s THEN i.activation_generation END AS leased, "
    "i.state_revision, i.state_version, {state} AS state), "
    "i AS (SELECT u.*, u.leased IS NOT NULL AND u.sequence = u.state_revision + 1 "
    "AND %(available_at)s::timestamptz IS NULL AS direct FROM u), "
    "m AS (INSERT INTO {t_messages} (instance_id, actor_type, actor_id, operation, "
    "delivery_mode, arguments, sequence, attempt_count, max_attempts, request_id, "
    "idempotency_key, enqueued_at, available_at, started_at, created_at, updated_at) "
    "SELECT i.id, %(actor_type)s, %(actor_id)s, %(operation)s, %(delivery_mode)s, "
    "%(arguments)s::jsonb, i.sequence, CASE WHEN i.direct THEN 1 ELSE 0 END, "
    "%(max_attempts)s, %(request_id)s, %(idempotency_key)s, {now}, "
    "COALESCE(%(available_at)s::timestamptz, {now}), CASE WHEN i.direct THEN {now} END, "
    "{now}, {now} FROM i RETURNING id, instance_id, sequence, available_at), "
    "r AS (INSERT INTO {t_ready} (message_id, instance_id, sequence, available_at, created_at) "
    "SELECT m.id, m.instance_id, m.sequence, m.available_at, {now} FROM m, i "
    "WHERE NOT i.direct), "
    "cl AS (INSERT INTO {t_claimed} (message_id, instance_id, process_id, activation_token, "
    "activation_generation, claimed_at) SELECT m.id, i.id, %(owner_id)s, %(token)s, "
    "i.leased, {now} FROM m, i WHERE i.direct) "
    "SELECT m.id, m.instance_id, m.sequence, i.leased, i.direct, i.state, i.state_version, "
    "i.state_revision{notify} FROM m, i"
)

#: The ``NOTIFY`` of :data:`APPEND_AND_LEASE_ONE_POSTGRESQL`: only when the caller did not
#: take the lease (an uncorrelated subquery is run when first needed, and at most once).
NOTIFY_WORK_UNLESS_LEASED = (
    ", CASE WHEN i.leased IS NULL THEN (SELECT pg_notify(%(channel)s, '')) END"
)

#: The ``NOTIFY`` of :data:`APPEND_POSTGRESQL`, sent once per statement (an uncorrelated
#: subquery runs once).
NOTIFY_WORK_ONCE = ", (SELECT pg_notify(%(channel)s, ''))"

#: SQLite: create the instances or take ``n`` sequences each (``{rows}``: one
#: :data:`INSTANCE_ROW` per actor).
ALLOCATE_SEQUENCES_SQLITE = (
    "INSERT INTO {t_instances} (actor_type, actor_id, state, state_version, "
    "next_message_sequence, activation_generation, state_revision, created_at, updated_at) "
    "VALUES {rows} ON CONFLICT (actor_type, actor_id) DO UPDATE SET "
    "next_message_sequence = next_message_sequence + excluded.next_message_sequence - 1 "
    "RETURNING id, actor_type, actor_id, next_message_sequence, state_revision"
)

#: MySQL: take ``n`` sequences of each existing instance (``{cases}``: one
#: :data:`ACTOR_COUNT_WHEN` per actor; ``{keys}``: the actors, :data:`ACTOR_KEY` ORed).
BUMP_SEQUENCES_MYSQL = (
    "UPDATE {t_instances} SET next_message_sequence = next_message_sequence + "
    "CASE {cases} END WHERE {keys}"
)

#: One actor of a list, by its parameters ``type_N`` and ``id_N`` (``{n}``: its index).
ACTOR_KEY = "(actor_type = %(type_{n})s AND actor_id = %(id_{n})s)"

#: The sequences one actor of :data:`BUMP_SEQUENCES_MYSQL` takes (``count_N``).
ACTOR_COUNT_WHEN = "WHEN actor_type = %(type_{n})s AND actor_id = %(id_{n})s THEN %(count_{n})s"

#: MySQL: the instances of some actors, after :data:`BUMP_SEQUENCES_MYSQL`.
SEQUENCES_OF_MYSQL = (
    "SELECT id, actor_type, actor_id, next_message_sequence, state_revision "
    "FROM {t_instances} WHERE {keys}"
)

#: MySQL: create instances (or bump them, where another creator won meanwhile;
#: ``{rows}``: one :data:`INSTANCE_ROW` per actor).
CREATE_INSTANCES_MYSQL = (
    "INSERT INTO {t_instances} (actor_type, actor_id, state, state_version, "
    "next_message_sequence, activation_generation, state_revision, created_at, updated_at) "
    "VALUES {rows} ON DUPLICATE KEY UPDATE next_message_sequence = "
    "next_message_sequence + VALUES(next_message_sequence) - 1"
)

#: One new instance of a multi-row ``VALUES`` list: ``actor_type, actor_id, state_version,
#: next_message_sequence``. Positional parameters: a multi-row ``VALUES`` list of up to
#: :attr:`~solid_objects.db.dialect.Dialect.append_batch` actors, where naming every
#: parameter of every row would only lengthen the text.
INSTANCE_ROW = "(%s, %s, '{{}}', %s, %s, 0, 0, {now}, {now})"

#: MySQL: the creation locks of several new actors in one statement (``{locks}``: one
#: :data:`GET_LOCK_MYSQL` per name, in name order).
GET_CREATION_LOCKS_MYSQL = "SELECT {locks}"

#: One named lock of :data:`GET_CREATION_LOCKS_MYSQL` (``lock_N``; ``wait``: seconds).
GET_LOCK_MYSQL = "GET_LOCK(%(lock_{n})s, %(wait)s)"

#: MySQL: release the creation locks taken (``{locks}``: one :data:`RELEASE_LOCK_MYSQL`
#: per name).
RELEASE_CREATION_LOCKS_MYSQL = "SELECT {locks}"

#: One named lock of :data:`RELEASE_CREATION_LOCKS_MYSQL`.
RELEASE_LOCK_MYSQL = "RELEASE_LOCK(%(lock_{n})s)"

#: Ready and claimed messages per instance (``{ids}``: the instance ids).
MAILBOX_LENGTHS = (
    "SELECT instance_id, COUNT(*) FROM (SELECT instance_id FROM {t_ready} WHERE instance_id "
    "IN ({ids}) UNION ALL SELECT instance_id FROM {t_claimed} WHERE instance_id IN ({ids})) "
    "c GROUP BY instance_id"
)

#: Many history rows (``{rows}``: one :data:`MESSAGE_ROW` or :data:`MESSAGE_ROW_AT` per
#: message; ``{returning}``: :data:`RETURNING_REQUEST_IDS` where the database returns rows
#: from an ``INSERT``, else nothing).
INSERT_MESSAGES = (
    "INSERT INTO {t_messages} (instance_id, actor_type, actor_id, operation, delivery_mode, "
    "arguments, sequence, attempt_count, max_attempts, request_id, idempotency_key, "
    "enqueued_at, available_at, created_at, updated_at) VALUES {rows}{returning}"
)

#: One history row of :data:`INSERT_MESSAGES`, due now: ``instance_id, actor_type, actor_id,
#: operation, delivery_mode, arguments, sequence, max_attempts, request_id,
#: idempotency_key``. Positional parameters: a multi-row ``VALUES`` list of up to
#: :attr:`~solid_objects.db.dialect.Dialect.append_batch` messages, ten parameters each
#: (named ones would only lengthen the text of the largest enqueue statement).
MESSAGE_ROW = "(%s, %s, %s, %s, %s, %s, %s, 0, %s, %s, %s, {now}, {now}, {now}, {now})"

#: :data:`MESSAGE_ROW` due at a time given (``available_at``, the eleventh parameter).
MESSAGE_ROW_AT = "(%s, %s, %s, %s, %s, %s, %s, 0, %s, %s, %s, {now}, %s, {now}, {now})"

#: What :data:`INSERT_MESSAGES` returns where it can: each request id with its message id.
RETURNING_REQUEST_IDS = " RETURNING request_id, id"

#: MySQL: the ids of the messages just inserted, by their request ids.
MESSAGE_IDS = "SELECT request_id, id FROM {t_messages} WHERE request_id IN ({request_ids})"

#: Many ready memberships (``{rows}``: one :data:`READY_ROW` or :data:`READY_ROW_AT` each).
INSERT_READY_ROWS = (
    "INSERT INTO {t_ready} (message_id, instance_id, sequence, available_at, created_at) "
    "VALUES {rows}"
)

#: One ready membership of :data:`INSERT_READY_ROWS`, due now: ``message_id, instance_id,
#: sequence`` (positional, as :data:`MESSAGE_ROW`).
READY_ROW = "(%s, %s, %s, {now}, {now})"

#: :data:`READY_ROW` due at a time given (``available_at``, the fourth parameter).
READY_ROW_AT = "(%s, %s, %s, %s, {now})"

#: The messages sent under some idempotency keys (``{keys}``: :data:`MESSAGE_KEY` per
#: key, ORed).
FIND_MESSAGES_BY_KEYS = (
    "SELECT i.actor_type, i.actor_id, m.idempotency_key, m.id, m.request_id, m.sequence, "
    "m.operation, m.arguments{as_text}, m.delivery_mode, m.instance_id FROM {t_messages} m "
    "JOIN {t_instances} i ON i.id = m.instance_id WHERE {keys}"
)

#: One key of :data:`FIND_MESSAGES_BY_KEYS` (``type_N``, ``id_N``, ``key_N``).
MESSAGE_KEY = (
    "(i.actor_type = %(type_{n})s AND i.actor_id = %(id_{n})s AND m.idempotency_key = %(key_{n})s)"
)

#: Idempotency keys looked up per statement (three parameters each).
KEYS_PER_LOOKUP = 300

ActorKey = tuple[str, str]


def _actors(messages: list[NewMessage]) -> dict[ActorKey, list[int]]:
    """``{(actor_type, actor_id): [state_version, count]}`` in order of first appearance."""
    actors: dict[ActorKey, list[int]] = {}
    for message in messages:
        entry = actors.setdefault(
            (message.actor_type, message.actor_id), [message.state_version, 0]
        )
        entry[1] += 1
    return actors


def _backs(messages: list[NewMessage], actors: dict[ActorKey, list[int]]) -> list[int]:
    """Per message, how far below its actor's new ``next_message_sequence`` its sequence
    is (the last message of an actor: 1)."""
    left = {key: count for key, (_, count) in actors.items()}
    backs = []
    for message in messages:
        key = (message.actor_type, message.actor_id)
        backs.append(left[key])
        left[key] -= 1
    return backs


def append_messages_postgresql(
    dialect: Dialect,
    cursor: Any,
    messages: list[NewMessage],
    cap: int,
    notify_channel: str | None = None,
) -> Appended:
    """The whole batch in one statement (:data:`APPEND_POSTGRESQL`); ``notify_channel``:
    hint the workers on commit."""
    actors = _actors(messages)
    params: dict[str, Any] = {
        "types": [key[0] for key in actors],
        "ids": [key[1] for key in actors],
        "versions": [version for version, _ in actors.values()],
        "counts": [count for _, count in actors.values()],
        "cap": cap,
        "messages": _messages_json(messages, _backs(messages, actors)),
    }
    notify = ""
    if notify_channel is not None:
        notify = NOTIFY_WORK_ONCE
        params["channel"] = notify_channel
    cursor.execute(render(dialect, APPEND_POSTGRESQL, notify=notify), params)
    rows = {row[0]: row[1:4] for row in cursor.fetchall()}
    appended = []
    for message in messages:
        row = rows.get(message.request_id)
        if row is None:
            return MailboxFullAt(message.actor_type, message.actor_id)
        appended.append((int(row[0]), int(row[1]), int(row[2])))
    return appended


def _one_message_params(message: NewMessage, cap: int) -> dict[str, Any]:
    """The plain parameters of :data:`ONE_MESSAGE_CTES_POSTGRESQL` and the mailbox limit."""
    return {
        "actor_type": message.actor_type,
        "actor_id": message.actor_id,
        "state_version": message.state_version,
        "cap": cap,
        "operation": message.operation,
        "delivery_mode": message.delivery_mode,
        "arguments": message.arguments,
        "max_attempts": message.max_attempts,
        "request_id": message.request_id,
        "idempotency_key": message.idempotency_key,
        "available_at": message.available_at,
    }


def append_message_postgresql(
    dialect: Dialect,
    cursor: Any,
    message: NewMessage,
    cap: int,
    notify_channel: str | None = None,
) -> Appended:
    """One message in one statement (:data:`APPEND_ONE_POSTGRESQL`)."""
    params = _one_message_params(message, cap)
    notify = ""
    if notify_channel is not None:
        notify = NOTIFY_WORK_ONCE
        params["channel"] = notify_channel
    cursor.execute(render(dialect, APPEND_ONE_POSTGRESQL, notify=notify), params)
    row = cursor.fetchone()
    if row is None:
        return MailboxFullAt(message.actor_type, message.actor_id)
    return [(int(row[0]), int(row[1]), int(row[2]))]


def append_and_lease_postgresql(
    dialect: Dialect,
    cursor: Any,
    message: NewMessage,
    cap: int,
    *,
    lock_wait: float | None,
    owner_id: str,
    token: str,
    lease_seconds: float,
    notify_channel: str | None = None,
    cached: tuple[int, int] | None = None,
) -> AppendedAndLeased | MailboxFullAt:
    """One message and, if it is free, the actor's lease (and when the message is the
    actor's next turn, its claim), in one statement (:data:`APPEND_AND_LEASE_ONE_POSTGRESQL`).
    ``lock_wait``: seconds (``None``: no bound). ``cached``: ``(instance id, state
    revision)`` this process keeps warm for the actor, so a current state is not sent."""
    params = {
        **_one_message_params(message, cap),
        "wait": "0" if lock_wait is None else milliseconds(lock_wait),
        "owner_id": owner_id,
        "token": token,
        "lease": dialect.interval(lease_seconds),
    }
    notify = ""
    if notify_channel is not None:
        notify = NOTIFY_WORK_UNLESS_LEASED
        params["channel"] = notify_channel
    warm = dict([cached]) if cached is not None else {}
    state, state_params = state_unless_cached(dialect, "i", warm, list(warm))
    params.update(state_params)
    cursor.execute(
        render(dialect, APPEND_AND_LEASE_ONE_POSTGRESQL, notify=notify, state=state), params
    )
    row = cursor.fetchone()
    if row is None:
        return MailboxFullAt(message.actor_type, message.actor_id)
    message_id, instance_id, sequence = int(row[0]), int(row[1]), int(row[2])
    generation = None if row[3] is None else int(row[3])
    claimed = None
    if row[4]:
        assert generation is not None  # a direct claim is made under the lease just taken
        lease = lease_from_row(
            (instance_id, message.actor_type, message.actor_id, *row[5:8], generation, False),
            owner_id,
            token,
        )
        first = MessageRow(
            id=message_id,
            sequence=sequence,
            operation=message.operation,
            arguments=message.arguments,
            delivery_mode=message.delivery_mode,
            attempt_count=1,
            max_attempts=message.max_attempts,
            request_id=message.request_id,
            idempotency_key=message.idempotency_key,
        )
        claimed = (lease, first)
    return AppendedAndLeased(message_id, instance_id, sequence, generation, claimed)


def _messages_json(messages: list[NewMessage], backs: list[int]) -> str:
    """The messages of :data:`APPEND_POSTGRESQL` as one JSON array of arrays, each
    ``[arguments, actor_type, actor_id, ...]`` (the arguments are JSON text already
    validated: they go in as they are, the rest through one :func:`payloads.compact` per
    message)."""
    dumps = compact
    return (
        "["
        + ",".join(
            "["
            + m.arguments
            + ","
            + dumps(
                [
                    m.actor_type,
                    m.actor_id,
                    m.operation,
                    m.delivery_mode,
                    back,
                    m.max_attempts,
                    m.request_id,
                    m.idempotency_key,
                    None if m.available_at is None else m.available_at.isoformat(),
                ]
            )[1:]
            for m, back in zip(messages, backs, strict=True)
        )
        + "]"
    )


def _instance_rows(
    dialect: Dialect, actors: dict[ActorKey, list[int]], keys: list[ActorKey]
) -> tuple[str, list[Any]]:
    """The ``{rows}`` of ``keys``' new instances (:data:`INSTANCE_ROW`) and their parameters."""
    params: list[Any] = []
    for key in keys:
        version, count = actors[key]
        params += [key[0], key[1], version, count + 1]
    return each(dialect, INSTANCE_ROW, len(keys)), params


def _keys(dialect: Dialect, keys: list[ActorKey]) -> tuple[str, dict[str, Any]]:
    """The ``{keys}`` naming some actors (:data:`ACTOR_KEY` ORed) and their parameters."""
    params: dict[str, Any] = {}
    for n, (actor_type, actor_id) in enumerate(keys):
        params[f"type_{n}"] = actor_type
        params[f"id_{n}"] = actor_id
    return each(dialect, ACTOR_KEY, len(keys), " OR "), params


def allocate_sequences_sqlite(
    dialect: Dialect, cursor: Any, actors: dict[ActorKey, list[int]]
) -> dict[ActorKey, tuple[int, int, int]]:
    """``{actor: (instance_id, next_message_sequence, state_revision)}`` after taking each
    actor's ``count`` sequences, in one upsert."""
    rows, params = _instance_rows(dialect, actors, list(actors))
    cursor.execute(render(dialect, ALLOCATE_SEQUENCES_SQLITE, rows=rows), params)
    return {(t, a): (int(i), int(n), int(r)) for i, t, a, n, r in cursor.fetchall()}


def allocate_sequences_mysql(
    dialect: Dialect, cursor: Any, actors: dict[ActorKey, list[int]]
) -> dict[ActorKey, tuple[int, int, int]]:
    """Existing actors: one ``UPDATE`` and one read. New ones are created under their named
    creation locks (see :func:`allocate_sequence_mysql`), all taken in one statement in
    name order (so two batches never wait for each other's), released once inserted."""
    keys = sorted(actors)
    where, params = _keys(dialect, keys)
    for n, key in enumerate(keys):
        params[f"count_{n}"] = actors[key][1]
    cases = each(dialect, ACTOR_COUNT_WHEN, len(keys), " ")
    cursor.execute(render(dialect, BUMP_SEQUENCES_MYSQL, cases=cases, keys=where), params)
    found = _sequences_of_mysql(dialect, cursor, keys) if cursor.rowcount else {}
    missing = [key for key in keys if key not in found]
    if missing:
        names = sorted(_creation_lock(dialect, key[0], key[1]) for key in missing)
        lock_params: dict[str, Any] = {f"lock_{n}": name for n, name in enumerate(names)}
        locks = each(dialect, GET_LOCK_MYSQL, len(names))
        cursor.execute(
            render(dialect, GET_CREATION_LOCKS_MYSQL, locks=locks),
            {**lock_params, "wait": CREATION_LOCK_WAIT},
        )
        locked = [name for name, ok in zip(names, cursor.fetchone(), strict=True) if ok == 1]
        if len(locked) < len(names):
            logger.warning(
                "creation locks of %d actors not acquired; inserting anyway",
                len(names) - len(locked),
            )
        try:
            rows, row_params = _instance_rows(dialect, actors, missing)
            cursor.execute(render(dialect, CREATE_INSTANCES_MYSQL, rows=rows), row_params)
        finally:
            if locked:
                releases = each(dialect, RELEASE_LOCK_MYSQL, len(locked))
                cursor.execute(
                    render(dialect, RELEASE_CREATION_LOCKS_MYSQL, locks=releases),
                    {f"lock_{n}": name for n, name in enumerate(locked)},
                )
                cursor.fetchone()
        found.update(_sequences_of_mysql(dialect, cursor, missing))
    return found


def _sequences_of_mysql(
    dialect: Dialect, cursor: Any, keys: list[ActorKey]
) -> dict[ActorKey, tuple[int, int, int]]:
    where, params = _keys(dialect, keys)
    cursor.execute(render(dialect, SEQUENCES_OF_MYSQL, keys=where), params)
    return {(t, a): (int(i), int(n), int(r)) for i, t, a, n, r in cursor.fetchall()}


def _mailbox_lengths(dialect: Dialect, cursor: Any, instance_ids: list[int]) -> dict[int, int]:
    ids, params = in_list("id", instance_ids)
    cursor.execute(render(dialect, MAILBOX_LENGTHS, ids=ids), params)
    return {int(instance_id): int(count) for instance_id, count in cursor.fetchall()}


def append_messages(
    dialect: Dialect, cursor: Any, messages: list[NewMessage], cap: int
) -> Appended:
    """MySQL, SQLite: the instances (``dialect.allocate_sequences``), the mailbox limit
    where it could be reached (one count for those actors), the history rows in one
    ``INSERT`` (their ids by ``RETURNING`` on SQLite, read back by request id on MySQL),
    then the ready rows in one ``INSERT``."""
    actors = _actors(messages)
    allocated = dialect.allocate_sequences(cursor, actors)
    crowded = [
        key for key, (_, count) in actors.items() if allocated[key][1] - 1 - allocated[key][2] > cap
    ]
    if crowded:
        lengths = _mailbox_lengths(dialect, cursor, [allocated[key][0] for key in crowded])
        for key in crowded:
            if lengths.get(allocated[key][0], 0) + actors[key][1] > cap:
                return MailboxFullAt(*key)
    message_row, message_row_at = render(dialect, MESSAGE_ROW), render(dialect, MESSAGE_ROW_AT)
    rows, params, placed = [], [], []
    for message, back in zip(messages, _backs(messages, actors), strict=True):
        instance_id, next_sequence, _ = allocated[(message.actor_type, message.actor_id)]
        sequence = next_sequence - back
        values = [
            instance_id,
            message.actor_type,
            message.actor_id,
            message.operation,
            message.delivery_mode,
            message.arguments,
            sequence,
            message.max_attempts,
            message.request_id,
            message.idempotency_key,
        ]
        if message.available_at is None:
            rows.append(message_row)
        else:
            rows.append(message_row_at)
            values.append(dialect.adapt_datetime(message.available_at))
        params += values
        placed.append((instance_id, sequence, values[10:]))
    returning = RETURNING_REQUEST_IDS if dialect.insert_returning else ""
    cursor.execute(
        render(dialect, INSERT_MESSAGES, rows=", ".join(rows), returning=returning), params
    )
    if not dialect.insert_returning:
        request_ids, id_params = in_list("r", [m.request_id for m in messages])
        cursor.execute(render(dialect, MESSAGE_IDS, request_ids=request_ids), id_params)
    ids = {request_id: int(message_id) for request_id, message_id in cursor.fetchall()}
    ready_row, ready_row_at = render(dialect, READY_ROW), render(dialect, READY_ROW_AT)
    rows, params, appended = [], [], []
    for message, (instance_id, sequence, at_params) in zip(messages, placed, strict=True):
        message_id = ids[message.request_id]
        rows.append(ready_row_at if at_params else ready_row)
        params += [message_id, instance_id, sequence, *at_params]
        appended.append((message_id, instance_id, sequence))
    cursor.execute(render(dialect, INSERT_READY_ROWS, rows=", ".join(rows)), params)
    return appended


def find_messages_by_keys(
    dialect: Dialect, cursor: Any, keys: list[tuple[str, str, str]]
) -> dict[tuple[str, str, str], tuple[Any, ...]]:
    """``{(actor_type, actor_id, key): (id, request_id, sequence, operation, arguments,
    delivery_mode, instance_id)}`` of the messages already sent under these keys."""
    found: dict[tuple[str, str, str], tuple[Any, ...]] = {}
    for start in range(0, len(keys), KEYS_PER_LOOKUP):
        chunk = keys[start : start + KEYS_PER_LOOKUP]
        params: dict[str, Any] = {}
        for n, (actor_type, actor_id, key) in enumerate(chunk):
            params.update({f"type_{n}": actor_type, f"id_{n}": actor_id, f"key_{n}": key})
        where = each(dialect, MESSAGE_KEY, len(chunk), " OR ")
        cursor.execute(render(dialect, FIND_MESSAGES_BY_KEYS, keys=where), params)
        for row in cursor.fetchall():
            found[(row[0], row[1], row[2])] = tuple(row[3:])
    return found
