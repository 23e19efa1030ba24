"""Journal entries of turns whose actor is not on the journal's database.

``self.record_activity`` writes the entry inside the turn's fenced commit when the journal
(``TILTTEK_ACTIVITY["DATABASE"]``) is the actor's own database. When it is not (a shard of
``SOLID_OBJECTS["DATABASES"]``, or a journal kept apart), no transaction spans both: the
turn stages a ``__record_activity__`` effect in its fenced commit instead, and the effect
role writes the entry with :func:`tilttek_activity.record_activity`, once per idempotency
key. A redelivery (a worker that died after writing, before recording the effect) finds the
entry already there; the entry is in the journal once the effect completed, shortly after
the turn.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING

from tilttek_activity.journal import record_activity

from ..errors import InvalidPayload

if TYPE_CHECKING:
    from ..db.outbox import EffectRow


def write(row: EffectRow) -> None:
    """Write the entry a ``__record_activity__`` effect carries (raises on failure: the
    effect is retried, or dead for an error that no retry can change)."""
    body = row.arguments
    try:
        occurred_at = datetime.fromisoformat(body["occurred_at"])
        record_activity(
            body["member"],
            body["verb"],
            object=body["object"],
            quantity=body["quantity"],
            context=body["context"],
            occurred_at=occurred_at,
            idempotency_key=body["idempotency_key"],
        )
    except (KeyError, TypeError) as exc:
        raise InvalidPayload(f"journal entry effect {row.effect_id} lacks {exc}") from None
