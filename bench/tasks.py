"""Task functions of the ``tasks`` measure (django.tasks backend): no work of their own, so
the measure is the backend's and the runtime's cost per task."""

from __future__ import annotations

from solid_objects.tasks.compat import task


@task(queue_name="bench-ordered")
def ordered_noop(n: int) -> int:
    return n


@task()
def plain_noop(n: int) -> int:
    return n
