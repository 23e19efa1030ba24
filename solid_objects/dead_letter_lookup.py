"""Dead letters over shards: the operator's list and retry-by-id of
``manage.py solid_objects_dead_letters``.

Every alias keeps its own dead letters, and their ids are per alias: :func:`latest` lists
them over every alias that holds actors, :func:`retry` finds the one alias holding an id
(or is told which).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from .dead_letters import DeadLetterNotFound, retry_dead_letter
from .models import DeadLetter
from .references import MessageReference
from .routers import actor_aliases, require_actor_alias


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


def _aliases(using: str | None) -> tuple[str, ...]:
    return (require_actor_alias(using),) if using is not None else actor_aliases()


def latest(limit: int, using: str | None = None) -> tuple[list[DeadLetterRow], bool]:
    """The ``limit`` most recent dead letters of ``using`` (``None``: of every alias that
    holds actors, newest first), and whether more than one alias was read."""
    aliases = _aliases(using)
    rows = [
        DeadLetterRow(alias, *values)
        for alias in aliases
        for values in DeadLetter.objects.using(alias)
        .order_by("-last_failed_at", "-id")
        .values_list(*ROW_FIELDS)[:limit]
    ]
    rows.sort(key=lambda row: (row.last_failed_at, row.id), reverse=True)
    return rows[:limit], len(aliases) > 1


def retry(dead_letter_id: int, using: str | None = None) -> tuple[str, MessageReference[Any]]:
    """Retry one dead letter by id on ``using``, or (``None``) on the one alias holding it;
    returns the alias and the new message. :class:`DeadLetterNotFound` when no alias holds
    it, :class:`AmbiguousDeadLetter` when several do (nothing is retried then)."""
    holders = [
        alias
        for alias in _aliases(using)
        if DeadLetter.objects.using(alias).filter(pk=dead_letter_id).exists()
    ]
    if not holders:
        raise DeadLetterNotFound(f"no dead letter {dead_letter_id}")
    if len(holders) > 1:
        raise AmbiguousDeadLetter(
            f"dead letter {dead_letter_id} exists on {', '.join(holders)}: "
            "choose one with --database ALIAS",
            aliases=holders,
        )
    return holders[0], retry_dead_letter(dead_letter_id, using=holders[0])
