"""Task functions of :mod:`tests.tasks.test_conformance` (the kinds of task ``django.tasks``'
own backend tests use: a no-op, a coroutine, failures of several kinds, a return value that
is not JSON, tasks that read their context) and :mod:`tests.tasks.test_operating_tasks`;
defined at module level as ``django.tasks`` requires, importable by a worker process.
"""

from __future__ import annotations

import sys
from typing import Any

from django.contrib.auth.models import Group

from solid_objects.tasks.compat import TaskContext, task


@task()
def noop(*args: Any, **kwargs: Any) -> None:
    return None


@task()
async def noop_async(*args: Any, **kwargs: Any) -> None:
    return None


@task()
def meaning_of_life() -> int:
    return 42


@task()
def raises_value_error() -> None:
    raise ValueError("this task failed with a ValueError")


@task()
def raises_system_exit() -> None:
    raise SystemExit("this task failed with a SystemExit")


@task()
def calls_exit() -> None:
    sys.exit(1)


@task()
def raises_nested_exception() -> None:
    raise ValueError(ValueError("this task failed"))


@task()
def returns_a_function() -> Any:
    return lambda: True  # neither JSON nor picklable


@task(takes_context=True)
def own_id(context: TaskContext) -> str:
    return context.task_result.id


@task(takes_context=True)
def check_context(context: TaskContext, attempt: int) -> int:
    assert isinstance(context, TaskContext)
    assert context.attempt == attempt
    return context.attempt


@task()
def requires_group(name: str) -> str:
    """Fails until a group ``name`` exists (an operator's fix), then records ``ran-<name>``."""
    if not Group.objects.filter(name=name).exists():
        raise LookupError(f"no group {name!r} yet")
    Group.objects.create(name=f"ran-{name}")
    return name
