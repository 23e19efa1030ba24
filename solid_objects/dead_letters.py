"""Retrying dead letters: the original operation goes to the tail of the mailbox again."""

from __future__ import annotations

from django.db import connections, transaction

from . import payloads
from .conf import get_settings
from .db.vendors import dialect_for
from .mailbox import enqueue
from .references import MessageReference, message_reference
from .registry import get_spec


class DeadLetterNotFound(LookupError):
    pass


def retry_dead_letter(dead_letter_id: int, using: str | None = None) -> MessageReference:
    """Enqueue the dead letter's operation again, keyed ``dead-letter:<id>``.

    Idempotent: retrying the same dead letter twice returns the same new message. The dead
    letter row stays (history) and points at the retry through ``retried_message_id``.
    """
    alias = using or get_settings().DATABASE
    connection = connections[alias]
    dialect = dialect_for(connection)
    with transaction.atomic(using=alias):
        with connection.cursor() as cursor:
            cursor.execute(
                f"SELECT actor_type, actor_id, operation, arguments FROM {dialect.t_dead} "
                "WHERE id = %s",
                [dead_letter_id],
            )
            row = cursor.fetchone()
        if row is None:
            raise DeadLetterNotFound(f"no dead letter {dead_letter_id}")
        actor_type, actor_id, operation, arguments = row
        message = enqueue(
            get_spec(actor_type),
            actor_id,
            operation,
            payloads.decode(arguments) or {},
            delivery_mode="async",
            idempotency_key=f"dead-letter:{dead_letter_id}",
            using=alias,
        )
        with connection.cursor() as cursor:
            cursor.execute(
                f"UPDATE {dialect.t_dead} SET retried_message_id = %s, "
                f"updated_at = {dialect.now} WHERE id = %s",
                [message.message_id, dead_letter_id],
            )
    return message_reference(message)
