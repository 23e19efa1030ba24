"""Journal entries as plain values: what reads return and what writes report.

This module imports nothing of the package but ``limits``, so ``errors`` can name an entry
(``IdempotencyConflict.kept``) without importing the decoder in ``records``.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, NamedTuple

from .limits import CANCELLED

__all__ = ["ActivityEntry", "Recorded"]


@dataclass(frozen=True, slots=True)
class ActivityEntry:
    """One journal entry, as recorded. Dates are aware and in UTC."""

    position: int
    kind: str
    idempotency_key: str
    member: str
    verb: str
    object: str | None
    quantity: int
    context: dict[str, Any]
    occurred_at: datetime
    recorded_at: datetime

    def __hash__(self) -> int:
        return hash((self.position, self.kind, self.idempotency_key))

    @property
    def pk(self) -> int:
        """The position, under the name a Django user reaches for first."""
        return self.position

    @property
    def is_cancellation(self) -> bool:
        return self.kind == CANCELLED


class Recorded(NamedTuple):
    """What a write returns, like ``get_or_create``: the kept row and whether this call
    wrote it."""

    entry: ActivityEntry
    created: bool
