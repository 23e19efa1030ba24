"""Running one task inside its turn: the task function is ordinary application code.

Unlike an actor handler, a task may write to the database and call actors (the write guard
is lifted for it): a task is retried as a whole, at least once, like any task queue's. The
turn's fenced commit then records its return value, or the runtime records its exception and
retries it after ``RETRY_DELAY`` up to ``MAX_ATTEMPTS``, then dead-letters it (``FAILED``).
"""

from __future__ import annotations

import logging
import os
import socket
from datetime import datetime
from typing import Any

from django.utils import timezone
from django.utils.module_loading import import_string

from ..write_guard import application_code
from . import compat

logger = logging.getLogger("solid_objects.tasks")

#: ``worker_ids`` entry of an earlier attempt: the runtime keeps no per-attempt worker record.
UNRECORDED_WORKER = "unrecorded"


class TaskExit(Exception):
    """A task ended with a ``BaseException`` that is not an ``Exception``: ``SystemExit``
    (``sys.exit()``), ``asyncio.CancelledError``, ``GeneratorExit``. Raised on, it would end
    the worker thread running the task (and the task would run again, forever); it fails the
    task at once instead, as Django's own backends do. ``KeyboardInterrupt`` is let through.

    Its message is the original exception's class path, a newline, then its traceback:
    :mod:`solid_objects.tasks.results` reports the original in ``result.errors``.
    """

    retryable = False

    def __init__(self, original: BaseException) -> None:
        self.exception_class_path = compat.module_path(type(original))
        super().__init__(f"{self.exception_class_path}\n{compat.exception_traceback(original)}")


#: How a :class:`TaskExit` is stored (the class path of a turn's error).
TASK_EXIT_PATH = f"{TaskExit.__module__}.{TaskExit.__qualname__}"


def worker_id(hostname: str | None = None, pid: int | None = None) -> str:
    """``hostname:pid`` of a worker process (this one by default)."""
    return f"{hostname or socket.gethostname()}:{pid if pid is not None else os.getpid()}"


def attempt_worker_ids(attempts: int, current: str | None) -> list[str]:
    """One entry per attempt (``TaskResult.attempts`` is their count), the last one the
    worker running or that ran the latest attempt when it is known."""
    attempts = max(attempts, 0)
    if attempts == 0:
        return []
    ids = [UNRECORDED_WORKER] * attempts
    if current is not None:
        ids[-1] = current
    return ids


def load_task(task_path: str, backend: str, queue: str, priority: int, run_after: Any) -> Any:
    """The ``Task`` a message names, with the options it was enqueued with."""
    task = import_string(task_path)
    if not isinstance(task, compat.Task):
        raise compat.InvalidTask(f"{task_path} is not a django.tasks Task")
    when = _parse_datetime(run_after)
    return task.using(backend=backend, queue_name=queue, priority=priority, run_after=when)


def _parse_datetime(value: Any) -> datetime | None:
    if value is None or isinstance(value, datetime):
        return value
    return datetime.fromisoformat(str(value))


def execute(
    message: Any,
    *,
    task_path: str,
    args: list[Any],
    kwargs: dict[str, Any],
    backend: str,
    queue: str,
    priority: int,
    run_after: str | None,
) -> Any:
    """Call the task function of one message (``message`` is the turn's message context);
    return its JSON-normalised return value or let its exception fail the turn (a
    ``BaseException`` other than ``KeyboardInterrupt`` as a :class:`TaskExit`)."""
    task = load_task(task_path, backend, queue, priority, run_after)
    now = timezone.now()
    result: compat.TaskResult[Any, Any] = compat.TaskResult(
        task=task,
        id=message.request_id,
        status=compat.TaskResultStatus.RUNNING,
        enqueued_at=None,
        started_at=now,
        finished_at=None,
        last_attempted_at=now,
        args=args,
        kwargs=kwargs,
        backend=backend,
        errors=[],
        worker_ids=attempt_worker_ids(message.attempt or 1, worker_id()),
    )
    sender = type(task.get_backend())
    # Signal receivers are application code too (they may write).
    with application_code():
        compat.task_started.send(sender=sender, task_result=result)
        try:
            if task.takes_context:
                value = task.call(compat.TaskContext(task_result=result), *args, **kwargs)
            else:
                value = task.call(*args, **kwargs)
            try:
                value = compat.normalize_json(value)
            except (TypeError, ValueError) as exc:
                # Recorded as Django's backends record it (TypeError: Unsupported type...),
                # and not retried: the same value comes back on every attempt.
                exc.retryable = False  # type: ignore[union-attr]
                raise
        except BaseException as exc:
            object.__setattr__(result, "finished_at", timezone.now())
            object.__setattr__(result, "status", compat.TaskResultStatus.FAILED)
            result.errors.append(
                compat.TaskError(
                    exception_class_path=compat.module_path(type(exc)),
                    traceback=compat.exception_traceback(exc),
                )
            )
            compat.task_finished.send(sender=sender, task_result=result)
            if isinstance(exc, Exception | KeyboardInterrupt):
                raise
            raise TaskExit(exc) from None  # its message carries the original traceback
        object.__setattr__(result, "finished_at", timezone.now())
        object.__setattr__(result, "status", compat.TaskResultStatus.SUCCESSFUL)
        object.__setattr__(result, "_return_value", value)
        compat.task_finished.send(sender=sender, task_result=result)
    return value
