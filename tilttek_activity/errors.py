"""Every error ``tilttek_activity`` raises (re-exported from the package).

This module imports nothing from Django's model layer, so ``except InvalidActivity`` works in
code that runs before the app registry is ready.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .values import ActivityEntry

__all__ = [
    "ActivityError",
    "ActivityNotFound",
    "IdempotencyConflict",
    "InvalidActivity",
    "UnexpectedValueError",
    "UnknownProjection",
]


class ActivityError(Exception):
    """Base class of every ``tilttek_activity`` error."""


class InvalidActivity(ActivityError, ValueError):
    """An argument does not validate; nothing was sent to the database.

    ``field`` names the argument at fault (``"verb"``, ``"context"``, ``"occurred_at"``...).
    """

    def __init__(self, field: str, message: str) -> None:
        self.field = field
        self.message = message
        super().__init__(f"{field}: {message}")


class IdempotencyConflict(ActivityError):
    """The key is already recorded (same kind) with a different payload.

    ``fields`` lists the differing fields in schema order; ``kept`` is the entry the database
    kept (None when two items of one ``record_activities`` call disagree). Nothing was
    written by the call that raised.
    """

    def __init__(
        self,
        idempotency_key: str,
        kind: str,
        fields: Sequence[str],
        kept: ActivityEntry | None = None,
    ) -> None:
        self.idempotency_key = idempotency_key
        self.kind = kind
        self.fields = tuple(fields)
        self.kept = kept
        super().__init__(
            f"idempotency key {idempotency_key!r} ({kind}) is already recorded with a "
            f"different {', '.join(self.fields)}"
        )


class ActivityNotFound(ActivityError, LookupError):
    """``cancel_activity`` was given a key that was never recorded."""

    def __init__(self, idempotency_key: str) -> None:
        self.idempotency_key = idempotency_key
        super().__init__(f"no activity recorded with idempotency key {idempotency_key!r}")


class UnexpectedValueError(ActivityError):
    """A stored row does not decode (written by hand, or by an older version).

    ``column`` names the column at fault and ``position`` the row.
    """

    def __init__(self, column: str, position: object, detail: str) -> None:
        self.column = column
        self.position = position
        self.detail = detail
        super().__init__(f"tilttek_activity_entry position {position}: column {column!r} {detail}")


class UnknownProjection(ActivityError, LookupError):
    """No projection is registered under this name."""

    def __init__(self, name: str) -> None:
        self.name = name
        super().__init__(f"no projection named {name!r} is registered")
