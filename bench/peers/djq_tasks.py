"""The dj-queue peer's tasks (imported only inside its own environment, by dj_queue_side)."""

from dj_queue.api import concurrency
from django.tasks import task


@task
def independent(n: int) -> int:
    return n


@task
@concurrency(key="hot", limit=1, on_conflict="block")
def ordered(n: int) -> int:
    return n
