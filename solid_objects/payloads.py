"""Strict JSON: validation and encoding of arguments, results and state.

Everything an actor stores goes through :func:`encode`, which refuses what JSON cannot
represent faithfully (sets, NaN and infinities, datetimes, non-string keys, tuples are
accepted as lists, nesting deeper than :data:`MAX_DEPTH`) and measures the encoded size, so
bad input is rejected before anything is written.
"""

from __future__ import annotations

import json
import math
from typing import Any

from .errors import InvalidPayload, PayloadTooLarge

MAX_DEPTH = 100

_encoder = json.JSONEncoder(ensure_ascii=False, allow_nan=False, separators=(",", ":"))


def validate(value: Any, *, what: str = "value", max_depth: int = MAX_DEPTH) -> None:
    """Raise :class:`InvalidPayload` unless ``value`` is strict JSON.

    ``max_depth`` counts nested arrays and objects (``[[1]]`` is 2 deep); the database's own
    limit may be lower (MariaDB stores at most 31 levels), see ``Dialect.json_max_depth``.
    """
    stack: list[tuple[Any, int, str]] = [(value, 0, what)]
    while stack:
        item, depth, path = stack.pop()
        if depth >= max_depth and isinstance(item, dict | list | tuple):
            raise InvalidPayload(f"{what} is nested deeper than {max_depth} levels")
        if item is None or isinstance(item, bool | str):
            continue
        if isinstance(item, int):
            continue
        if isinstance(item, float):
            if not math.isfinite(item):
                raise InvalidPayload(f"{path} is {item!r}, which JSON cannot represent")
            continue
        if isinstance(item, dict):
            for key, child in item.items():
                if not isinstance(key, str):
                    raise InvalidPayload(
                        f"{path} has a non-string key {key!r} ({type(key).__name__})"
                    )
                stack.append((child, depth + 1, f"{path}[{key!r}]"))
            continue
        if isinstance(item, list | tuple):
            for index, child in enumerate(item):
                stack.append((child, depth + 1, f"{path}[{index}]"))
            continue
        raise InvalidPayload(f"{path} is a {type(item).__name__}, which is not JSON")


def encode(
    value: Any, *, what: str = "value", limit: int | None = None, max_depth: int = MAX_DEPTH
) -> str:
    """Validate and encode ``value``; raise :class:`PayloadTooLarge` past ``limit`` bytes."""
    validate(value, what=what, max_depth=max_depth)
    text = _encoder.encode(value)
    if limit is not None:
        size = len(text.encode("utf-8")) if not text.isascii() else len(text)
        if size > limit:
            raise PayloadTooLarge(f"{what} is {size} bytes; the limit is {limit} bytes")
    return text


def decode(text: Any) -> Any:
    """Decode a JSON column value as returned by a raw cursor (text, bytes or decoded)."""
    if text is None:
        return None
    if isinstance(text, bytes | bytearray | memoryview):
        text = bytes(text).decode("utf-8")
    if isinstance(text, str):
        return json.loads(text)
    return text
