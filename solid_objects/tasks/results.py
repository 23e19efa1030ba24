"""Reading a task's result back from the mailbox rows (``get_result`` / ``refresh``).

Status is table membership, as for any message: a ready row is ``READY`` (a retry waiting
included), a claimed row ``RUNNING``, a dead letter ``FAILED``, a completed message
``SUCCESSFUL``. A dead letter an operator retried follows the message it was retried as.
"""

from __future__ import annotations

from typing import Any

from django.db.models import Exists, OuterRef, Subquery

from ..models import ClaimedMessage, DeadLetter, Message, ReadyMessage
from . import compat
from .execution import TASK_EXIT_PATH, attempt_worker_ids, load_task, worker_id
from .naming import RUN_OPERATION, TASK_ACTOR_TYPE

#: How many operator retries of a dead-lettered task are followed.
MAX_RETRIES_FOLLOWED = 20

_FIELDS = (
    "id",
    "arguments",
    "attempt_count",
    "result",
    "error",
    "enqueued_at",
    "started_at",
    "completed_at",
    "last_failed_at",
    "is_ready",
    "claimed_host",
    "claimed_pid",
)


def _message(alias: str, **where: Any) -> dict[str, Any] | None:
    claimed = ClaimedMessage.objects.using(alias).filter(message_id=OuterRef("pk"))
    row: dict[str, Any] | None = (
        Message.objects.using(alias)
        .filter(actor_type=TASK_ACTOR_TYPE, operation=RUN_OPERATION, **where)
        .annotate(
            is_ready=Exists(ReadyMessage.objects.using(alias).filter(message_id=OuterRef("pk"))),
            claimed_host=Subquery(claimed.values("process__hostname")[:1]),
            claimed_pid=Subquery(claimed.values("process__pid")[:1]),
        )
        .values(*_FIELDS)
        .first()
    )
    return row


def _error(error: Any) -> list[Any]:
    """The stored error of the latest attempt as ``TaskError``: its traceback as
    ``traceback.format_exception`` writes it (ending ``Class: message`` and a newline; the
    runtime keeps its last lines), a :class:`~.execution.TaskExit` as the exception it
    stands for."""
    if not isinstance(error, dict):
        return []
    class_path = str(error.get("class", "Exception"))
    message = error.get("message")
    if class_path == TASK_EXIT_PATH and isinstance(message, str) and "\n" in message:
        original, traceback = message.split("\n", 1)
        return [compat.TaskError(exception_class_path=original, traceback=traceback)]
    backtrace = error.get("backtrace") or []
    lines = backtrace if isinstance(backtrace, list) else [str(backtrace)]
    return [
        compat.TaskError(
            exception_class_path=class_path,
            traceback="".join(f"{line}\n" for line in lines),
        )
    ]


def read(alias: str, result_id: str) -> Any:
    """The ``TaskResult`` of ``result_id``; ``TaskResultDoesNotExist`` when there is no such
    task (never enqueued, rolled back with its transaction, or pruned)."""
    if not isinstance(result_id, str) or not result_id:
        raise compat.TaskResultDoesNotExist(result_id)
    row = _message(alias, request_id=result_id)
    if row is None:
        raise compat.TaskResultDoesNotExist(result_id)
    first = row
    status = compat.TaskResultStatus.READY
    for _ in range(MAX_RETRIES_FOLLOWED + 1):
        if row["claimed_host"] is not None or row["claimed_pid"] is not None:
            status = compat.TaskResultStatus.RUNNING
            break
        if row["is_ready"]:
            status = compat.TaskResultStatus.READY
            break
        if row["completed_at"] is not None:
            status = compat.TaskResultStatus.SUCCESSFUL
            break
        dead = (
            DeadLetter.objects.using(alias)
            .filter(message_id=row["id"])
            .values("retried_message_id")
            .first()
        )
        if dead is None:  # between two of the statements above: as it was just before
            status = compat.TaskResultStatus.READY
            break
        status = compat.TaskResultStatus.FAILED
        retried = dead["retried_message_id"]
        if retried is None:
            # django-stubs types the nullable foreign key's column in values() as int
            break  # type: ignore[unreachable]
        following = _message(alias, id=retried)
        if following is None:
            break
        row = following
    arguments = first["arguments"] if isinstance(first["arguments"], dict) else {}
    task = load_task(
        str(arguments.get("task")),
        str(arguments.get("backend")),
        str(arguments.get("queue")),
        int(arguments.get("priority") or 0),
        arguments.get("run_after"),
    )
    running = status == compat.TaskResultStatus.RUNNING
    finished = status in (compat.TaskResultStatus.SUCCESSFUL, compat.TaskResultStatus.FAILED)
    current = (
        worker_id(row["claimed_host"], row["claimed_pid"])
        if running and row["claimed_host"] is not None
        else None
    )
    errors = _error(row["error"]) if status != compat.TaskResultStatus.SUCCESSFUL else []
    result: compat.TaskResult[Any, Any] = compat.TaskResult(
        task=task,
        id=result_id,
        status=status,
        enqueued_at=first["enqueued_at"],
        started_at=row["started_at"],
        finished_at=(row["completed_at"] or row["last_failed_at"]) if finished else None,
        last_attempted_at=row["started_at"],
        args=arguments.get("args") or [],
        kwargs=arguments.get("kwargs") or {},
        backend=str(arguments.get("backend")),
        errors=errors,
        worker_ids=attempt_worker_ids(int(row["attempt_count"] or 0), current),
    )
    if status == compat.TaskResultStatus.SUCCESSFUL:
        object.__setattr__(result, "_return_value", row["result"])
    return result
