"""Where a task lives in the actor runtime: the actor type and the actor ids (no imports of
``django.tasks`` here, so the runtime and operators' tools can recognise task rows)."""

from __future__ import annotations

import uuid

#: The internal actor type every task message is addressed to.
TASK_ACTOR_TYPE = "solid_objects.task"
#: Its one operation.
RUN_OPERATION = "run"

QUEUE_PREFIX = "queue:"
TASK_PREFIX = "task:"


def ordered_queue_actor_id(queue_name: str) -> str:
    """The one actor of an ordered queue: its mailbox is the queue."""
    return f"{QUEUE_PREFIX}{queue_name}"


def new_task_actor_id(queue_name: str) -> str:
    """A fresh actor for one task of an unordered queue (tasks never wait for each other);
    its id starts with ``task:<queue>:`` so a worker dedicated to queues finds it."""
    return f"{TASK_PREFIX}{queue_name}:{uuid.uuid4().hex}"


def is_task(actor_type: str, operation: str) -> bool:
    """Whether a message (or dead letter) of ``actor_type`` / ``operation`` is a task."""
    return actor_type == TASK_ACTOR_TYPE and operation == RUN_OPERATION


def operation_label(actor_type: str, actor_id: str, operation: str, arguments: object) -> str:
    """The operation, or for a task ``task <describe()>``: what operators' lists show."""
    if is_task(actor_type, operation):
        return f"task {describe(actor_id, arguments)}"
    return operation


def describe(actor_id: str, arguments: object) -> str:
    """A one-line, readable label of a task message for the admin and status:
    ``app.tasks.send_mail on queue "emails"``."""
    name = "?"
    queue = "?"
    if isinstance(arguments, dict):
        name = str(arguments.get("task", "?"))
        queue = str(arguments.get("queue", "?"))
    ordered = " (ordered)" if actor_id.startswith(QUEUE_PREFIX) else ""
    return f'{name} on queue "{queue}"{ordered}'
