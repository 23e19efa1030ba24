"""Reading the journal: ``entries()`` and the SQL filters the admin and rebuilds share.

Every filter is SQL. A verb prefix is compared exactly with ``SUBSTRING(verb, 1, n) = prefix``
(no ``LIKE``, so ``_`` and ``%`` in a verb mean themselves) and bounded by the range
``verb >= prefix AND verb < successor(prefix)``, which lets the ``(verb, occurred_at)`` index
serve it: the binary collation of ``verb`` orders by code point on every database, the
order the successor is computed in. Rows are read through a raw cursor and decoded by
:func:`~tilttek_activity.records.decode_row`, so a row that does not decode raises
:class:`~tilttek_activity.errors.UnexpectedValueError`.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from django.db import models
from django.db.models import Q, Value
from django.db.models.functions import Substr
from django.db.models.lookups import Exact

from .conf import database_alias
from .db import backend_for
from .errors import InvalidActivity
from .limits import INT64_MAX, INT64_MIN, KINDS
from .records import decode_row
from .references import reference
from .text import shown
from .validation import validate_verb
from .values import ActivityEntry

__all__ = [
    "MAX_LIMIT",
    "entries",
    "entries_statement",
    "period_q",
    "prefix_successor",
    "select_entries",
    "validate_position",
    "verb_prefix_q",
]

MAX_LIMIT = 10_000
_MAX_CODE_POINT = 0x10FFFF
_SURROGATES = range(0xD800, 0xE000)


def entries(
    member: models.Model | str | None = None,
    object: models.Model | str | None = None,
    verb: str | None = None,
    verb_prefix: str | None = None,
    since: datetime | None = None,
    until: datetime | None = None,
    kind: str | None = "recorded",
    after_position: int | None = None,
    limit: int = 100,
    using: str | None = None,
    *,
    before_position: int | None = None,
    newest_first: bool = False,
) -> list[ActivityEntry]:
    """Entries matching every given filter, at most ``limit``, in position order (latest
    first with ``newest_first=True``, for a feed).

    ``since`` is inclusive and ``until`` exclusive (on ``occurred_at``); ``kind=None`` returns
    both kinds; ``after_position`` / ``before_position`` bound the positions (exclusive):
    pass the last position of a page to get the next one (``before_position`` when reading
    newest first). Every argument is checked before any SQL is sent.

    A feed of one member or one object reads a page backwards from the
    ``tilttek_activity_entry_member`` / ``_object`` index (``(member, position)``), on every
    database: no sort of the member's entries (docs/activity.md shows the plans).
    """
    alias, sql, params = entries_statement(
        member,
        object,
        verb,
        verb_prefix,
        since,
        until,
        kind,
        after_position,
        limit,
        using,
        before_position=before_position,
        newest_first=newest_first,
    )
    return run_entries(alias, sql, params)


def entries_statement(
    member: models.Model | str | None = None,
    object: models.Model | str | None = None,
    verb: str | None = None,
    verb_prefix: str | None = None,
    since: datetime | None = None,
    until: datetime | None = None,
    kind: str | None = "recorded",
    after_position: int | None = None,
    limit: int = 100,
    using: str | None = None,
    *,
    before_position: int | None = None,
    newest_first: bool = False,
) -> tuple[str, str, list[Any]]:
    """``(alias, sql, params)`` of the read :func:`entries` sends (to EXPLAIN it)."""
    q = Q()
    if member is not None:
        q &= Q(member=reference(member, field="member"))
    if object is not None:
        q &= Q(object=reference(object, field="object"))
    if verb is not None:
        q &= Q(verb=validate_verb(verb))
    if verb_prefix is not None:
        q &= verb_prefix_q(verb_prefix)
    q &= period_q(since, until)
    if kind is not None:
        if not isinstance(kind, str) or kind not in KINDS:
            raise InvalidActivity("kind", f"must be one of {KINDS} or None, got {shown(kind)}")
        q &= Q(kind=kind)
    if after_position is not None:
        q &= Q(position__gt=validate_position(after_position, "after_position"))
    if before_position is not None:
        q &= Q(position__lt=validate_position(before_position, "before_position"))
    if not isinstance(newest_first, bool):
        raise InvalidActivity("newest_first", f"must be a bool, got {type(newest_first).__name__}")
    if isinstance(limit, bool) or not isinstance(limit, int) or not 0 < limit <= MAX_LIMIT:
        raise InvalidActivity("limit", f"must be an integer between 1 and {MAX_LIMIT}")
    alias = database_alias(using)
    sql, params = select_statement(alias, q, limit, newest_first=newest_first)
    return alias, sql, params


def validate_position(value: Any, field: str) -> int:
    """A journal position: a 64-bit integer (what every database's ``BIGINT`` holds)."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidActivity(field, f"must be an integer, got {type(value).__name__}")
    if not INT64_MIN <= value <= INT64_MAX:
        raise InvalidActivity(field, "must fit in a 64-bit integer (journal positions do)")
    return int(value)


def verb_prefix_q(prefix: str, field: str = "verb_prefix") -> Q:
    """Verbs starting with ``prefix``, exactly (binary, case-sensitive, no wildcards)."""
    prefix = validate_verb(prefix, field)
    exact = Exact(Substr("verb", 1, len(prefix)), Value(prefix, output_field=models.CharField()))
    q = Q(exact) & Q(verb__gte=prefix)
    upper = prefix_successor(prefix)
    if upper is not None:
        q &= Q(verb__lt=upper)
    return q


def verbs_q(prefixes: Sequence[str]) -> Q:
    """Any of several prefixes (a projection's ``verbs``); no filter when empty."""
    if not prefixes:
        return Q()
    q = Q()
    for prefix in prefixes:
        q |= verb_prefix_q(prefix, "verbs")
    return q


def prefix_successor(prefix: str) -> str | None:
    """The smallest string greater than every string starting with ``prefix``, in code-point
    order; None when there is none (a prefix made only of U+10FFFF)."""
    chars = list(prefix)
    while chars and ord(chars[-1]) == _MAX_CODE_POINT:
        chars.pop()
    if not chars:
        return None
    following = ord(chars[-1]) + 1
    if following in _SURROGATES:
        following = _SURROGATES.stop
    chars[-1] = chr(following)
    return "".join(chars)


def period_q(since: datetime | None, until: datetime | None) -> Q:
    """``since <= occurred_at < until``; either bound may be None."""
    q = Q()
    if since is not None:
        q &= Q(occurred_at__gte=_aware(since, "since"))
    if until is not None:
        q &= Q(occurred_at__lt=_aware(until, "until"))
    return q


def select_entries(
    alias: str, q: Q, limit: int, *, newest_first: bool = False
) -> list[ActivityEntry]:
    """Run an ORM-built filter through a raw cursor and decode the rows ourselves."""
    sql, params = select_statement(alias, q, limit, newest_first=newest_first)
    return run_entries(alias, sql, params)


def select_statement(
    alias: str, q: Q, limit: int, *, newest_first: bool = False
) -> tuple[str, list[Any]]:
    """The SQL of an ORM-built filter, in position order, selecting ``COLUMNS``."""
    from .models import Entry

    backend = backend_for(alias)
    query = (
        Entry.objects.using(alias)
        .filter(q)
        .order_by("-position" if newest_first else "position")
        .values_list(*backend.select_fields())[:limit]
    )
    sql, params = query.query.get_compiler(using=alias).as_sql()
    return sql, list(params)


def run_entries(alias: str, sql: str, params: Sequence[Any]) -> list[ActivityEntry]:
    backend = backend_for(alias)
    tz = backend.timezone
    return [decode_row(row, tz) for row in backend.read_compiled(sql, params)]


def _aware(value: Any, field: str) -> datetime:
    """An aware datetime, in UTC (every database compares it the same way)."""
    if not isinstance(value, datetime):
        raise InvalidActivity(field, f"must be a datetime, got {type(value).__name__}")
    try:
        offset = value.utcoffset()
        moment = None if offset is None else value.astimezone(UTC)
    except (OverflowError, ValueError, TypeError) as exc:
        raise InvalidActivity(field, f"{value!r} cannot be converted to UTC ({exc})") from None
    if moment is None:
        raise InvalidActivity(field, "must be timezone-aware (naive datetimes are refused)")
    return moment
