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
