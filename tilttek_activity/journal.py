"""Writing once: ``record_activity``, ``record_activities`` and ``cancel_activity``.

Every call validates everything first (:mod:`~tilttek_activity.validation`), then sends one
insert-once statement per chunk (:mod:`~tilttek_activity.db`), reads back the rows the
database kept when it wrote nothing, compares payloads, and queues the signals for after the
commit. No ORM objects are built on the way.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from django.db import DatabaseError, models, transaction

from .conf import database_alias, get_settings
from .db import backend_for
from .db.base import Backend, Identity
from .errors import ActivityError, ActivityNotFound, IdempotencyConflict, InvalidActivity
from .limits import CANCELLED, KEY_LENGTH, RECORDED, REFERENCE_LENGTH, VERB_LENGTH
from .notifying import listened, send_signals
from .records import decode_row
from .validation import Draft, json_text, validate_activity, validate_key, validate_occurred_at
from .values import ActivityEntry, Recorded

__all__ = ["cancel_activity", "record_activities", "record_activity"]

logger = logging.getLogger("tilttek_activity")

ITEM_FIELDS = frozenset(
    {"member", "verb", "object", "quantity", "context", "occurred_at", "idempotency_key"}
)
#: Attempts of a ``record_activities`` that is its own transaction, when deadlocks keep
#: choosing it.
ALONE_ATTEMPTS = 5
#: Columns per inserted row (plus one for the ordering column some backends send).
PARAMS_PER_ROW = 10
#: Data per multi-row statement, at most (estimated generously).
MAX_STATEMENT_BYTES = 4 * 1024 * 1024
#: A row without its context: four strings of at most 1,023 characters, 4 bytes each.
ROW_BYTES = 4 * (KEY_LENGTH + 2 * REFERENCE_LENGTH + VERB_LENGTH) + 128


def record_activity(
    member: models.Model | str,
    verb: str,
    *,
    object: models.Model | str | None = None,
    quantity: int = 1,
    context: dict[str, Any] | None = None,
    occurred_at: datetime | None = None,
    idempotency_key: str | None = None,
    using: str | None = None,
) -> Recorded:
    """Record that ``member`` did ``verb`` (to ``object``), once per idempotency key.

    Returns ``Recorded(entry, created)``: the row the database kept and whether this call
    wrote it. Never aborts the caller's transaction on a duplicate.
    """
    settings = get_settings()
    now = _now()
    draft = validate_activity(
        member,
        verb,
        object=object,
        quantity=quantity,
        context=context,
        occurred_at=occurred_at,
        idempotency_key=idempotency_key,
        now=now,
        max_future=settings.MAX_FUTURE,
    )
    alias = database_alias(using)
    return _write(backend_for(alias), [draft])[0]


def record_activities(
    items: Iterable[Mapping[str, Any]], *, using: str | None = None
) -> list[Recorded]:
    """Record many activities with multi-row statements; one ``Recorded`` per item, in order.

    Each item is a mapping of :func:`record_activity`'s arguments (``member`` and ``verb``
    required). Everything is validated before the first statement, and the whole call is
    atomic: an :class:`IdempotencyConflict` on any item leaves nothing written.
    """
    settings = get_settings()
    if isinstance(items, Mapping | str | bytes | bytearray) or not isinstance(items, Iterable):
        raise InvalidActivity(
            "items", f"must be an iterable of mappings (a list), got {type(items).__name__}"
        )
    alias = database_alias(using)
    now = _now()
    drafts = [
        _draft_from_item(item, index, now, settings.MAX_FUTURE) for index, item in enumerate(items)
    ]
    if not drafts:
        return []
    backend = backend_for(alias)
    alone = backend.outside_transaction()
    for attempt in range(1, ALONE_ATTEMPTS + 1):
        try:
            with transaction.atomic(using=alias):
                backend.alone = alone
                try:
                    return _write(backend, drafts, chunk=settings.BULK_BATCH_SIZE)
                finally:
                    backend.alone = False
        except DatabaseError as exc:
            # Our own transaction, chosen as a deadlock victim: nothing else was in it.
            if not alone or attempt == ALONE_ATTEMPTS or not backend.retryable(exc):
                raise
            logger.info("Retrying record_activities after a deadlock (%s)", exc)
    raise AssertionError("unreachable")


def cancel_activity(
    idempotency_key: str, *, occurred_at: datetime | None = None, using: str | None = None
) -> Recorded:
    """Write the ``cancelled`` entry of a recorded activity (same key), once.

    The cancellation copies the recorded entry's member, verb, object, quantity and context;
    its ``occurred_at`` is when it was cancelled (now unless given). Cancelling twice
    returns the kept cancellation with ``created=False``; a key that was never recorded
    raises :class:`ActivityNotFound`.
    """
    settings = get_settings()
    key = validate_key(idempotency_key)
    now = _now()
    moment, given = validate_occurred_at(occurred_at, now=now, max_future=settings.MAX_FUTURE)
    alias = database_alias(using)
    backend = backend_for(alias)
    rows = backend.read_settled([(key, RECORDED)])
    if not rows:
        raise ActivityNotFound(key)
    recorded = decode_row(rows[(key, RECORDED)], backend.timezone)
    draft = Draft(
        CANCELLED,
        key,
        recorded.member,
        recorded.verb,
        recorded.object,
        recorded.quantity,
        recorded.context,
        json_text(recorded.context),
        moment,
        given,
        now,
    )
    return _write(backend, [draft])[0]


def _write(
    backend: Backend, drafts: Sequence[Draft], *, chunk: int | None = None
) -> list[Recorded]:
    """Insert-once every draft; compare with what was kept; queue signals on commit."""
    distinct: dict[Identity, Draft] = {}
    for draft in drafts:
        first = distinct.setdefault(draft.identity, draft)
        if first is not draft:
            differing = draft.differences(first)
            if differing:
                raise IdempotencyConflict(draft.idempotency_key, draft.kind, differing, None)
    unique = list(distinct.values())
    size = min(chunk or len(unique), backend.max_rows_per_statement(PARAMS_PER_ROW) or len(unique))
    results: dict[Identity, Recorded] = {}
    created: list[ActivityEntry] = []
    for part in _chunks(unique, size):
        outcome = backend.insert_once(part)
        lost = [
            d.identity
            for d in part
            if d.identity not in outcome.created and d.identity not in outcome.kept
        ]
        if lost:
            outcome.kept.update(backend.read_kept(lost))
        for draft in part:
            position = outcome.created.get(draft.identity)
            if position is not None:
                entry = draft.entry(position)
                created.append(entry)
                results[draft.identity] = Recorded(entry, True)
                continue
            row = outcome.kept.get(draft.identity)
            if row is None:
                raise ActivityError(
                    f"entry {draft.idempotency_key!r} ({draft.kind}) was neither written nor found"
                )
            kept = decode_row(row, backend.timezone)
            differing = draft.differences(kept)
            if differing:
                raise IdempotencyConflict(draft.idempotency_key, draft.kind, differing, kept)
            results[draft.identity] = Recorded(kept, False)
    if created and listened([entry.kind for entry in created]):
        transaction.on_commit(lambda: send_signals(created, backend.alias), using=backend.alias)
    seen: set[Identity] = set()
    answers = []
    for draft in drafts:
        recorded = results[draft.identity]
        if draft.identity in seen and recorded.created:
            recorded = Recorded(recorded.entry, False)
        seen.add(draft.identity)
        answers.append(recorded)
    return answers


def _chunks(drafts: Sequence[Draft], size: int) -> Iterable[Sequence[Draft]]:
    """Runs of at most ``size`` drafts and about ``MAX_STATEMENT_BYTES`` of data (MySQL's
    ``max_allowed_packet`` is 16 MB by default: big contexts must not make one statement)."""
    start, weight = 0, 0
    for index, draft in enumerate(drafts):
        row = 4 * len(draft.context_json) + ROW_BYTES  # utf8mb4: up to 4 bytes a character
        if index > start and (index - start >= size or weight + row > MAX_STATEMENT_BYTES):
            yield drafts[start:index]
            start, weight = index, 0
        weight += row
    if start < len(drafts):
        yield drafts[start:]


def _draft_from_item(item: Mapping[str, Any], index: int, now: datetime, max_future: Any) -> Draft:
    if not isinstance(item, Mapping):
        raise InvalidActivity(f"items[{index}]", f"must be a mapping, got {type(item).__name__}")
    unknown = [name for name in item if name not in ITEM_FIELDS]
    if unknown:
        names = ", ".join(sorted(repr(name)[:40] for name in unknown))
        raise InvalidActivity(f"items[{index}]", f"unknown field(s): {names}")
    for required in ("member", "verb"):
        if required not in item:
            raise InvalidActivity(f"items[{index}].{required}", "is required")
    arguments = dict(item)
    try:
        return validate_activity(
            arguments.pop("member"),
            arguments.pop("verb"),
            now=now,
            max_future=max_future,
            **arguments,
        )
    except InvalidActivity as exc:
        raise InvalidActivity(f"items[{index}].{exc.field}", exc.message) from None


def _now() -> datetime:
    return datetime.now(UTC).replace(microsecond=0)
