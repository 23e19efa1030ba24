"""A durable message as the layers below the references see it.

:class:`MessageOutcome` is what a message's rows say about it; :class:`MessageHandle` is what
waiting on a message needs (:class:`~solid_objects.references.MessageReference` is the one
implementation). This module imports nothing of the package, so errors, storage and the sync
path can all name a message without climbing up to the façade.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol


@dataclass(frozen=True)
class MessageOutcome:
    status: str
    result: Any = None
    rejection: dict[str, Any] | None = None
    error: dict[str, Any] | None = None
    attempts: int = 0
    sequence: int | None = None
    completed_at: datetime | None = None


class MessageHandle(Protocol):
    """One enqueued message: where it lives and how to read and resolve its outcome."""

    @property
    def id(self) -> int: ...

    @property
    def sequence(self) -> int: ...

    @property
    def actor_type(self) -> str: ...

    @property
    def actor_id(self) -> str: ...

    @property
    def instance_id(self) -> int: ...

    @property
    def using(self) -> str: ...

    def outcome(self) -> MessageOutcome: ...

    def raise_or_return(self, outcome: MessageOutcome) -> Any: ...
