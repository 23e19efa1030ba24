"""A ``django.tasks`` backend on the actor runtime (PRODUCT §A17, ``docs/tasks.md``)::

    TASKS = {"default": {"BACKEND": "solid_objects.tasks.SolidObjectsBackend",
                         "OPTIONS": {"ORDERED_QUEUES": ["ledger"]}}}

A task is a message to an internal actor (:mod:`solid_objects.tasks.actors`): one actor per
ordered queue (its mailbox runs the queue's tasks one at a time in enqueue order), one per
task elsewhere (so they run in parallel). ``run_actor_worker`` runs them like any turn.

The backend class is imported lazily: the worker registers the task actor at start-up
without importing ``django.tasks`` (or the backport) until a task is enqueued or run.
"""

from __future__ import annotations

from typing import Any

__all__ = ["SolidObjectsBackend"]


def __getattr__(name: str) -> Any:
    if name == "SolidObjectsBackend":
        from .backend import SolidObjectsBackend

        return SolidObjectsBackend
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
