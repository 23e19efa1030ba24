"""The async face (§A15): ``ref.aio`` and ``MessageReference.aresult/astatus/aoutcome`` have
the semantics, errors and limits of the synchronous calls, and never block the event loop.

Coroutines run through ``async_to_sync``, as Django runs async views: the ORM work that
``sync_to_async`` hands back lands on the test's own thread and connection.
"""

from __future__ import annotations

import asyncio
import math
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from asgiref.sync import async_to_sync, sync_to_async
from django.db import connection, connections
from django.test.utils import CaptureQueriesContext

from solid_objects import (
    ActorReference,
    InvalidPayload,
    MessageFailed,
    Rejected,
    SyncTimeout,
    UnknownOperation,
)
from solid_objects.models import Message
from solid_objects.testing import run_pending_effects
from tests.runtime.helpers import Worker, start_thread
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


# -- many awaited callers of one held actor ----------------------------------------------------
CALLERS = 8


def hold_with_a_worker(blocker: ActorReference[Blocker], key: str) -> Worker:
    """A worker-like thread leases the actor and runs one held turn of it (its pass ends
    after that turn, releasing the actor with any later messages still pending)."""
    from solid_objects.runtime import processes
    from tests.runtime.helpers import run_once

    first = blocker.enqueue().hold(key)
    owner = processes.register("worker", connection.alias)
    holder = start_thread(lambda: run_once(first.instance_id, owner, max_messages=1), "holder")
    assert core.entered.setdefault(key, threading.Event()).wait(30)
    return holder


async def enqueued(actor_id: str, count: int) -> None:
    """Until ``count`` messages of the actor are in its mailbox (the callers are waiting)."""

    def messages() -> int:
        return Message.objects.filter(actor_id=actor_id).count()

    while await sync_to_async(messages)() < count:
        await asyncio.sleep(0.01)


def test_concurrent_awaited_callers_of_a_held_actor_are_answered_once_each_in_order():
    """Another thread holds the actor while eight awaited calls wait on the loop. When it
    releases the actor with their messages pending, they are all answered, each by exactly
    one turn, in mailbox order (one of them takes the actor over and its pass runs the
    others' messages on its way)."""
    key = "aio-many"
    blocker = Blocker.ref("many")
    holder = hold_with_a_worker(blocker, key)

    async def scenario() -> list[int]:
        calls = [
            asyncio.ensure_future(blocker.aio.sync(timeout=60, idempotency_key=f"c{i}").bump())
            for i in range(CALLERS)
        ]
        await enqueued("many", CALLERS + 1)
        assert not any(call.done() for call in calls)  # all wait for the holder
        core.holds.setdefault(key, threading.Event()).set()
        return list(await asyncio.gather(*calls))

    results = run(scenario)
    assert holder.outcome().processed == 1  # the holder ran its own turn only
    assert sorted(results) == list(range(2, CALLERS + 2))  # one turn each, after the held one
    stored = list(Message.objects.filter(actor_id="many").order_by("sequence"))
    assert [m.result for m in stored] == list(range(1, CALLERS + 2))  # in mailbox order
    assert all(m.attempt_count == 1 and m.completed_at is not None for m in stored)
    by_key = {m.idempotency_key: m.result for m in stored}
    assert [by_key[f"c{i}"] for i in range(CALLERS)] == results  # each got its own
    assert blocker.snapshot().hits == CALLERS + 1


def test_hints_about_other_actors_do_not_send_awaited_waiters_to_the_database():
    """Awaited callers of a held actor wait as sync callers do: the result hint of every
    commit in this process (here of sync calls on another actor, made one at a time from
    another thread) does not make them look at their message; only their backoff does (a
    look at most MAX_WAIT apart per caller). Woken by every hint, they would each look
    once or more per commit."""
    from solid_objects.db.instances import MESSAGE_OUTCOME
    from solid_objects.sync import FIRST_WAIT, MAX_WAIT

    key = "aio-quiet"
    blocker = Blocker.ref("quiet")
    holder = hold_with_a_worker(blocker, key)
    other = Counter.ref("busy")
    commits = 40
    thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="other-actor")

    async def scenario(statements: CaptureQueriesContext) -> tuple[int, float]:
        loop = asyncio.get_running_loop()
        calls = [asyncio.ensure_future(blocker.aio.sync(timeout=60).bump()) for _ in range(CALLERS)]
        await enqueued("quiet", CALLERS + 1)
        before, started = len(statements), time.monotonic()
        for _ in range(commits):
            await loop.run_in_executor(thread, other.add, 1)  # its thread's own connection
            # Let every waiter the commit's hint woke run, then every look it asked for (the
            # looks run in order, in this thread, on this test's connection).
            for _ in range(20):
                await asyncio.sleep(0)
            await sync_to_async(lambda: None)()
        phase = statements.captured_queries[before:]
        elapsed = time.monotonic() - started
        core.holds.setdefault(key, threading.Event()).set()
        assert sorted(await asyncio.gather(*calls)) == list(range(2, CALLERS + 2))
        looks = sum(1 for query in phase if query["sql"].startswith(MESSAGE_OUTCOME[:40]))
        return looks, elapsed

    try:
        # This thread's connection itself (the proxy would resolve in the loop's thread).
        with CaptureQueriesContext(connections[connection.alias]) as statements:
            looks, elapsed = run(scenario, statements)
    finally:
        thread.submit(connections.close_all).result()
        thread.shutdown()
    assert holder.outcome().processed == 1
    assert other.snapshot().value == commits
    # The backoff doubles from FIRST_WAIT to MAX_WAIT, then stays there.
    ramp = math.log2(MAX_WAIT / FIRST_WAIT) + 2
    assert looks <= CALLERS * (elapsed / MAX_WAIT + ramp), (looks, elapsed)
