"""The async face (§A15): ``ref.aio`` and ``MessageReference.aresult/astatus/aoutcome`` have
the semantics, errors and limits of the synchronous calls, and never block the event loop.

Coroutines run through ``async_to_sync``, as Django runs async views: the ORM work that
``sync_to_async`` hands back lands on the test's own thread and connection.
"""

from __future__ import annotations

import asyncio
import math
import threading
from typing import Any

import pytest
from asgiref.sync import async_to_sync

from solid_objects import (
    InvalidPayload,
    MessageFailed,
    Rejected,
    SyncTimeout,
    UnknownOperation,
)
from solid_objects.models import Message
from solid_objects.testing import run_pending_effects
from tests.runtime.helpers import start_thread
from tests.testapp.actors import core
from tests.testapp.actors.core import Blocker, Counter
from tests.testapp.actors.outbox import Payer

pytestmark = pytest.mark.django_db(transaction=True)


def run(coroutine_function: Any, *args: Any) -> Any:
    return async_to_sync(coroutine_function)(*args)


def test_awaited_sync_calls_return_committed_results():
    async def scenario() -> list[Any]:
        cart = Counter.ref("aio")
        return [
            await cart.aio.add(2),
            await cart.aio.add(amount=3),
            await cart.aio.sync(timeout=5.0, idempotency_key="r1").add(10),
            await cart.aio.sync(timeout=5.0, idempotency_key="r1").add(10),  # same message
            await cart.aio.total(),
        ]

    assert run(scenario) == [2, 5, 15, 15, 15]
    assert Message.objects.filter(delivery_mode="sync").count() == 4
    assert Counter.ref("aio").snapshot().value == 15


def test_awaited_enqueue_and_message_reference():
    async def scenario() -> tuple[Any, ...]:
        cart = Counter.ref("queued")
        message = await cart.aio.enqueue(idempotency_key="k1").add(4)
        before = await message.astatus()
        again = await cart.aio.enqueue(idempotency_key="k1").add(4)
        result = await message.aresult(timeout=10)  # caller-assisted, as result() is
        outcome = await message.aoutcome()
        found = await cart.aio.find_message(idempotency_key="k1")
        missing = await cart.aio.find_message(idempotency_key="nope")
        return message, before, again, result, outcome, found, missing

    message, before, again, result, outcome, found, missing = run(scenario)
    assert before == "ready"
    assert again == message
    assert result == 4
    assert outcome.status == "completed" and outcome.result == 4
    assert found == message and missing is None


def test_awaited_snapshot_and_destroy():
    async def scenario() -> tuple[Any, ...]:
        cart = Counter.ref("gone")
        empty = await cart.aio.snapshot()
        await cart.aio.add(7)
        full = await cart.aio.snapshot()
        destroyed = await cart.aio.destroy()
        again = await cart.aio.destroy()
        return empty, full, destroyed, again

    empty, full, destroyed, again = run(scenario)
    assert (empty.exists, empty.value) == (False, 0)
    assert (full.exists, full.value, full.revision) == (True, 7, 1)
    assert (destroyed, again) == (True, False)


def test_errors_are_those_of_the_sync_calls():
    cart = Counter.ref("errors")
    with pytest.raises(UnknownOperation):
        cart.aio.no_such_operation  # noqa: B018 - resolved on access, like ref.op
    with pytest.raises(InvalidPayload):
        cart.aio.sync(timeout=0)
    with pytest.raises(InvalidPayload):
        cart.aio.enqueue(idempotency_key="")

    async def rejected() -> None:
        await cart.aio.refuse("closed")

    with pytest.raises(Rejected) as caught:
        run(rejected)
    assert caught.value.code == "closed"

    async def dead() -> None:
        await cart.aio.boom(retryable=False)

    with pytest.raises(MessageFailed):
        run(dead)

    async def not_json() -> None:
        await cart.aio.add({1, 2})

    with pytest.raises(InvalidPayload):
        run(not_json)

    async def bad_timeout() -> None:
        message = await cart.aio.enqueue().add(1)
        await message.aresult(timeout=math.nan)

    with pytest.raises(InvalidPayload):
        run(bad_timeout)
    # Nothing bad was written: the rejection and the dead letter are the two messages, plus
    # the one enqueued before the bad timeout.
    assert Message.objects.filter(actor_id="errors").count() == 3
    assert cart.snapshot().value == 0


def test_waiting_is_an_await_and_a_timeout_keeps_the_message():
    """Another thread holds the actor: the awaited call times out with the durable message
    (the loop kept running meanwhile), and awaiting the reference later gets the result."""
    key = "aio-hold"
    blocker = Blocker.ref("aio")
    holder = start_thread(lambda: blocker.hold(key))
    core.entered.setdefault(key, threading.Event()).wait(30)

    async def scenario() -> tuple[Any, int]:
        ticks = 0
        done = asyncio.Event()

        async def ticker() -> None:
            nonlocal ticks
            while not done.is_set():
                ticks += 1
                await asyncio.sleep(0.01)

        task = asyncio.ensure_future(ticker())
        try:
            await blocker.aio.sync(timeout=0.6).bump()
        except SyncTimeout as error:
            timed_out = error
        finally:
            done.set()
            await task
        return timed_out, ticks

    error, ticks = run(scenario)
    assert ticks >= 20  # ~60 ticks of 10 ms fit in 0.6 s when nothing blocks the loop
    assert error.status == "ready"
    message = error.message_reference
    core.holds.setdefault(key, threading.Event()).set()
    holder.join(30)

    async def later() -> int:
        return await message.aresult(timeout=30)

    assert run(later) == 2  # the held turn first, then the bump


def test_a_result_hint_ends_the_wait():
    """The awaited call waits on the loop for the holder's result; it ends right after the
    holder's turn (the doorbell rings), well before the timeout."""
    key = "aio-hint"
    blocker = Blocker.ref("hint")
    holder = start_thread(lambda: blocker.hold(key))
    core.entered.setdefault(key, threading.Event()).wait(30)
    held = holder  # the holder's pass runs the bump too, or the caller takes over

    async def scenario() -> int:
        message = await blocker.aio.enqueue().bump()
        waiter = asyncio.ensure_future(message.aresult(timeout=60))
        await asyncio.sleep(0.05)
        assert not waiter.done()
        core.holds.setdefault(key, threading.Event()).set()
        return await asyncio.wait_for(waiter, 30)

    assert run(scenario) == 2
    held.join(30)


def test_async_effect_handlers_are_awaited():
    payer = Payer.ref("async")
    payer.pay("tests.async.echo", {"value": 42})
    payer.pay("tests.async.fail", {})
    assert run_pending_effects() == 2
    summary = payer.summary()
    assert [s["result"]["echo"] for s in summary["successes"]] == [42]
    assert summary["failures"][0]["error"]["class"].endswith("ValueError")
    assert summary["failures"][0]["error"]["message"] == "async provider refused"


def test_an_awaited_call_sends_the_statements_of_a_sync_call():
    """Same path, same cost: on a warm actor ``await ref.aio.op()`` sends exactly the
    statements ``ref.op()`` sends (the thread hop adds none)."""
    from tests.support.statements import count_statements

    cart = Counter.ref("cost")
    cart.add(1)  # warm: registered caller, cached activation

    async def awaited() -> None:
        await cart.aio.add(1)

    sync_cost = count_statements(lambda: cart.add(1))
    async_cost = count_statements(lambda: run(awaited))
    assert async_cost == sync_cost
    assert cart.snapshot().value == 3
