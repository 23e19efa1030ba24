"""Character rules shared by verbs, references and keys.

Every string we store must round-trip identically on PostgreSQL (which rejects NUL in text and
``\\u0000`` in jsonb), MySQL/MariaDB (``utf8mb4``) and SQLite: no NUL, no lone surrogates.
Identifiers (verbs, references, keys) also refuse control characters, which would otherwise
sort before the space that MySQL's ``PAD SPACE`` collations append, making comparisons differ
between databases.
"""

from __future__ import annotations

import re

_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_SURROGATE = re.compile(r"[\ud800-\udfff]")


def problem_with_text(value: str) -> str | None:
    """Why ``value`` cannot be stored as text on every database, or None."""
    if "\x00" in value:
        return "contains a NUL character"
    if _SURROGATE.search(value):
        return "contains a lone surrogate (not valid UTF-8)"
    return None


def problem_with_identifier(value: str) -> str | None:
    """Why ``value`` cannot be a verb, reference or key, or None."""
    if _CONTROL.search(value):
        return "contains a control character"
    if _SURROGATE.search(value):
        return "contains a lone surrogate (not valid UTF-8)"
    return None


def shown(value: object, limit: int = 60) -> str:
    """A short ``repr`` for an error message, whatever the value: an integer beyond Python's
    4,300-digit conversion limit, or an object whose ``repr`` fails, is described instead."""
    try:
        text = repr(value)
    except Exception:  # ValueError for huge integers; anything from a user's __repr__
        if isinstance(value, int):
            return f"an integer of about {int(value.bit_length() * 0.30103)} digits"
        return f"a {type(value).__name__}"
    return text if len(text) <= limit else text[: limit - 3] + "..."
