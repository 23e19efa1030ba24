"""Everything about an activity is checked here, in Python, before any SQL is sent.

This is what makes MySQL's ``INSERT IGNORE`` safe to use (IGNORE would otherwise coerce bad
data into warnings) and what keeps an invalid call from poisoning the caller's transaction on
PostgreSQL: the database never sees a value it could reject.
"""

from __future__ import annotations

import json
import math
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from json.encoder import encode_basestring
from typing import Any

from django.db import models

from .errors import InvalidActivity
from .limits import (
    FLOAT_EXPONENT_FROM,
    INT32_MAX,
    INT32_MIN,
    KEY_LENGTH,
    MAX_CONTEXT_BYTES,
    MAX_CONTEXT_DEPTH,
    RECORDED,
    VERB_LENGTH,
)
from .references import reference
from .text import problem_with_identifier, problem_with_text, shown
from .values import ActivityEntry

__all__ = [
    "MAX_CONTEXT_BYTES",
    "MAX_CONTEXT_DEPTH",
    "Draft",
    "validate_activity",
    "validate_key",
    "validate_moment",
    "validate_occurred_at",
    "validate_verb",
]

#: The earliest date every supported database stores (MySQL's DATETIME starts at year 1000).
EARLIEST = datetime(1000, 1, 1, tzinfo=UTC)
#: The fields compared when a key is already recorded, in schema order.
PAYLOAD_FIELDS = ("member", "verb", "object", "quantity", "context", "occurred_at")


@dataclass(frozen=True, slots=True)
class Draft:
    """A validated entry, ready to insert: every value as the database will give it back."""

    kind: str
    idempotency_key: str
    member: str
    verb: str
    object: str | None
    quantity: int
    context: dict[str, Any]
    context_json: str
    occurred_at: datetime
    occurred_at_given: bool
    recorded_at: datetime

    @property
    def identity(self) -> tuple[str, str]:
        return (self.idempotency_key, self.kind)

    def entry(self, position: int) -> ActivityEntry:
        """The entry this draft became once inserted at ``position``."""
        return ActivityEntry(
            position,
            self.kind,
            self.idempotency_key,
            self.member,
            self.verb,
            self.object,
            self.quantity,
            self.context,
            self.occurred_at,
            self.recorded_at,
        )

    def differences(self, kept: ActivityEntry | Draft) -> list[str]:
        """Payload fields that differ from ``kept`` (a defaulted occurred_at is not one)."""
        fields = []
        if self.member != kept.member:
            fields.append("member")
        if self.verb != kept.verb:
            fields.append("verb")
        if self.object != kept.object:
            fields.append("object")
        if self.quantity != kept.quantity:
            fields.append("quantity")
        if not json_equal(self.context, kept.context):
            fields.append("context")
        if self.occurred_at_given and self.occurred_at != kept.occurred_at:
            fields.append("occurred_at")
        return fields


def validate_activity(
    member: models.Model | str,
    verb: str,
    *,
    object: models.Model | str | None = None,
    quantity: int = 1,
    context: dict[str, Any] | None = None,
    occurred_at: datetime | None = None,
    idempotency_key: str | None = None,
    kind: str = RECORDED,
    now: datetime,
    max_future: timedelta | None,
) -> Draft:
    """Validate and normalise one activity. ``now`` is aware and already truncated."""
    member_ref = reference(member, field="member")
    verb = validate_verb(verb)
    object_ref = None if object is None else reference(object, field="object")
    if isinstance(quantity, bool) or not isinstance(quantity, int):
        raise InvalidActivity("quantity", f"must be an integer, got {type(quantity).__name__}")
    if not INT32_MIN <= quantity <= INT32_MAX:
        raise InvalidActivity("quantity", f"{shown(quantity)} does not fit in a 32-bit integer")
    context_value, context_json = validate_context({} if context is None else context)
    moment, given = validate_occurred_at(occurred_at, now=now, max_future=max_future)
    key = str(uuid.uuid4()) if idempotency_key is None else validate_key(idempotency_key)
    return Draft(
        kind,
        key,
        member_ref,
        verb,
        object_ref,
        int(quantity),
        context_value,
        context_json,
        moment,
        given,
        now,
    )


