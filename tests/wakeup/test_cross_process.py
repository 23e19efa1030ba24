"""Cross-process wake-up latency: a message enqueued here starts its turn in a waiting worker
subprocess long before polling could have found it.

The worker polls every 5 s (``POLLING_INTERVAL`` = ``IDLE_POLLING_INTERVAL`` = 5), so a turn
that starts well under 2.5 s after its enqueue was woken by the transport. Latency is
measured from just before the ``enqueue`` call to the handler's first line (wall clock of
the same host), and p50/p95 are printed (``pytest -s``).
"""

from __future__ import annotations

import os
import random
import statistics
import time
from typing import Any

import pytest

from solid_objects.models import Message
from tests.operations.support import percentile
from tests.support.processes import Commands
from tests.support.waiting import wait_until
from tests.testapp.actors.broadcasts import Stamp

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

REDIS_URL = os.environ.get("SOLID_TEST_REDIS_URL", "redis://127.0.0.1:6379/0")
SLOW_POLLING = {"POLLING_INTERVAL": 5.0, "IDLE_POLLING_INTERVAL": 5.0}
SAMPLES = 30


def completed_result(message_id: int) -> Any:
    """Wait for the durable result without running the actor here (no caller assist)."""
    row = Message.objects.filter(id=message_id, completed_at__isnull=False).values("result")
    found = row.first()
    return None if found is None else found["result"]


def measure(samples: int, actor_id: str, pause: float = 0.02, jitter: float = 0.0) -> list[float]:
    reference = Stamp.ref(actor_id)
    latencies = []
    pauses = random.Random(7)
    for _ in range(samples):
        # Let the worker finish its pass and go back to waiting.
        time.sleep(pause + pauses.uniform(0.0, jitter))
        before = time.time()
        message = reference.enqueue().stamp()
        started_at = wait_until(
            lambda message_id=message.id: completed_result(message_id),
            timeout=30,
            interval=0.005,  # light polling: the worker shares two cores with us
            what="the turn",
        )
        latencies.append(max(started_at - before, 0.0))
    return latencies


def report(label: str, latencies: list[float]) -> float:
    p50 = statistics.median(latencies)
    print(
        f"\n{label}: wake-up p50 {p50 * 1000:.1f} ms, p95 "
        f"{percentile(latencies, 0.95) * 1000:.1f} ms, max {max(latencies) * 1000:.1f} ms "
        f"over {len(latencies)} samples"
    )
    return p50


def start_worker(commands: Commands, settings: dict[str, Any]) -> Any:
    worker = commands.start("run_actor_worker", settings=settings)
    commands.wait_registered(worker, {"worker"})
    # One warm-up turn: the first activation also imports and connects.
    measure(1, "stamp-warm-up", pause=0.0)
    return worker


@pytest.mark.db_vendor("postgresql")
def test_postgresql_notify_wakes_a_waiting_worker(commands, solid_settings):
    solid_settings(WAKE_UP="auto")
    worker = start_worker(commands, {**SLOW_POLLING, "WAKE_UP": "auto"})
    p50 = report("PostgreSQL LISTEN/NOTIFY", measure(SAMPLES, "stamp-notify"))
    assert p50 < SLOW_POLLING["IDLE_POLLING_INTERVAL"] / 2, commands.log(worker)
    assert commands.terminate(worker) == 0


def test_redis_wakes_a_waiting_worker(commands, solid_settings):
    wake_up = {"WAKE_UP": "redis", "REDIS_URL": REDIS_URL}
    solid_settings(**wake_up)
    worker = start_worker(commands, {**SLOW_POLLING, **wake_up})
    p50 = report("Redis pub/sub", measure(SAMPLES, "stamp-redis"))
    assert p50 < SLOW_POLLING["IDLE_POLLING_INTERVAL"] / 2, commands.log(worker)
    assert commands.terminate(worker) == 0


def test_polling_alone_for_comparison(commands, solid_settings):
    """Default intervals, no transport: an idle worker (backed off to one poll a second)
    finds work after half a second on average."""
    solid_settings(WAKE_UP="polling")
    worker = start_worker(commands, {"WAKE_UP": "polling"})
    # After a turn the worker polls at +0.1, 0.3, 0.7, 1.5, 2.5, ... s: enqueue at a random
    # moment once it is idle.
    latencies = measure(6, "stamp-polling", pause=1.5, jitter=1.0)
    report("polling only (idle interval 1 s)", latencies)
    assert max(latencies) < 5.0
    assert commands.terminate(worker) == 0
