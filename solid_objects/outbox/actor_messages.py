"""Actor-to-actor messages: ``self.send_to(ref).op(**kw)`` stages an ``__actor_message__``
effect in the sender's fenced commit; the effect role delivers it by enqueueing into the
target's mailbox as an ``internal`` message, in the same transaction that marks the effect
completed. The idempotency key (the sender's, or ``effect:<effect_id>``) makes a
redelivery return the message already enqueued."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from ..errors import InvalidPayload
from ..mailbox import Enqueued, enqueue
from ..registry import get_spec

if TYPE_CHECKING:
    from ..db.outbox import EffectRow


def idempotency_key(row: EffectRow) -> str:
    return row.arguments.get("idempotency_key") or f"effect:{row.effect_id}"


def deliver(row: EffectRow, alias: str) -> Enqueued:
    """Enqueue the message an ``__actor_message__`` effect carries (inside the caller's
    transaction, so it commits exactly when the effect is recorded as completed)."""
    body = row.arguments
    try:
        actor_type, actor_id, operation = body["actor_type"], body["actor_id"], body["operation"]
    except KeyError as exc:
        raise InvalidPayload(f"actor message effect {row.effect_id} lacks {exc}") from None
    return enqueue(
        get_spec(actor_type),
        actor_id,
        operation,
        body.get("arguments") or {},
        delivery_mode="internal",
        idempotency_key=idempotency_key(row),
        available_at=_datetime(body.get("available_at")),
        using=alias,
    )


def _datetime(value: Any) -> datetime | None:
    if not value:
        return None
    try:
        parsed = datetime.fromisoformat(value)
    except (TypeError, ValueError):
        raise InvalidPayload(f"available_at {value!r} is not an ISO datetime") from None
    return parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=UTC)
