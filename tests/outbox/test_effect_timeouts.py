"""Effect timeouts in a real ``run_effect_worker`` (PRODUCT §A8, docs/effects.md): a handler
hung past its ``timeout=`` is abandoned and retried, then its failure is handled, while the
worker keeps heartbeating, so the dead-process cleanup every other worker runs never takes
it for dead and releases its claims."""

from __future__ import annotations

import time

import pytest

from solid_objects.models import Effect, Process
from solid_objects.runtime import processes
from solid_objects.testing import drain
from tests.support.waiting import wait_until
from tests.testapp.actors.policies import Hanger

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

#: Far shorter than the defaults (15 s heartbeats, 60 s threshold): the hung handler (it
#: blocks for 30 s) and its three abandoned attempts outlast the threshold several times. A
#: dozen heartbeat intervals, so a loaded machine (or SQLite's one writer at a time) delaying
#: a heartbeat is not taken for a worker that stopped heartbeating.
ALIVE_THRESHOLD = 2.5
SETTINGS = {
    "PROCESS_HEARTBEAT_INTERVAL": 0.2,
    "PROCESS_ALIVE_THRESHOLD": ALIVE_THRESHOLD,
    "POLLING_INTERVAL": 0.05,
    "IDLE_POLLING_INTERVAL": 0.25,
    "MAX_ATTEMPTS": 3,
    "RETRY_DELAY": "tests.outbox.delays.half_a_second",
}
TIMEOUT = "solid_objects.outbox.effects.EffectTimeout"


def test_a_hung_handler_is_abandoned_while_its_worker_keeps_heartbeating(commands, solid_settings):
    solid_settings(MAX_ATTEMPTS=SETTINGS["MAX_ATTEMPTS"])  # fixed on the row when emitted
    hanger = Hanger.ref("hung-in-a-worker")
    hanger.start("tests.policy.hang")  # timeout=0.3; the handler blocks for 30 s
    proc = commands.start("run_effect_worker", settings=SETTINGS)
    worker = wait_until(
        lambda: Process.objects.filter(kind="effect", shutdown_state="running").first(),
        what="the effect worker to register",
        details=lambda: commands.log(proc),
    )
    heartbeats = set()
    started = time.monotonic()

    def watch() -> bool:
        """What another worker's supervisor runs every threshold: the effect worker must
        never be among the silent processes it releases and marks stopped."""
        released = processes.cleanup_dead("default", threshold=ALIVE_THRESHOLD)
        assert worker.id not in released, commands.log(proc)
        heartbeats.add(Process.objects.get(pk=worker.pk).last_heartbeat_at)
        return True

    def handled() -> bool:
        watch()
        return Effect.objects.get(name="tests.policy.hang").status == "handled"

    wait_until(handled, what="the hung effect to be handled", details=lambda: commands.log(proc))
    effect = Effect.objects.get(name="tests.policy.hang")
    assert effect.attempt_count == 3  # each attempt abandoned, then retried
    assert effect.error["class"] == TIMEOUT
    assert effect.claimed_by_id == worker.id  # recorded by the worker that ran it
    # The abandoned handlers still block (30 s each): go on watching for two thresholds more,
    # and until the worker has been watched for more than three thresholds in all.
    until = max(time.monotonic() + 2 * ALIVE_THRESHOLD, started + 3 * ALIVE_THRESHOLD + 0.2)
    wait_until(lambda: watch() and time.monotonic() > until, what="two more thresholds")
    assert time.monotonic() - started > 3 * ALIVE_THRESHOLD
    row = Process.objects.get(pk=worker.pk)
    assert (row.shutdown_state, row.stopped_at) == ("running", None)
    assert len(heartbeats) >= 6  # it kept heartbeating all along
    assert Process.objects.filter(kind="effect").count() == 1  # never registered anew
    assert "stopped heartbeating" not in commands.log(proc)
    assert "was marked stopped" not in commands.log(proc)

    drain()  # the on_failure callback's turn
    assert hanger.snapshot().outcomes == [["failed", TIMEOUT]]
    assert proc.poll() is None, commands.log(proc)
    commands.terminate(proc)
