"""The values the hot-path statements return and take: a lease, a claimed message, a
completion."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
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


class JoinedWrite(Protocol):
    """Another app's write made one more part of the single-statement group commit
    (``tilttek_activity``'s journal entries): an ``INSERT ... RETURNING position`` whose FROM
    joins the fence relation it is given, so it writes nothing when the fence fails."""

    def statement(self, guard: str) -> tuple[str, list[Any]]: ...

    def returned(self, positions: Sequence[int]) -> None: ...


@dataclass(slots=True)
class Completion:
    """What the fenced commit writes for one finished message."""

    message_id: int
    result: str | None = None  # JSON text
    rejection: str | None = None  # JSON text
    claimed: bool = False  # the turn's claimed row (attempt already counted)


MESSAGE_COLUMNS = (
    "id, sequence, operation, arguments, delivery_mode, attempt_count, max_attempts, "
    "request_id, idempotency_key"
)
