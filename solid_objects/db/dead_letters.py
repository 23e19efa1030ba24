"""Dead letters, statement by statement (the retry: ``dead_letters.py``). Portable; each
function takes a cursor of the caller's transaction."""

from __future__ import annotations

from typing import Any

from .. import payloads
from .dialect import Dialect
from .sql import render

#: What a retry enqueues again: the dead letter's actor and operation.
RETRY_SOURCE = "SELECT actor_type, actor_id, operation, arguments FROM {t_dead} WHERE id = %(id)s"

#: The dead letter stays (history) and points at its retry.
MARK_RETRIED = (
    "UPDATE {t_dead} SET retried_message_id = %(message_id)s, updated_at = {now} WHERE id = %(id)s"
)


def retry_source(
    cursor: Any, dialect: Dialect, dead_letter_id: int
) -> tuple[str, str, str, dict[str, Any]] | None:
    """``(actor type, actor id, operation, arguments)``, or ``None`` if there is no such
    dead letter."""
    cursor.execute(render(dialect, RETRY_SOURCE), {"id": dead_letter_id})
    row = cursor.fetchone()
    if row is None:
        return None
    actor_type, actor_id, operation, arguments = row
    return actor_type, actor_id, operation, payloads.decode(arguments) or {}


def mark_retried(cursor: Any, dialect: Dialect, dead_letter_id: int, message_id: int) -> None:
    cursor.execute(render(dialect, MARK_RETRIED), {"id": dead_letter_id, "message_id": message_id})
