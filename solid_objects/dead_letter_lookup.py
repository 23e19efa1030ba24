"""Dead letters over shards: the operator's list and retry-by-id of
``manage.py solid_objects_dead_letters``.

Every alias keeps its own dead letters, and their ids are per alias: :func:`latest` lists
them over every alias that holds actors, :func:`retry` finds the one alias holding an id
(or is told which) and retries the row there through the operator verb
(:meth:`DeadLetter.retry <solid_objects.models.DeadLetter.retry>`), as the admin does.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from .dead_letters import DeadLetterNotFound
from .models import DeadLetter
from .references import MessageReference
from .routers import actor_aliases, require_actor_alias
from .tasks.naming import operation_label


class AmbiguousDeadLetter(LookupError):
    """A dead letter id that several shards hold (ids are per alias): name the alias."""

    def __init__(self, message: str, *, aliases: list[str]) -> None:
        self.aliases = aliases
        super().__init__(message)


@dataclass(frozen=True)
class DeadLetterRow:
    """One line of the dead letter list, with the alias that holds it."""

    database: str
    id: int
    actor_type: str
    actor_id: str
    operation: str
    attempts: int
    exception_class: str
    last_failed_at: datetime
    retried_message_id: int | None
    #: The operation, or for a ``django.tasks`` task its name and queue
    #: (:func:`solid_objects.tasks.naming.operation_label`).
    label: str


ROW_FIELDS = (
    "id",
    "actor_type",
    "actor_id",
    "operation",
    "attempts",
    "exception_class",
    "last_failed_at",
    "retried_message_id",
)


def _row(alias: str, values: tuple[Any, ...]) -> DeadLetterRow:
    (
        dead_letter_id,
        actor_type,
        actor_id,
        operation,
        attempts,
        exception_class,
        last_failed_at,
        retried_message_id,
        arguments,
    ) = values
    return DeadLetterRow(
        database=alias,
        id=dead_letter_id,
        actor_type=actor_type,
        actor_id=actor_id,
        operation=operation,
        attempts=attempts,
        exception_class=exception_class,
        last_failed_at=last_failed_at,
        retried_message_id=retried_message_id,
        label=operation_label(actor_type, actor_id, operation, arguments),
    )


def _aliases(using: str | None) -> tuple[str, ...]:
    return (require_actor_alias(using),) if using is not None else actor_aliases()


def latest(limit: int, using: str | None = None) -> tuple[list[DeadLetterRow], bool]:
    """The ``limit`` most recent dead letters of ``using`` (``None``: of every alias that
    holds actors, newest first), and whether more than one alias was read."""
    aliases = _aliases(using)
    rows = [
        _row(alias, values)
        for alias in aliases
        for values in DeadLetter.objects.using(alias)
        .order_by("-last_failed_at", "-id")
        .values_list(*ROW_FIELDS, "arguments")[:limit]
    ]
    rows.sort(key=lambda row: (row.last_failed_at, row.id), reverse=True)
    return rows[:limit], len(aliases) > 1


def retry(dead_letter_id: int, using: str | None = None) -> tuple[str, MessageReference[Any]]:
    """Retry one dead letter by id on ``using``, or (``None``) on the one alias holding it,
    through :meth:`DeadLetter.retry` on the row read from that alias; returns the alias and
    the new message. :class:`DeadLetterNotFound` when no alias holds it,
    :class:`AmbiguousDeadLetter` when several do (nothing is retried then)."""
    holders = [
        row
        for alias in _aliases(using)
        for row in DeadLetter.objects.using(alias).filter(pk=dead_letter_id).only("id")[:1]
    ]
    if not holders:
        raise DeadLetterNotFound(f"no dead letter {dead_letter_id}")
    aliases = [str(row._state.db) for row in holders]
    if len(holders) > 1:
        raise AmbiguousDeadLetter(
            f"dead letter {dead_letter_id} exists on {', '.join(aliases)}: "
            "choose one with --database ALIAS",
            aliases=aliases,
        )
    return aliases[0], holders[0].retry()
