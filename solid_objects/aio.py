"""Waiting for actors from an event loop: the engine behind ``ref.aio`` and
``MessageReference.aresult()``.

The same two halves as :mod:`solid_objects.sync`, never on the loop's thread: the first
(validate, enqueue and claim in one transaction, run the actor up to the message) and every
later look at the message run in a worker thread through :func:`asgiref.sync.sync_to_async`,
which is also how Django runs the ORM from async code (``thread_sensitive``: the same thread,
hence the same connection, as the request's other database work). Between two looks the
coroutine waits on the loop, woken early by a result hint (the in-process doorbell, which
PostgreSQL ``LISTEN`` and Redis hints ring too), never by a thread parked in a poll.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

from asgiref.sync import sync_to_async

from .db.connections import recovering
from .mailbox import Enqueued
from .messages import MessageHandle
from .runtime.wakeup import doorbell
from .spec import ActorAddress
from .sync import MAX_WAIT, PENDING, may_assist, result_deadline, start_sync, step

__all__ = ["await_result", "call"]

_FIRST_WAIT = 0.002


async def call(
    reference: ActorAddress,
    operation: str,
    arguments: dict[str, Any],
    *,
    timeout: float | None,
    idempotency_key: str | None,
    wrap: Callable[[Enqueued], MessageHandle],
    using: str | None = None,
) -> Any:
    """``await ref.aio.op(...)``: :func:`solid_objects.sync.call_sync`, awaited."""
    started = await sync_to_async(start_sync)(
        reference,
        operation,
        arguments,
        timeout=timeout,
        idempotency_key=idempotency_key,
        wrap=wrap,
        using=using,
    )
    if started.done is not PENDING:
        return started.done
    return await _drive(started.message, started.alias, started.deadline, assist=True)


async def await_result(message: MessageHandle, timeout: float | None) -> Any:
    """``await message.aresult(timeout)``: :meth:`MessageReference.result`, awaited."""
    deadline = result_deadline(timeout)  # bad input raises here, before any thread hop
    assist = await sync_to_async(may_assist)(message.using)
    return await _drive(message, message.using, deadline, assist=assist)


def _look(message: MessageHandle, alias: str, deadline: float | None, assist: bool) -> Any:
    return recovering(
        alias,
        "result()",
        lambda attempt: step(message, alias, deadline, assist=assist),
        message_reference=message,
    )


async def _drive(
    message: MessageHandle, alias: str, deadline: float | None, *, assist: bool
) -> Any:
    loop = asyncio.get_running_loop()
    rang = asyncio.Event()

    def hint() -> None:  # called from whichever thread rings the doorbell
        try:
            loop.call_soon_threadsafe(rang.set)
        except RuntimeError:  # the loop closed meanwhile: nobody is waiting any more
            pass

    bell = doorbell("result")
    bell.subscribe(hint)
    wait = _FIRST_WAIT
    try:
        while True:
            rang.clear()  # a ring during the look below is kept: the wait returns at once
            done = await sync_to_async(_look)(message, alias, deadline, assist)
            if done is not PENDING:
                return done
            remaining = None if deadline is None else deadline - time.monotonic()
            delay = wait if remaining is None else max(min(wait, remaining), 0.0)
            try:
                await asyncio.wait_for(rang.wait(), delay)
            except TimeoutError:
                pass
            wait = min(wait * 2, MAX_WAIT)
    finally:
        bell.unsubscribe(hint)
