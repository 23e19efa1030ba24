"""An observable's committed value, read from a snapshot (no message, no lock)."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from ..references import ActorReference, Snapshot
from ..registry import get_spec

logger = logging.getLogger("solid_objects")


@dataclass(frozen=True, slots=True)
class ObservedValue:
    """The value with the position that orders it against broadcasts: a broadcast is newer
    when its ``(instance_id, state_revision)`` is (``instance_id`` 0: no instance yet)."""

    value: Any
    instance_id: int
    state_revision: int
    exists: bool


def snapshot(actor_type: str, actor_id: str) -> Snapshot[Any]:
    """The committed state of ``actor_type``/``actor_id`` (one read)."""
    return ActorReference(get_spec(actor_type), actor_id).snapshot()


def read(actor_type: str, actor_id: str, observable: str) -> ObservedValue:
    """Compute ``observable`` on the committed state of ``actor_type``/``actor_id`` (the
    attributes' defaults when the actor does not exist yet)."""
    return compute(actor_type, snapshot(actor_type, actor_id), observable)


def compute(actor_type: str, snapshot: Snapshot[Any], observable: str) -> ObservedValue:
    """``observable`` of ``actor_type`` evaluated on ``snapshot``; an observable that raises
    is logged and reads as ``None``."""
    spec = get_spec(actor_type)
    function = spec.observables[observable].function
    actor = spec.cls(snapshot.actor_id, dict(snapshot.state))
    try:
        value = function(actor)
    except Exception:
        logger.exception("observable %s of %s failed", observable, spec.actor_type)
        value = None
    return ObservedValue(
        value=value,
        instance_id=int(snapshot.instance_id or 0),
        state_revision=int(snapshot.revision),
        exists=bool(snapshot.exists),
    )
