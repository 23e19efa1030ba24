"""The values the hot-path statements return and take: a lease, a claimed message, a
completion, what the fenced commit writes of other modules (a staged effect, a joined
write), and the messages an enqueue appends."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol


@dataclass(slots=True)
class LeaseRow:
    """An activation this process took: identity, state as stored, and the fence."""

    instance_id: int
    actor_type: str
    actor_id: str
    state: Any  # JSON text, or None when the cached revision was still current
    state_version: int
    state_revision: int
    generation: int
    token: str
    owner_id: str
    has_stale_claim: bool


@dataclass(slots=True)
class MessageRow:
    id: int
    sequence: int
    operation: str
    arguments: Any  # JSON text
    delivery_mode: str
    attempt_count: int
    max_attempts: int
    request_id: str
    idempotency_key: str | None


class StagedEffectRow(Protocol):
    """What the fenced commit needs of an effect a turn staged (``turn.StagedEffect``)."""

    effect_id: str
    name: str
    arguments: str  # JSON text
    success_operation: str | None
    failure_operation: str | None


class JoinedWrite(Protocol):
    """Another app's write made one more part of the single-statement group commit
    (``tilttek_activity``'s journal entries): an ``INSERT ... RETURNING position`` whose FROM
    joins the fence relation it is given, so it writes nothing when the fence fails."""

    def statement(self, guard: str) -> tuple[str, dict[str, Any]]: ...

    def returned(self, positions: Sequence[int]) -> None: ...


@dataclass(slots=True)
class Completion:
    """What the fenced commit writes for one finished message."""

    message_id: int
    result: str | None = None  # JSON text
    rejection: str | None = None  # JSON text
    claimed: bool = False  # the turn's claimed row (attempt already counted)


@dataclass(frozen=True, slots=True)
class BatchedTurn:
    """One actor's turn in a commit of several actors (``fence.commit_batch``): the lease's
    generation and claimed message, the state to write (``None``: unchanged) and the
    outcome (result or rejection, JSON text)."""

    instance_id: int
    generation: int
    message_id: int
    state: str | None
    state_version: int
    state_revision: int
    result: str | None = None
    rejection: str | None = None


def lease_from_row(row: Sequence[Any], owner_id: str, token: str) -> LeaseRow:
    """A lease from ``(id, actor_type, actor_id, state, state_version, state_revision,
    generation, has_stale_claim)``."""
    return LeaseRow(
        instance_id=int(row[0]),
        actor_type=row[1],
        actor_id=row[2],
        state=row[3],
        state_version=int(row[4]),
        state_revision=int(row[5]),
        generation=int(row[6]),
        token=token,
        owner_id=owner_id,
        has_stale_claim=bool(row[7]),
    )


def message_from_row(row: Sequence[Any]) -> MessageRow:
    """A claimed message from the columns the claim statements return, in this order:
    ``id, sequence, operation, arguments, delivery_mode, attempt_count, max_attempts,
    request_id, idempotency_key``."""
    return MessageRow(
        id=int(row[0]),
        sequence=int(row[1]),
        operation=row[2],
        arguments=row[3],
        delivery_mode=row[4],
        attempt_count=int(row[5]),
        max_attempts=int(row[6]),
        request_id=row[7],
        idempotency_key=row[8],
    )


@dataclass(frozen=True, slots=True)
class NewMessage:
    """One message to append, validated and encoded (``arguments`` is its JSON text)."""

    actor_type: str
    actor_id: str
    state_version: int
    operation: str
    delivery_mode: str
    arguments: str
    max_attempts: int
    request_id: str
    idempotency_key: str | None
    available_at: datetime | None


@dataclass(frozen=True, slots=True)
class MailboxFullAt:
    """The actor whose mailbox had no room for its messages of a batch: nothing of the
    batch may commit (on PostgreSQL nothing was written; elsewhere the caller rolls back)."""

    actor_type: str
    actor_id: str


#: ``(message_id, instance_id, sequence)`` of each message appended, in order, or the actor
#: whose mailbox is full.
Appended = list[tuple[int, int, int]] | MailboxFullAt


@dataclass(frozen=True, slots=True)
class AppendedAndLeased:
    """A sync caller's message appended with the lease taken when it was free
    (``Dialect.append_and_lease``): ``generation`` is ``None`` when it was not free;
    ``claimed``, the lease and the message claimed as the actor's next turn by the same
    statement, when it was."""

    message_id: int
    instance_id: int
    sequence: int
    generation: int | None
    claimed: tuple[LeaseRow, MessageRow] | None = None
