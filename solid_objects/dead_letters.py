"""Retrying dead letters: the original operation goes to the tail of the mailbox again.

Operators reach it only through the models' verbs, ``DeadLetter.retry()`` and
``DeadLetter.objects.retry()`` (the admin's actions, ``manage.py solid_objects_dead_letters
--retry``); the statements are in
:mod:`solid_objects.db.dead_letters`. Over shards, :mod:`solid_objects.dead_letter_lookup`
lists them and finds the alias holding an id.
"""

from __future__ import annotations

from typing import Any

from django.db import connections, transaction

from .conf import get_settings
from .db import dead_letters as queries
from .db.vendors import dialect_for
from .mailbox import enqueue
from .references import MessageReference, message_reference
from .registry import get_spec


class DeadLetterNotFound(LookupError):
    pass


def retry_dead_letter(dead_letter_id: int, using: str | None = None) -> MessageReference[Any]:
    """Enqueue the dead letter's operation again, keyed ``dead-letter:<id>``.

    Idempotent: retrying the same dead letter twice returns the same new message. The dead
    letter row stays (history) and points at the retry through ``retried_message_id``.
    """
    alias = using or get_settings().DATABASE
    connection = connections[alias]
    dialect = dialect_for(connection)
    with transaction.atomic(using=alias):
        with connection.cursor() as cursor:
            source = queries.retry_source(cursor, dialect, dead_letter_id)
        if source is None:
            raise DeadLetterNotFound(f"no dead letter {dead_letter_id}")
        actor_type, actor_id, operation, arguments = source
        message = enqueue(
            get_spec(actor_type),
            actor_id,
            operation,
            arguments,
            delivery_mode="async",
            idempotency_key=f"dead-letter:{dead_letter_id}",
            using=alias,
        )
        with connection.cursor() as cursor:
            queries.mark_retried(cursor, dialect, dead_letter_id, message.message_id)
    return message_reference(message)