def validate_verb(verb: Any, field: str = "verb") -> str:
    if not isinstance(verb, str):
        raise InvalidActivity(field, f"must be a string, got {type(verb).__name__}")
    if not verb:
        raise InvalidActivity(field, "must not be empty")
    if len(verb) > VERB_LENGTH:
        raise InvalidActivity(
            field, f"is {len(verb)} characters long, at most {VERB_LENGTH} are allowed"
        )
    if verb != verb.strip():
        raise InvalidActivity(field, "must not start or end with whitespace")
    problem = problem_with_identifier(verb)
    if problem:
        raise InvalidActivity(field, problem)
    return str(verb)


def validate_key(key: Any) -> str:
    if not isinstance(key, str):
        raise InvalidActivity("idempotency_key", f"must be a string, got {type(key).__name__}")
    if not key:
        raise InvalidActivity("idempotency_key", "must not be empty")
    if len(key) > KEY_LENGTH:
        raise InvalidActivity(
            "idempotency_key", f"is {len(key)} characters long, at most {KEY_LENGTH} are allowed"
        )
    problem = problem_with_identifier(key)
    if problem:
        raise InvalidActivity("idempotency_key", problem)
    return str(key)


def validate_occurred_at(
    value: Any, *, now: datetime, max_future: timedelta | None
) -> tuple[datetime, bool]:
    """``(moment, given)``: the UTC second it happened, and whether the caller said so."""
    if value is None:
        return now, False
    moment = validate_moment(value, "occurred_at")
    if max_future is not None and moment > _latest(now, max_future):
        raise InvalidActivity(
            "occurred_at", f"{moment.isoformat()} is more than {max_future} in the future"
        )
    return moment, True


def _latest(now: datetime, max_future: timedelta) -> datetime:
    try:
        return now + max_future
    except OverflowError:  # a MAX_FUTURE beyond year 9999 bounds nothing
        return datetime.max.replace(tzinfo=UTC)


def validate_moment(value: Any, field: str) -> datetime:
    """An aware datetime, converted to UTC and truncated to the second."""
    if not isinstance(value, datetime):
        raise InvalidActivity(field, f"must be a datetime, got {type(value).__name__}")
    try:
        offset = value.utcoffset()
        moment = None if offset is None else value.astimezone(UTC).replace(microsecond=0)
    except (OverflowError, ValueError, TypeError) as exc:
        raise InvalidActivity(field, f"{value!r} cannot be converted to UTC ({exc})") from None
    if moment is None:
        raise InvalidActivity(field, "must be timezone-aware (naive datetimes are refused)")
    if moment < EARLIEST:
        raise InvalidActivity(field, f"must not be before {EARLIEST.isoformat()}")
    return moment


