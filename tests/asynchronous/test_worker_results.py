"""Awaiting a result another process produces: a worker subprocess holds the actor, the
coroutine waits on the event loop (a result hint, PostgreSQL NOTIFY, or its short delays)
and gets the committed results in mailbox order, each turn run once."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from asgiref.sync import async_to_sync

from solid_objects.models import Message
from tests.support.waiting import wait_until
from tests.testapp.actors.core import Blocker

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

FAST = {"POLLING_INTERVAL": 0.05, "IDLE_POLLING_INTERVAL": 0.2}


def test_awaited_results_of_turns_a_worker_runs(commands: Any, tmp_path: Path):
    release = tmp_path / "release"
    ref = Blocker.ref("worker-held")
    held = ref.enqueue().hold_on_file(str(release))
    worker = commands.start("run_actor_worker", settings=FAST)
    wait_until(lambda: Path(f"{release}.entered").exists(), what="the worker to hold the actor")

    async def scenario() -> tuple[int, int, int, bool]:
        behind = await ref.aio.enqueue().bump()
        waiting = asyncio.ensure_future(behind.aresult(timeout=60))
        call = asyncio.ensure_future(ref.aio.sync(timeout=60).bump())
        await asyncio.sleep(0.3)
        still_waiting = not waiting.done() and not call.done()
        release.write_text("go")  # the worker finishes the held turn, then the two behind
        first = await held.aresult(timeout=60)
        return first, await waiting, await call, still_waiting

    first, second, third, still_waiting = async_to_sync(scenario)()
    assert still_waiting  # nothing could finish while the worker held the actor
    assert (first, second, third) == (1, 2, 3)
    # One attempt each, in mailbox order, whoever (worker or caller) ran the last two.
    assert set(Message.objects.values_list("attempt_count", flat=True)) == {1}
    assert commands.terminate(worker) == 0, commands.log(worker)
