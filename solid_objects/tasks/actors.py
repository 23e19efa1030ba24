"""The internal actor that runs tasks: its ``run`` operation calls the task function.

Registered by autodiscovery through ``solid_objects.actors``; it imports the task machinery
only when a task runs, so a project without ``django.tasks`` is unaffected.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from ..actor import Actor
from ..conf import get_settings
from .naming import TASK_ACTOR_TYPE


class _MessageRetention:
    """``instance_retention`` of the task actor: ``MESSAGE_RETENTION`` as configured, so an
    idle task actor (and with it its result) goes when its messages would."""

    def __get__(self, instance: object, owner: type | None = None) -> timedelta:
        return get_settings().MESSAGE_RETENTION


class TaskActor(Actor):
    """One ordered queue (``queue:<name>``) or one task (``task:<queue>:<uuid>``). Stateless."""

    actor_type = TASK_ACTOR_TYPE
    instance_retention = _MessageRetention()
    # Tasks of plain queues are batched like other cold actors: one claim and one commit for
    # many. A task that blocks (I/O, waiting for another task) gets the tasks claimed behind
    # it handed back after MAX_COMMIT_DELAY (solid_objects.hand_back), so other threads and
    # workers run them meanwhile.

    def run(
        self,
        task: str,
        args: list[Any],
        kwargs: dict[str, Any],
        backend: str,
        queue: str,
        priority: int = 0,
        run_after: str | None = None,
    ) -> Any:
        from .execution import execute

        return execute(
            self.message,
            task_path=task,
            args=args,
            kwargs=kwargs,
            backend=backend,
            queue=queue,
            priority=priority,
            run_after=run_after,
        )
