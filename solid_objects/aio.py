"""Waiting for actors from an event loop: the engine behind ``ref.aio`` and
``MessageReference.aresult()``.

The same two halves as :mod:`solid_objects.sync`, never on the loop's thread: the first
(validate, enqueue and claim in one transaction, run the actor up to the message) and every
later look at the message run in a worker thread through :func:`asgiref.sync.sync_to_async`,
which is also how Django runs the ORM from async code (``thread_sensitive``: the same thread,
hence the same connection, as the request's other database work). Between two looks the
coroutine waits on the loop (an :class:`asyncio.Event` set from the ``result`` doorbell,
which PostgreSQL ``LISTEN`` and Redis hints ring too), never in a thread parked in a poll.

What wakes it, and what it does then, is decided exactly as for a sync caller: it registers
as a waiter of its message (:func:`.progress.waiting`), a hint makes it look only when its
message may be final (:func:`.sync.after_hint`), and when the holder releases the actor with
the message still pending, the waiter of this process furthest behind takes it over. A call
whose enqueue found the actor held waits for a hint before its first look. So many awaited
callers of one actor cost what as many sync callers cost.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

from asgiref.sync import sync_to_async

from . import payloads
from .db.connections import recovering
from .mailbox import Enqueued
from .messages import MessageHandle
from .runtime.wakeup import doorbell, progress
from .runtime.wakeup.transports import ensure_listener
from .spec import ActorAddress
from .sync import (
    CLOSER,
    LOOK,
    MAX_WAIT,
    PENDING,
    TAKE_OVER,
    after_hint,
    first_wait,
    may_assist,
    result_deadline,
    start_sync,
    step,
)

__all__ = ["await_result", "call"]


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
    return await _drive(
        started.message,
        started.alias,
        started.deadline,
        assist=True,
        look_first=not started.held_elsewhere,
        what="sync call",
    )


async def await_result(message: MessageHandle, timeout: float | None) -> Any:
    """``await message.aresult(timeout)``: :meth:`MessageReference.result`, awaited."""
    deadline = result_deadline(timeout)  # bad input raises here, before any thread hop
    assist = await sync_to_async(may_assist)(message.using)
    return await _drive(message, message.using, deadline, assist=assist)


def _look(
    message: MessageHandle,
    alias: str,
    deadline: float | None,
    assist: bool,
    take_over: bool,
    what: str,
) -> Any:
    return recovering(
        alias,
        what,
        lambda attempt: step(message, alias, deadline, assist=assist, take_over=take_over),
        message_reference=message,
    )


async def _drive(
    message: MessageHandle,
    alias: str,
    deadline: float | None,
    *,
    assist: bool,
    look_first: bool = True,
    what: str = "result()",
) -> Any:
    """Look until the message's outcome is final: :func:`solid_objects.sync._drive`, with
    its waits awaited on the loop."""
    loop = asyncio.get_running_loop()
    rang = asyncio.Event()

    def hint() -> None:  # called from whichever thread rings the doorbell
        try:
            loop.call_soon_threadsafe(rang.set)
        except RuntimeError:  # the loop closed meanwhile: nobody is waiting any more
            pass

    bell = doorbell("result")
    bell.subscribe(hint)
    try:
        with progress.waiting(alias, message.instance_id, message.sequence):
            return await _wait_and_look(
                message, alias, deadline, rang, assist=assist, look_first=look_first, what=what
            )
    finally:
        bell.unsubscribe(hint)


async def _wait_and_look(
    message: MessageHandle,
    alias: str,
    deadline: float | None,
    rang: asyncio.Event,
    *,
    assist: bool,
    look_first: bool,
    what: str,
) -> Any:
    wait = first_wait(alias)
    take_over = False
    while True:
        rang.clear()  # a ring during the look below is kept: the wait returns at once
        heard = progress.known(alias, message.instance_id)
        if look_first:
            carried = progress.carried_result(
                alias, message.instance_id, message.sequence, message.id
            )
            if carried is not None:  # the completing commit's hint carried it: no thread hop
                return payloads.decode(carried)
            done = await sync_to_async(_look)(message, alias, deadline, assist, take_over, what)
            if done is not PENDING:
                return done
        else:
            ensure_listener(alias)  # hear the holder's result hints (starts in a thread)
        look_first, take_over = True, False
        look_again = _until(wait, deadline)
        while True:
            left = look_again - time.monotonic()
            if left <= 0 or not await _rung(rang, left):
                wait = min(wait * 2, MAX_WAIT)  # the backoff ran out: look at the database
                break
            rang.clear()
            heeded, heard = after_hint(message, alias, heard, assist=assist)
            if heeded in (LOOK, TAKE_OVER):
                take_over = heeded == TAKE_OVER
                break
            if heeded == CLOSER:
                look_again = _until(wait, deadline)


def _until(wait: float, deadline: float | None) -> float:
    look_again = time.monotonic() + wait
    return look_again if deadline is None else min(look_again, deadline)


async def _rung(rang: asyncio.Event, timeout: float) -> bool:
    """Wait on the loop for a ring, at most ``timeout`` seconds; ``True`` if it rang."""
    try:
        await asyncio.wait_for(rang.wait(), timeout)
    except TimeoutError:
        return False
    return True
