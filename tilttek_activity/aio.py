"""The journal from async code: ``await arecord_activity(...)`` and friends.

Each is its synchronous counterpart (same arguments, validation, errors and idempotency)
run in a worker thread through :func:`asgiref.sync.sync_to_async`, as Django runs the ORM
from async views: ``thread_sensitive``, so it shares the connection (and any transaction)
of the request's other database work, and the event loop never waits on the database.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Coroutine
from typing import Any, ParamSpec, TypeVar

from asgiref.sync import sync_to_async

from .journal import cancel_activity, record_activities, record_activity
from .reading import entries

__all__ = ["acancel_activity", "aentries", "arecord_activities", "arecord_activity"]

P = ParamSpec("P")
R = TypeVar("R")


def _awaitable(function: Callable[P, R]) -> Callable[P, Coroutine[Any, Any, R]]:
    run = sync_to_async(function)

    @functools.wraps(function)
    async def awaitable(*args: P.args, **kwargs: P.kwargs) -> R:
        return await run(*args, **kwargs)

    awaitable.__name__ = awaitable.__qualname__ = f"a{function.__name__}"
    awaitable.__doc__ = f"``await`` form of :func:`{function.__module__}.{function.__name__}`."
    return awaitable


arecord_activity = _awaitable(record_activity)
arecord_activities = _awaitable(record_activities)
acancel_activity = _awaitable(cancel_activity)
aentries = _awaitable(entries)
