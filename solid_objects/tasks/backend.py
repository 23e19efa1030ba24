"""``SolidObjectsBackend``: the ``django.tasks`` backend (enqueue, results, checks).

``enqueue`` is the mailbox's: validated before anything is written, one short transaction,
or a savepoint of the caller's ``atomic()`` so the task commits or rolls back with the
caller's writes.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from asgiref.sync import sync_to_async
from django.core import checks
from django.db import transaction
from django.utils import timezone

from ..conf import get_settings
from ..db.connections import Attempt, recovering
from ..mailbox import Enqueued, enqueue, validate_identifier
from ..registry import get_spec
from ..shards import database_for, databases
from . import compat, results
from .naming import (
    RUN_OPERATION,
    TASK_ACTOR_TYPE,
    new_task_actor_id,
    ordered_queue_actor_id,
)

#: Priority among due tasks of unordered queues. A task of priority ``p > 0`` is claimed as
#: though it had been enqueued ``p`` seconds earlier (ahead of up to ``p`` seconds of
#: backlog); one of ``p < 0`` as though enqueued ``|p|`` hundredths of a second later (behind
#: the tasks enqueued with it, at most one second's wait on an idle queue). Ordered queues
#: ignore priority: their order is the enqueue order.
PRIORITY_HEAD_START = timedelta(seconds=1)
PRIORITY_HOLD_BACK = timedelta(seconds=0.01)


def priority_offset(priority: int) -> timedelta:
    """How much earlier (positive) or later (negative) than now the task is due."""
    if priority >= 0:
        return PRIORITY_HEAD_START * priority
    return PRIORITY_HOLD_BACK * priority


@dataclass(frozen=True, slots=True)
class PreparedTask:
    """A task call as the task actor's ``run`` message."""

    actor_id: str
    arguments: dict[str, Any]
    available_at: datetime | None
    args: list[Any]
    kwargs: dict[str, Any]


