"""Enqueue, statement by statement: allocate the actor's next sequence, insert the message
and its ready membership, find a message by its idempotency key.

The sequence is taken on the instance row, whose lock (held until the enqueuing
transaction ends) serialises enqueues per actor. PostgreSQL and SQLite create-or-bump the
row with ``ON CONFLICT ... RETURNING``; MySQL bumps an existing row with one ``UPDATE`` and
serialises the creation of a new one with a named lock (see :func:`allocate_sequence_mysql`).
"""

from __future__ import annotations

import hashlib
import logging
from datetime import datetime
from typing import Any

from .dialect import Dialect
from .sql import render

logger = logging.getLogger("solid_objects")

#: Longest wait for the creation lock of a new actor on MySQL (seconds); it is held only
#: while one creator's INSERT runs.
CREATION_LOCK_WAIT = 60

#: Create the instance row or take its next sequence, returning ``(id, sequence,
#: state_revision)`` (PostgreSQL: the conflict target is updated through its alias).
ALLOCATE_SEQUENCE_POSTGRESQL = (
    "INSERT INTO {t_instances} AS i (actor_type, actor_id, state, state_version, "
    "next_message_sequence, activation_generation, state_revision, created_at, updated_at) "
    "VALUES (%(actor_type)s, %(actor_id)s, '{{}}', %(state_version)s, 2, 0, 0, {now}, {now}) "
    "ON CONFLICT (actor_type, actor_id) DO UPDATE SET "
    "next_message_sequence = i.next_message_sequence + 1 "
    "RETURNING i.id, i.next_message_sequence - 1, i.state_revision"
)

#: The same on SQLite.
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

#: MySQL: the named lock serialising the creation of one actor, and its release.
GET_CREATION_LOCK_MYSQL = "SELECT GET_LOCK(%(name)s, %(wait)s)"
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

#: Its ready membership (after :data:`INSERT_MESSAGE`, with the id it returned).
INSERT_READY = (
    "INSERT INTO {t_ready} (message_id, instance_id, sequence, available_at, created_at) "
    "VALUES (%(message_id)s, %(instance_id)s, %(sequence)s, {available_at}, {now})"
)

#: PostgreSQL: both rows in one statement, returning the message id (``{notify}``: a
#: ``NOTIFY`` sent when the enqueue commits, or nothing).
INSERT_MESSAGE_POSTGRESQL = (
    "WITH m AS (" + INSERT_MESSAGE + " RETURNING id, available_at), "
    "r AS (INSERT INTO {t_ready} (message_id, instance_id, sequence, available_at, "
    "created_at) SELECT id, %(instance_id)s, %(sequence)s, available_at, {now} FROM m) "
    "SELECT id{notify} FROM m"
)

#: The ``NOTIFY`` of :data:`INSERT_MESSAGE_POSTGRESQL` (new actor work).
NOTIFY_WORK = ", pg_notify(%(channel)s, '')"

#: Messages in the mailbox (ready or claimed).
MAILBOX_LENGTH = (
    "SELECT (SELECT COUNT(*) FROM {t_ready} WHERE instance_id = %(instance_id)s) + "
    "(SELECT COUNT(*) FROM {t_claimed} WHERE instance_id = %(instance_id)s)"
)

#: The message an actor was sent under an idempotency key.
FIND_MESSAGE_BY_KEY = (
    "SELECT m.id, m.request_id, m.sequence, m.operation, m.arguments{as_text}, "
    "m.delivery_mode, m.instance_id FROM {t_messages} m "
    "JOIN {t_instances} i ON i.id = m.instance_id "
    "WHERE i.actor_type = %(actor_type)s AND i.actor_id = %(actor_id)s "
    "AND m.idempotency_key = %(idempotency_key)s"
)


def allocate_sequence_postgresql(
    dialect: Dialect, cursor: Any, actor_type: str, actor_id: str, state_version: int
) -> tuple[int, int, int]:
    """One ``INSERT ... ON CONFLICT ... RETURNING``."""
    return _allocate_returning(
        dialect, cursor, ALLOCATE_SEQUENCE_POSTGRESQL, actor_type, actor_id, state_version
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
        name = _creation_lock(dialect, actor_type, actor_id)
        cursor.execute(GET_CREATION_LOCK_MYSQL, {"name": name, "wait": CREATION_LOCK_WAIT})
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
                cursor.execute(RELEASE_CREATION_LOCK_MYSQL, {"name": name})
                cursor.fetchone()
        if created:
            return int(cursor.lastrowid), 1, 0
    instance_id = int(cursor.lastrowid)
    cursor.execute(render(dialect, SEQUENCE_OF), {"id": instance_id})
    sequence, revision = cursor.fetchone()
    return instance_id, int(sequence), int(revision)


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


def insert_message_postgresql(
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
    notify_channel: str | None = None,
) -> int:
    """Both rows in one statement; ``notify_channel``: hint the workers on commit."""
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
        channel=notify_channel,
    )
    notify = NOTIFY_WORK if notify_channel is not None else ""
    cursor.execute(
        render(dialect, INSERT_MESSAGE_POSTGRESQL, available_at=at_sql, notify=notify), params
    )
    return int(cursor.fetchone()[0])


def mailbox_length(dialect: Dialect, cursor: Any, instance_id: int) -> int:
    cursor.execute(render(dialect, MAILBOX_LENGTH), {"instance_id": instance_id})
    return int(cursor.fetchone()[0])


def find_message_by_key(
    dialect: Dialect, cursor: Any, actor_type: str, actor_id: str, idempotency_key: str
) -> tuple[Any, ...] | None:
    cursor.execute(
        render(dialect, FIND_MESSAGE_BY_KEY),
        {"actor_type": actor_type, "actor_id": actor_id, "idempotency_key": idempotency_key},
    )
    row = cursor.fetchone()
    return None if row is None else tuple(row)
