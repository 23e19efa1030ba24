"""The ``django.tasks`` API this backend implements: Django's own on Django 6.x, the
``django-tasks`` backport package on Django 5.2 (``pip install django-solid-objects[tasks]``).

Only this module knows which one is in use; the two expose the same classes under the same
names, except the exception for an invalid task (``InvalidTask`` / ``InvalidTaskError``).
``SOURCE`` is the package in use, which is also the name of the logger its signal receivers
log to (``django.tasks`` / ``django_tasks``).
"""

from __future__ import annotations

import traceback
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    # Checked against Django's own API (django-stubs); the backport mirrors it.
    from django.tasks import (
        DEFAULT_TASK_QUEUE_NAME,
        Task,
        TaskContext,
        TaskResult,
        TaskResultStatus,
        task,
        task_backends,
    )
    from django.tasks.backends.base import BaseTaskBackend
    from django.tasks.base import TASK_MAX_PRIORITY, TASK_MIN_PRIORITY, TaskError
    from django.tasks.exceptions import InvalidTask, TaskResultDoesNotExist, TaskResultMismatch
    from django.tasks.signals import task_enqueued, task_finished, task_started
    from django.utils.json import normalize_json

    SOURCE = "django.tasks"
else:
    try:
        from django.tasks import (
            DEFAULT_TASK_QUEUE_NAME,
            Task,
            TaskContext,
            TaskResult,
            TaskResultStatus,
            task,
            task_backends,
        )
        from django.tasks.backends.base import BaseTaskBackend
        from django.tasks.base import TASK_MAX_PRIORITY, TASK_MIN_PRIORITY, TaskError
        from django.tasks.exceptions import (
            InvalidTask,
            TaskResultDoesNotExist,
            TaskResultMismatch,
        )
        from django.tasks.signals import task_enqueued, task_finished, task_started
        from django.utils.json import normalize_json

        SOURCE = "django.tasks"
    except ImportError:  # Django 5.2: the backport
        try:
            from django_tasks import (
                DEFAULT_TASK_QUEUE_NAME,
                TaskContext,
                TaskResult,
                TaskResultStatus,
                task,
                task_backends,
            )
            from django_tasks.backends.base import BaseTaskBackend
            from django_tasks.base import (
                TASK_MAX_PRIORITY,
                TASK_MIN_PRIORITY,
                Task,
                TaskError,
            )
            from django_tasks.exceptions import (
                InvalidTaskError as InvalidTask,
            )
            from django_tasks.exceptions import TaskResultDoesNotExist, TaskResultMismatch
            from django_tasks.signals import (
                task_enqueued,
                task_finished,
                task_started,
            )
            from django_tasks.utils import normalize_json
        except ImportError as exc:
            from django.core.exceptions import ImproperlyConfigured

            raise ImproperlyConfigured(
                "solid_objects.tasks needs Django 6 (django.tasks) or, on Django 5.2, the "
                "django-tasks package: pip install 'django-solid-objects[tasks]'"
            ) from exc
        SOURCE = "django_tasks"


def module_path(value: Any) -> str:
    """``module.qualname`` of a function or class, as ``django.tasks`` names them."""
    return f"{value.__module__}.{value.__qualname__}"


def exception_traceback(exc: BaseException) -> str:
    return "".join(traceback.format_exception(exc))


__all__ = [
    "DEFAULT_TASK_QUEUE_NAME",
    "SOURCE",
    "TASK_MAX_PRIORITY",
    "TASK_MIN_PRIORITY",
    "BaseTaskBackend",
    "InvalidTask",
    "Task",
    "TaskContext",
    "TaskError",
    "TaskResult",
    "TaskResultDoesNotExist",
    "TaskResultMismatch",
    "TaskResultStatus",
    "exception_traceback",
    "module_path",
    "normalize_json",
    "task",
    "task_backends",
    "task_enqueued",
    "task_finished",
    "task_started",
]
