"""Strict JSON: validation and encoding of arguments, results, rejections and state.

Everything an actor stores goes through :func:`encode`, with one rule on every database: a
value that validates comes back equal and of the same type from PostgreSQL (``jsonb``),
MySQL/MariaDB (``JSON``) and SQLite (text), and anything else is refused with
:class:`~solid_objects.errors.InvalidPayload` before anything is written.

- **Types**: ``None``, ``bool``, ``int``, ``float``, ``str``, lists (tuples are accepted and
  come back as lists) and dicts with string keys. Sets, bytes, datetimes, decimals and other
  objects are refused.
- **Strings** (values and object keys): no NUL character and no lone surrogate. PostgreSQL
  refuses NUL in text and ``\\u0000`` in ``jsonb``; a lone surrogate is not UTF-8.
- **Integers**: at most :data:`MAX_INT_DIGITS` digits (Python's own limit for converting an
  integer to text).
- **Floats**: finite. ``jsonb`` keeps numbers as ``numeric`` and writes them back without an
  exponent, so ``1e+23`` would come back as the integer ``10**23``: floats from ``1e16`` up
  are written positionally with a ``.0`` (``100000000000000000000000.0``), a form every
  database returns as written. ``numeric`` has no negative zero, so ``-0.0`` is written as
  ``0.0`` on every database.
- **Nesting**: at most ``max_depth`` arrays and objects (the database's own limit may be
  lower, see ``Dialect.json_max_depth``).

With the ``orjson`` extra installed, :func:`encode` writes the text with orjson (several
times faster than the standard library's encoder) whenever orjson's text is byte for byte
the standard encoder's: every container and scalar of its exact built-in type, no float
below ``1e-4`` in magnitude (orjson writes ``0.00001`` where ``repr`` writes ``1e-05``) and
nothing orjson refuses (an integer past 64 bits, a lone surrogate, deep nesting). Anything
else takes the standard path, so validation, errors, sizes and the stored text are the
same with or without it. Decoding stays with the standard library: orjson reads an integer
past 64 bits as a float.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable
from decimal import Decimal
from typing import Any

from .errors import InvalidPayload, PayloadTooLarge

_fast_dumps: Callable[[Any], bytes] | None
try:  # the optional fast encoder (the ``orjson`` extra)
    from orjson import dumps as _fast_dumps
except ImportError:  # pragma: no cover - the suite runs both paths (tests/adversarial)
    _fast_dumps = None

MAX_DEPTH = 100
#: The most digits an integer may have (``sys.int_info.default_max_str_digits``).
MAX_INT_DIGITS = 4300

_INT_LIMIT = 10**MAX_INT_DIGITS
# repr() writes floats from 1e16 up with a positive exponent, which jsonb does not keep.
_POSITIONAL_FROM = 1e16
# repr() writes floats below 1e-4 with a negative exponent (1e-05), orjson positionally.
_EXPONENT_BELOW = 1e-4
# What _scan found: which encoder writes the value's text.
_FAST = 0  # orjson (when installed) writes what the standard encoder would
_STANDARD = 1  # the standard encoder (a subclass, or a float orjson writes otherwise)
_POSITIONAL = 2  # _encode_positional (a float repr() writes with a positive exponent)
_SURROGATE = re.compile("[\ud800-\udfff]")
_ESCAPED_NUL = "\\u0000"

_encoder = json.JSONEncoder(ensure_ascii=False, allow_nan=False, separators=(",", ":"))


def problem_with_text(value: str) -> str | None:
    """Why ``value`` cannot be stored as text on every database, or ``None``."""
    if "\x00" in value:
        return "contains a NUL character"
    if not value.isascii() and _SURROGATE.search(value):
        return "contains a lone surrogate (not valid UTF-8)"
    return None


def validate(value: Any, *, what: str = "value", max_depth: int = MAX_DEPTH) -> None:
    """Raise :class:`InvalidPayload` unless ``value`` is strict JSON every database keeps.

    ``max_depth`` counts nested arrays and objects (``[[1]]`` is 2 deep); the database's own
    limit may be lower (MariaDB stores at most 31 levels), see ``Dialect.json_max_depth``.
    """
    encode(value, what=what, max_depth=max_depth)


def encode(
    value: Any, *, what: str = "value", limit: int | None = None, max_depth: int = MAX_DEPTH
) -> str:
    """Validate and encode ``value``; raise :class:`PayloadTooLarge` past ``limit`` bytes.

    Never raises anything but :class:`InvalidPayload` or :class:`PayloadTooLarge` for a
    value it refuses.
    """
    mode = _check(value, what, max_depth)
    if mode == _FAST and _fast_dumps is not None:
        try:
            data = _fast_dumps(value)
        except TypeError:  # orjson.JSONEncodeError: the standard path gives the reason
            pass
        else:
            if b"\\u0000" in data:
                _check_strings(value, what)  # or an escaped backslash followed by "u0000"
            if limit is not None and len(data) > limit:
                raise PayloadTooLarge(f"{what} is {len(data)} bytes; the limit is {limit} bytes")
            return data.decode("utf-8")
    try:
        text = _encode_positional(value) if mode == _POSITIONAL else _encoder.encode(value)
    except (ValueError, TypeError, OverflowError, RecursionError) as exc:
        raise InvalidPayload(f"{what} cannot be encoded as JSON: {exc}") from None
    # Strings are checked on the encoded text (one pass in C): a NUL is escaped as \u0000,
    # a lone surrogate makes the UTF-8 encoding fail.
    if text.isascii():
        size = len(text)
    else:
        try:
            size = len(text.encode("utf-8"))
        except UnicodeEncodeError:
            _check_strings(value, what)
            raise InvalidPayload(f"{what} contains text that is not valid UTF-8") from None
    if _ESCAPED_NUL in text:
        _check_strings(value, what)  # or an escaped backslash followed by "u0000": fine
    if limit is not None and size > limit:
        raise PayloadTooLarge(f"{what} is {size} bytes; the limit is {limit} bytes")
    return text


def compact(value: Any) -> str:
    """Compact JSON text of a value built by the runtime from what was validated already
    (strings, integers, ``None``): no checks. With orjson, non-ASCII text is written as
    UTF-8 rather than escaped; the database reads the same value either way."""
    if _fast_dumps is not None:
        try:
            return _fast_dumps(value).decode("utf-8")
        except TypeError:
            pass  # an integer past 64 bits: the standard encoder writes it
    return _encoder.encode(value)


def decode(text: Any) -> Any:
    """Decode a JSON column value as returned by a raw cursor (text, bytes or decoded)."""
    if text is None:
        return None
    if isinstance(text, bytes | bytearray | memoryview):
        text = bytes(text).decode("utf-8")
    if isinstance(text, str):
        return json.loads(text)
    return text


def same_json(stored: Any, text: str) -> bool:
    """Whether a stored JSON value (as a raw cursor returns it) and the JSON ``text`` this
    module encoded hold the same value: compared decoded, types included (``1`` is not
    ``1.0`` nor ``True``), so neither key order nor the database's number formatting
    (``jsonb`` rewrites both) can make an identical retry look different."""
    return same_value(decode(stored), decode(text))


def same_value(left: Any, right: Any) -> bool:
    """Equality of decoded JSON values that also requires the same types, recursively."""
    if type(left) is not type(right):
        return False
    if isinstance(left, dict):
        return left.keys() == right.keys() and all(
            same_value(item, right[key]) for key, item in left.items()
        )
    if isinstance(left, list):
        return len(left) == len(right) and all(map(same_value, left, right))
    return bool(left == right)


# -- internals ----------------------------------------------------------------------------------
class _Refused(Exception):
    """Raised by the fast scan; :func:`_explain` then finds the path and the reason."""


def _check(value: Any, what: str, max_depth: int) -> int:
    """Refuse what JSON or a database cannot keep (strings excepted: :func:`encode` checks
    them on the text). Returns which encoder writes the value (``_FAST`` and the others)."""
    try:
        return _scan(value, max_depth)
    except _Refused:
        _explain(value, what, max_depth)
        raise InvalidPayload(f"{what} is not strict JSON") from None  # not reached


def _scan(value: Any, max_depth: int) -> int:
    """The hot path: no paths, no messages (a refusal is explained by :func:`_explain`)."""
    mode = _FAST
    stack: list[tuple[Any, int]] = [([value], -1)]
    while stack:
        container, depth = stack.pop()
        if type(container) is dict or isinstance(container, dict):
            for key in container:
                if type(key) is not str:
                    if not isinstance(key, str):
                        raise _Refused
                    mode = mode or _STANDARD
            children: Any = container.values()
        else:
            children = container
        for item in children:
            kind = type(item)
            if kind is str or item is None or kind is bool:
                continue
            if kind is int:
                if not -_INT_LIMIT < item < _INT_LIMIT:
                    raise _Refused
            elif kind is float:
                if not -_POSITIONAL_FROM < item < _POSITIONAL_FROM:
                    if not math.isfinite(item):
                        raise _Refused
                    mode = _POSITIONAL
                elif -_EXPONENT_BELOW < item < _EXPONENT_BELOW:
                    if item == 0.0:
                        if math.copysign(1.0, item) < 0:
                            mode = _POSITIONAL
                    else:
                        mode = mode or _STANDARD
            elif kind is dict or kind is list or kind is tuple:
                if depth + 1 >= max_depth:
                    raise _Refused
                stack.append((item, depth + 1))
            else:
                mode = max(mode, _scan_subclass(item, depth, max_depth, stack))
    return mode


def _scan_subclass(item: Any, depth: int, max_depth: int, stack: list[tuple[Any, int]]) -> int:
    """An item of a subclass of a JSON type (refused otherwise): the standard encoder
    writes it (orjson's text could differ: an ``OrderedDict``'s order, an ``IntEnum``)."""
    if isinstance(item, bool | str):
        return _STANDARD
    if isinstance(item, int):
        if not -_INT_LIMIT < item < _INT_LIMIT:
            raise _Refused
        return _STANDARD
    if isinstance(item, float):
        if not -_POSITIONAL_FROM < item < _POSITIONAL_FROM:
            if not math.isfinite(item):
                raise _Refused
            return _POSITIONAL
        if item == 0.0 and math.copysign(1.0, item) < 0:
            return _POSITIONAL
        return _STANDARD
    if isinstance(item, dict | list | tuple):
        if depth + 1 >= max_depth:
            raise _Refused
        stack.append((item, depth + 1))
        return _STANDARD
    raise _Refused


def _explain(value: Any, what: str, max_depth: int) -> None:
    """Walk ``value`` with paths and raise :class:`InvalidPayload` naming the problem."""
    stack: list[tuple[Any, int, str]] = [(value, 0, what)]
    while stack:
        item, depth, path = stack.pop()
        if item is None or isinstance(item, bool | str):
            continue
        if isinstance(item, int):
            if not -_INT_LIMIT < item < _INT_LIMIT:
                raise InvalidPayload(f"{path} is an integer of more than {MAX_INT_DIGITS} digits")
            continue
        if isinstance(item, float):
            if not math.isfinite(item):
                raise InvalidPayload(f"{path} is {item!r}, which JSON cannot represent")
            continue
        if isinstance(item, dict | list | tuple) and depth >= max_depth:
            raise InvalidPayload(f"{what} is nested deeper than {max_depth} levels")
        if isinstance(item, dict):
            for key, child in item.items():
                if not isinstance(key, str):
                    raise InvalidPayload(
                        f"{path} has a non-string key {_short(key)} ({type(key).__name__})"
                    )
                stack.append((child, depth + 1, f"{path}[{_short(key)}]"))
            continue
        if isinstance(item, list | tuple):
            for index, child in enumerate(item):
                stack.append((child, depth + 1, f"{path}[{index}]"))
            continue
        raise InvalidPayload(f"{path} is a {type(item).__name__}, which is not JSON")


def _check_strings(value: Any, what: str) -> None:
    """Find the string (or key) that cannot be stored and raise with its path."""
    stack: list[tuple[Any, str]] = [(value, what)]
    while stack:
        item, path = stack.pop()
        if isinstance(item, str):
            problem = problem_with_text(item)
            if problem is not None:
                raise InvalidPayload(f"{path} {problem}")
        elif isinstance(item, dict):
            for key, child in item.items():
                problem = problem_with_text(key)
                if problem is not None:
                    raise InvalidPayload(f"{path} has a key that {problem}: {_short(key)}")
                stack.append((child, f"{path}[{_short(key)}]"))
        elif isinstance(item, list | tuple):
            stack.extend((child, f"{path}[{index}]") for index, child in enumerate(item))


def short_repr(value: Any, size: int = 80) -> str:
    """``repr(value)`` cut to ``size`` characters, for error messages: never raises (an
    integer of more than 4,300 digits has no repr) and escapes NUL and lone surrogates, so
    the message itself can be stored."""
    try:
        text = repr(value)
    except Exception:
        if isinstance(value, int):
            return f"<an integer of {value.bit_length()} bits>"
        return f"<a {type(value).__name__}>"
    return text if len(text) <= size else f"{text[: size - 3]}..."


_short = short_repr


def _float_text(value: float) -> str:
    """A float as text every database returns as written (no positive exponent)."""
    if value == 0.0:
        return "0.0"  # also for -0.0: numeric has no negative zero
    text = float.__repr__(value)
    if "e+" not in text:
        return text
    digits = format(Decimal(text), "f")  # exact: formatting ignores the context precision
    return digits if "." in digits else f"{digits}.0"


def _encode_positional(value: Any) -> str:
    """The encoder's output, with floats written by :func:`_float_text` (only for values
    that hold such floats; the C encoder is used otherwise)."""
    parts: list[str] = []
    _write(value, parts)
    return "".join(parts)


def _write(item: Any, parts: list[str]) -> None:
    if isinstance(item, str):
        parts.append(_encoder.encode(item))
    elif item is None:
        parts.append("null")
    elif item is True:
        parts.append("true")
    elif item is False:
        parts.append("false")
    elif isinstance(item, int):
        parts.append(int.__repr__(item))
    elif isinstance(item, float):
        parts.append(_float_text(item))
    elif isinstance(item, dict):
        parts.append("{")
        for index, (key, child) in enumerate(item.items()):
            if index:
                parts.append(",")
            parts.append(_encoder.encode(key))
            parts.append(":")
            _write(child, parts)
        parts.append("}")
    else:  # list or tuple (checked before)
        parts.append("[")
        for index, child in enumerate(item):
            if index:
                parts.append(",")
            _write(child, parts)
        parts.append("]")
