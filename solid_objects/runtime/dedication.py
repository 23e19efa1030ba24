"""Dedicated workers: ``run_actor_worker --actor-types a,b``, ``--exclude-actor-types`` and,
for the ``django.tasks`` backend, ``--queues`` (see ``docs/operations.md``)."""

from __future__ import annotations

from ..db.work_filter import ActorSelection, WorkFilter
from ..registry import actor_types as registered_types
from ..tasks.naming import TASK_ACTOR_TYPE, TASK_PREFIX, ordered_queue_actor_id


class UnknownWork(ValueError):
    """A name given to a dedicated worker matches nothing it could run."""


def names(text: str | None) -> tuple[str, ...]:
    """``"a, b,,c"`` → ``("a", "b", "c")``."""
    if not text:
        return ()
    return tuple(dict.fromkeys(part.strip() for part in text.split(",") if part.strip()))


def work_filter(
    actor_types: tuple[str, ...] = (),
    exclude_actor_types: tuple[str, ...] = (),
    queues: tuple[str, ...] = (),
) -> WorkFilter | None:
    """The filter of a dedicated worker (``None``: every actor). Actor types must be
    registered (a typo would leave a worker idle forever): :class:`UnknownWork`."""
    known = registered_types()
    unknown = [name for name in (*actor_types, *exclude_actor_types) if name not in known]
    if unknown:
        raise UnknownWork(f"no actor type {', '.join(map(repr, unknown))} is registered")
    selections: tuple[ActorSelection, ...] = ()
    if queues:
        selections = (
            ActorSelection(
                TASK_ACTOR_TYPE,
                ids=tuple(ordered_queue_actor_id(queue) for queue in queues),
                prefixes=tuple(f"{TASK_PREFIX}{queue}:" for queue in queues),
            ),
        )
    work = WorkFilter(tuple(actor_types), tuple(exclude_actor_types), selections)
    return work or None
