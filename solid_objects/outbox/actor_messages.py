"""Actor-to-actor messages: ``self.send_to(ref).op(**kw)`` stages an ``__actor_message__``
effect in the sender's fenced commit; the effect role delivers it by enqueueing into the
target's mailbox as an ``internal`` message, in the same transaction that marks the effect
completed. The idempotency key (the sender's, or ``effect:<effect_id>``) makes a
redelivery return the message already enqueued.

When the target lives on another shard (``SOLID_OBJECTS["DATABASES"]``) no transaction
spans both: the message is enqueued and committed on the target's shard first, then the
effect is marked completed on the sender's. A crash between the two leaves the effect due;
its redelivery finds the message by its idempotency key, so it is applied once."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from ..errors import InvalidPayload
from ..mailbox import Enqueued, enqueue
from ..registry import get_spec
from ..shards import database_for

if TYPE_CHECKING:
    from ..db.outbox import EffectRow


def idempotency_key(row: EffectRow) -> str:
    return row.arguments.get("idempotency_key") or f"effect:{row.effect_id}"


def _target(row: EffectRow) -> tuple[str, str, str]:
    body = row.arguments
    try:
        return body["actor_type"], body["actor_id"], body["operation"]
    except KeyError as exc:
        raise InvalidPayload(f"actor message effect {row.effect_id} lacks {exc}") from None


def target_database(row: EffectRow) -> str:
    """The shard of the actor an ``__actor_message__`` effect is addressed to."""
    actor_type, actor_id, _ = _target(row)
    return database_for(actor_type, actor_id)


def deliver(row: EffectRow) -> Enqueued:
    """Enqueue the message an ``__actor_message__`` effect carries on the target's shard:
    inside the caller's transaction when that is the effect's own database (it commits
    exactly when the effect is recorded as completed), in a transaction of its own when the
    target lives on another shard."""
    body = row.arguments
    actor_type, actor_id, operation = _target(row)
    alias = database_for(actor_type, actor_id)
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
