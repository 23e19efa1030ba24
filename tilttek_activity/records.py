"""The one place stored rows of the journal are decoded into entries.

Reads go through raw cursors (no model instances, no field converters) and every column is
checked here, so a row written by hand or by an older version raises
:class:`~tilttek_activity.errors.UnexpectedValueError` naming the column and the position
instead of surfacing as a wrong value somewhere else.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import UTC, datetime, tzinfo
from typing import Any

from .errors import UnexpectedValueError
from .limits import INT32_MAX, INT32_MIN, KINDS
from .values import ActivityEntry, Recorded

# ActivityEntry and Recorded live in values.py (errors.py needs them without the decoder);
# they stay importable from here.
__all__ = ["COLUMNS", "ActivityEntry", "Recorded", "decode_row"]

#: Column order of every raw read of ``tilttek_activity_entry``.
COLUMNS = (
    "position",
    "kind",
    "idempotency_key",
    "member",
    "verb",
    "object",
    "quantity",
    "context",
    "occurred_at",
    "recorded_at",
)


def decode_row(row: Sequence[Any], tz: tzinfo) -> ActivityEntry:
    """Decode one raw row (columns in :data:`COLUMNS` order).

    ``tz`` is the connection's time zone, applied to the naive datetimes MySQL and SQLite
    return (Django stores UTC there unless ``DATABASES[...]["TIME_ZONE"]`` says otherwise).
    """
    position, kind, key, member, verb, obj, quantity, context, occurred_at, recorded_at = row
    if type(position) is not int:
        raise UnexpectedValueError("position", position, f"holds {position!r}, not an integer")
    if kind not in KINDS:
        raise UnexpectedValueError("kind", position, f"holds {kind!r}, not one of {KINDS}")
    if type(key) is not str or not key:
        raise UnexpectedValueError("idempotency_key", position, f"holds {key!r}")
    _reference(member, "member", position)
    if type(verb) is not str or not verb:
        raise UnexpectedValueError("verb", position, f"holds {verb!r}, not a non-empty verb")
    if obj is not None:
        _reference(obj, "object", position)
    if type(quantity) is not int or not INT32_MIN <= quantity <= INT32_MAX:
        raise UnexpectedValueError(
            "quantity", position, f"holds {quantity!r}, not a 32-bit integer"
        )
    return ActivityEntry(
        position,
        kind,
        key,
        member,
        verb,
        obj,
        quantity,
        decode_context(context, position),
        decode_datetime(occurred_at, tz, "occurred_at", position),
        decode_datetime(recorded_at, tz, "recorded_at", position),
    )


def decode_context(value: Any, position: object) -> dict[str, Any]:
    """The JSON object stored in ``context`` (drivers hand it over as text or bytes)."""
    if isinstance(value, bytes | bytearray | memoryview):
        try:
            value = bytes(value).decode()
        except UnicodeDecodeError:
            raise UnexpectedValueError("context", position, "is not UTF-8 text") from None
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError as exc:
            raise UnexpectedValueError("context", position, f"is not valid JSON ({exc})") from None
    if not isinstance(value, dict):
        raise UnexpectedValueError(
            "context", position, f"holds a JSON {type(value).__name__}, not a JSON object"
        )
    return value


def decode_datetime(value: object, tz: tzinfo, column: str, position: object) -> datetime:
    if isinstance(value, str):
        try:
            value = datetime.fromisoformat(value)
        except ValueError:
            raise UnexpectedValueError(
                column, position, f"holds {value!r}, not a datetime"
            ) from None
    if not isinstance(value, datetime):
        raise UnexpectedValueError(column, position, f"holds {value!r}, not a datetime")
    if value.tzinfo is None:
        value = value.replace(tzinfo=tz)
    return value.astimezone(UTC)


def _reference(value: Any, column: str, position: object) -> None:
    if type(value) is not str:
        raise UnexpectedValueError(column, position, f"holds {value!r}, not a reference")
    kind, colon, identifier = value.partition(":")
    if not (kind and colon and identifier):
        raise UnexpectedValueError(
            column, position, f"holds {value[:40]!r}, not a 'kind:identifier' reference"
        )
