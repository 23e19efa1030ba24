"""An instance and a message seen from a reference: the committed state, destroying the
instance, a message's outcome."""

from __future__ import annotations

from typing import Any

from .cursor import Cursor
from .dialect import Dialect
from .sql import render

#: The state as committed (a plain read: no lock, may race an in-flight turn).
COMMITTED_STATE = (
    "SELECT id, state, state_version, state_revision FROM {t_instances} "
    "WHERE actor_type = %(actor_type)s AND actor_id = %(actor_id)s"
)

#: Lock the instance row before deleting it.
LOCK_INSTANCE = (
    "SELECT id FROM {t_instances} WHERE actor_type = %(actor_type)s "
    "AND actor_id = %(actor_id)s{for_update}"
)

#: Delete the instance (the database cascades everything it owns).
DELETE_INSTANCE = "DELETE FROM {t_instances} WHERE id = %(id)s"

#: A message's outcome and where it is in the mailbox.
MESSAGE_OUTCOME = (
    "SELECT m.completed_at, m.rejected_at, m.result, m.rejection, m.error, "
    "(SELECT COUNT(*) FROM {t_ready} r WHERE r.message_id = m.id), "
    "(SELECT COUNT(*) FROM {t_claimed} c WHERE c.message_id = m.id), "
    "(SELECT COUNT(*) FROM {t_dead} d WHERE d.message_id = m.id), "
    "m.attempt_count, m.sequence, m.instance_id FROM {t_messages} m WHERE m.id = %(id)s"
)


def committed_state(
    dialect: Dialect, cursor: Any, actor_type: str, actor_id: str
) -> tuple[int, Any, int, int] | None:
    cursor.execute(
        render(dialect, COMMITTED_STATE), {"actor_type": actor_type, "actor_id": actor_id}
    )
    row = cursor.fetchone()
    return None if row is None else (int(row[0]), row[1], int(row[2]), int(row[3]))


def destroy_instance(dialect: Dialect, cursor: Any, actor_type: str, actor_id: str) -> bool:
    cursor.execute(render(dialect, LOCK_INSTANCE), {"actor_type": actor_type, "actor_id": actor_id})
    row = cursor.fetchone()
    if row is None:
        return False
    delete_instance(dialect, cursor, int(row[0]))
    return True


def delete_instance(dialect: Dialect, cursor: Cursor, instance_id: int) -> None:
    """Delete the instance ``instance_id`` (the database cascades everything it owns); the
    caller holds its row lock (:func:`destroy_instance`, or a reshard's
    ``resharding.lock_identity``)."""
    cursor.execute(render(dialect, DELETE_INSTANCE), {"id": instance_id})


def message_outcome(dialect: Dialect, cursor: Any, message_id: int) -> tuple[Any, ...] | None:
    cursor.execute(render(dialect, MESSAGE_OUTCOME), {"id": message_id})
    row = cursor.fetchone()
    return None if row is None else tuple(row)