class SolidObjectsBackend(compat.BaseTaskBackend):
    """Durable tasks run by ``run_actor_worker``; see ``docs/tasks.md``.

    ``OPTIONS``: ``ORDERED_QUEUES`` (queue names whose tasks run one at a time in enqueue
    order; they are valid queue names without being listed in ``QUEUES``), ``DATABASE``
    (the alias, default ``SOLID_OBJECTS["DATABASE"]``).
    """

    supports_defer = True
    supports_async_task = True
    supports_get_result = True
    supports_priority = True

    def __init__(self, alias: str, params: dict[str, Any]) -> None:
        super().__init__(alias, params)
        ordered = self.options.get("ORDERED_QUEUES", [])
        self._ordered_problem: str | None = None
        if isinstance(ordered, str) or not isinstance(ordered, list | tuple | set | frozenset):
            self._ordered_problem = "must be a list of queue names"
            ordered = []
        elif not all(isinstance(name, str) and name for name in ordered):
            self._ordered_problem = "must hold non-empty strings only"
            ordered = [name for name in ordered if isinstance(name, str) and name]
        self.ordered_queues: frozenset[str] = frozenset(ordered)
        if self.queues:
            # Naming a queue ordered declares it: QUEUES need not repeat it.
            self.queues = set(self.queues) | self.ordered_queues
        database = self.options.get("DATABASE")
        self._database: str | None = database if isinstance(database, str) else None

    @property
    def database(self) -> str:
        """The alias of ``OPTIONS["DATABASE"]``, else the actors' home alias."""
        return self._database or get_settings().DATABASE

    def database_of(self, actor_id: str) -> str:
        """Where the task actor ``actor_id`` lives: ``OPTIONS["DATABASE"]``, else its shard."""
        return self._database or database_for(TASK_ACTOR_TYPE, actor_id)

    # -- enqueue -----------------------------------------------------------------------
    def prepare(self, task: Any, args: Any, kwargs: Any) -> PreparedTask:
        """The task actor message that runs ``task(*args, **kwargs)``, validated; what
        :meth:`enqueue` writes, and what a schedule's turn sends (docs/tasks.md)."""
        self.validate_task(task)
        # As every django.tasks backend: TypeError ("Unsupported type") for a value JSON
        # cannot hold, ValueError for bytes that are not UTF-8. What JSON holds but the
        # runtime refuses (NaN, over-deep nesting, MAX_PAYLOAD_BYTES) is InvalidPayload,
        # raised by the enqueue before anything is written.
        stored_args = [compat.normalize_json(value) for value in args]
        stored_kwargs = {key: compat.normalize_json(value) for key, value in kwargs.items()}
        queue = task.queue_name
        ordered = queue in self.ordered_queues
        actor_id = ordered_queue_actor_id(queue) if ordered else new_task_actor_id(queue)
        validate_identifier(actor_id, "queue name")
        available_at = task.run_after
        if available_at is None and not ordered and task.priority:
            available_at = timezone.now() - priority_offset(task.priority)
        arguments = {
            "task": compat.module_path(task.func),
            "args": stored_args,
            "kwargs": stored_kwargs,
            "backend": self.alias,
            "queue": queue,
            "priority": task.priority,
            "run_after": task.run_after.isoformat() if task.run_after is not None else None,
        }
        return PreparedTask(actor_id, arguments, available_at, stored_args, stored_kwargs)

    def enqueue(self, task: Any, args: Any, kwargs: Any) -> Any:
        prepared = self.prepare(task, args, kwargs)
        actor_id, arguments, available_at = (
            prepared.actor_id,
            prepared.arguments,
            prepared.available_at,
        )
        stored_args, stored_kwargs = prepared.args, prepared.kwargs
        spec = get_spec(TASK_ACTOR_TYPE)
        alias = self.database_of(actor_id)

        request_id = str(uuid.uuid4())  # the same if the write runs again

        def write(attempt: Attempt) -> Enqueued:
            return enqueue(
                spec,
                actor_id,
                RUN_OPERATION,
                arguments,
                available_at=available_at,
                using=alias,
                committing=attempt.committing,
                request_id=request_id,
            )

        enqueued = recovering(alias, "enqueue()", write)
        result: compat.TaskResult[Any, Any] = compat.TaskResult(
            task=task,
            id=enqueued.request_id,
            status=compat.TaskResultStatus.READY,
            enqueued_at=timezone.now(),
            started_at=None,
            finished_at=None,
            last_attempted_at=None,
            args=stored_args,
            kwargs=stored_kwargs,
            backend=self.alias,
            errors=[],
            worker_ids=[],
        )
        sender = type(self)
        transaction.on_commit(
            lambda: compat.task_enqueued.send(sender=sender, task_result=result), using=alias
        )
        return result

    # -- results -----------------------------------------------------------------------
    def get_result(self, result_id: str) -> Any:
        # A result id does not say which shard holds its task: each is asked in turn.
        aliases = (self._database,) if self._database else databases()
        for alias in aliases[:-1]:
            try:
                return self._read(alias, result_id)
            except compat.TaskResultDoesNotExist:
                continue
        return self._read(aliases[-1], result_id)

    def _read(self, alias: str, result_id: str) -> Any:
        return recovering(alias, "get_result()", lambda attempt: results.read(alias, result_id))

    async def aget_result(self, result_id: str) -> Any:
        return await sync_to_async(self.get_result, thread_sensitive=True)(result_id)

    # -- checks ------------------------------------------------------------------------
    def check(self, **kwargs: Any) -> list[checks.CheckMessage]:
        messages = list(super().check(**kwargs))
        if self._ordered_problem is not None:
            messages.append(
                checks.Error(
                    f'TASKS["{self.alias}"]["OPTIONS"]["ORDERED_QUEUES"] {self._ordered_problem}',
                    id="solid_objects.E101",
                )
            )
        return messages
