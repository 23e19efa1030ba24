"""Task functions of the django.tasks backend tests (module level, as django.tasks requires).

They write ``auth.Group`` rows as their observable side effect: a real application write,
which an actor handler could not make.
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import Group

from solid_objects.tasks.compat import task  # django.tasks, or the backport on 5.2
from tests.support.waiting import wait_until


def record(name: str) -> int:
    return Group.objects.create(name=name[:150]).pk


@task()
def add(a: int, b: int) -> int:
    return a + b


@task()
def write_group(name: str) -> int:
    return record(name)


@task(queue_name="parallel")
def meet(name: str, other: str) -> str:
    """Finishes only while ``other`` runs at the same time (both wait for each other)."""
    record(name)
    wait_until(
        lambda: Group.objects.filter(name=other).exists(), timeout=20, what=f"{other} to start"
    )
    return name


class OverlapError(RuntimeError):
    retryable = False


@task(queue_name="ledger")
def post_entry(n: int) -> int:
    """An ordered-queue task that fails for good if another ledger entry is in flight."""
    started = Group.objects.filter(name__startswith="ledger-start-").count()
    ended = Group.objects.filter(name__startswith="ledger-end-").count()
    if started != ended:
        raise OverlapError(f"entry {n} started while {started - ended} other(s) ran")
    record(f"ledger-start-{n}")
    record(f"ledger-end-{n}")
    return n


@task(takes_context=True)
def flaky(context: Any, fail_times: int) -> dict[str, Any]:
    if context.attempt <= fail_times:
        raise ConnectionError(f"attempt {context.attempt} of a flaky task")
    return {"attempt": context.attempt, "id": context.task_result.id}


class CardDeclined(Exception):
    pass


@task()
def always_fails(reason: str) -> None:
    raise CardDeclined(reason)


@task()
async def async_add(a: int, b: int) -> int:
    from asgiref.sync import sync_to_async

    await sync_to_async(record)(f"async-{a}-{b}")
    return a + b


@task()
def returns_a_set() -> Any:
    return {1, 2}