def validate_context(context: Any) -> tuple[dict[str, Any], str]:
    """The context as every database gives it back, and its JSON text.

    Strictly JSON (string keys, finite numbers, at most ``MAX_CONTEXT_DEPTH`` levels) and at
    most ``MAX_CONTEXT_BYTES`` of compact UTF-8 JSON. Every value comes back equal and of
    the same type on every database: a float Python writes with an exponent (``1e+16``) is
    written out in full instead (``10000000000000000.0``), since PostgreSQL's jsonb would
    keep ``1e+16`` as an exact decimal that reads back as an *int*; ``-0.0`` is stored as
    ``0.0`` (jsonb has no negative zero). Raises naming the faulty path.
    """
    if not isinstance(context, dict):
        raise InvalidActivity("context", f"must be a JSON object (dict), got {_name(context)}")
    walk = _JSONCheck()
    walk.check(context, "context", 1)
    if walk.negative_zero:
        context = _without_negative_zero(context)
    try:
        if walk.big_float:
            text = "".join(_exact_json(context))
        else:
            text = json.dumps(context, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    except ValueError as exc:  # huge integers beyond Python's str conversion limit
        raise InvalidActivity("context", str(exc)) from None
    size = len(text.encode("utf-8"))
    if size > MAX_CONTEXT_BYTES:
        raise InvalidActivity(
            "context", f"is {size} bytes of JSON, at most {MAX_CONTEXT_BYTES} are allowed"
        )
    return json.loads(text), text


class _JSONCheck:
    """One walk over a context: types, text, numbers, depth, and a running lower bound of the
    size of its JSON text, so a huge context is refused before it is serialised."""

    def __init__(self) -> None:
        self.size = 0
        self.negative_zero = False
        self.big_float = False

    def grow(self, amount: int) -> None:
        self.size += amount
        if self.size > MAX_CONTEXT_BYTES:
            raise InvalidActivity(
                "context", f"is more than {MAX_CONTEXT_BYTES} bytes of JSON, the most allowed"
            )

    def check(self, value: Any, path: str, depth: int) -> None:
        if value is None or isinstance(value, bool):
            self.grow(4)
            return
        if isinstance(value, int):
            self.grow(1)
            return
        if isinstance(value, str):
            self.grow(len(value) + 2)
            problem = problem_with_text(value)
            if problem:
                raise InvalidActivity("context", f"{_short(path)} {problem}")
            return
        if isinstance(value, float):
            self.grow(3)  # "0.0"
            if not math.isfinite(value):
                raise InvalidActivity(
                    "context", f"{_short(path)} is {value!r}, which JSON cannot hold"
                )
            if abs(value) >= FLOAT_EXPONENT_FROM:
                self.big_float = True
            if value == 0 and math.copysign(1.0, value) < 0:
                self.negative_zero = True
            return
        if isinstance(value, dict | list | tuple):
            if depth > MAX_CONTEXT_DEPTH:
                raise InvalidActivity(
                    "context", f"{_short(path)} nests deeper than {MAX_CONTEXT_DEPTH} levels"
                )
            self.grow(2 + max(0, len(value) - 1))  # brackets and commas
            if isinstance(value, dict):
                for key, item in value.items():
                    if not isinstance(key, str):
                        raise InvalidActivity(
                            "context",
                            f"{_short(path)} has a {_name(key)} key; JSON keys are strings",
                        )
                    self.grow(len(key) + 3)  # "key":
                    problem = problem_with_text(key)
                    if problem:
                        raise InvalidActivity("context", f"{_short(path)} has a key that {problem}")
                    self.check(item, f"{path}[{key[:40]!r}]", depth + 1)
            else:
                for index, item in enumerate(value):
                    self.check(item, f"{path}[{index}]", depth + 1)
            return
        raise InvalidActivity("context", f"{_short(path)} is a {_name(value)}, which is not JSON")


def _short(path: str) -> str:
    return path if len(path) <= 200 else path[:100] + "..." + path[-97:]


def json_text(value: Any) -> str:
    """The stored text of a decoded context (a cancellation copies the recorded one): the
    same encoding :func:`validate_context` uses, so a big float stays a float."""
    return "".join(_exact_json(value))


def _exact_json(value: Any) -> Iterator[str]:
    """Compact JSON text like ``json.dumps(ensure_ascii=False)``, except that a float is
    never written with a positive exponent (a checked value: finite, string keys)."""
    if value is None:
        yield "null"
    elif value is True:
        yield "true"
    elif value is False:
        yield "false"
    elif isinstance(value, int):
        yield int.__repr__(value)
    elif isinstance(value, float):
        yield _float_text(value)
    elif isinstance(value, str):
        yield encode_basestring(value)
    elif isinstance(value, dict):
        yield "{"
        for index, (key, item) in enumerate(value.items()):
            yield f"{',' if index else ''}{encode_basestring(key)}:"
            yield from _exact_json(item)
        yield "}"
    else:
        yield "["
        for index, item in enumerate(value):
            if index:
                yield ","
            yield from _exact_json(item)
        yield "]"


def _float_text(value: float) -> str:
    """``repr``, or for ``1e+16`` and up its digits in full with a ``.0`` (the same float)."""
    text = float.__repr__(value)
    if "e+" not in text:
        return text
    return format(Decimal(text), "f") + ".0"


def _without_negative_zero(value: Any) -> Any:
    if isinstance(value, float):
        return 0.0 if value == 0 else value
    if isinstance(value, dict):
        return {key: _without_negative_zero(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_without_negative_zero(item) for item in value]
    return value


def json_equal(left: Any, right: Any) -> bool:
    """Equality of decoded JSON values that tolerates a database's number normalisation
    (PostgreSQL's jsonb keeps ``1e300`` as an exact decimal that reads back as an int)."""
    if isinstance(left, dict):
        return (
            isinstance(right, dict)
            and left.keys() == right.keys()
            and all(json_equal(value, right[key]) for key, value in left.items())
        )
    if isinstance(left, list):
        return (
            isinstance(right, list)
            and len(left) == len(right)
            and all(json_equal(a, b) for a, b in zip(left, right, strict=True))
        )
    if isinstance(left, bool) or isinstance(right, bool):
        return type(left) is type(right) and left == right
    if isinstance(left, int | float) and isinstance(right, int | float):
        if left == right:
            return True
        try:
            return float(left) == float(right)
        except OverflowError:
            return False
    return bool(left == right)


def _name(value: Any) -> str:
    return type(value).__name__
