"""At least once, proven with real worker processes: a worker killed while its handler runs
has the effect redelivered by another worker, with the same effect_id."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from solid_objects.models import Effect, Message, Process
from tests.support.processes import Commands
from tests.support.waiting import wait_until
from tests.testapp.actors.outbox import Messenger, Payer

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]


def deliveries(sink: Path) -> list[dict[str, object]]:
    if not sink.exists():
        return []
    return [json.loads(line) for line in sink.read_text().splitlines() if line.strip()]


def test_a_killed_workers_effect_is_redelivered_with_the_same_effect_id(
    commands: Commands, tmp_path: Path
):
    sink, release = tmp_path / "sink.jsonl", tmp_path / "release"
    payer = Payer.ref("zoe")
    effect_id = payer.pay("tests.outbox.sink", {"sink": str(sink), "wait_for": str(release)})

    with commands.running("run_effect_worker") as first:
        wait_until(lambda: len(deliveries(sink)) == 1, timeout=30.0, what="the first delivery")
        row = Effect.objects.get(effect_id=effect_id)
        assert (row.status, row.attempt_count) == ("processing", 1)
        owner = Process.objects.get(pk=row.claimed_by_id)
        assert (owner.kind, owner.pid) == ("effect", first.pid)
        # The handler blocks, yet the process keeps heartbeating: it is not taken for dead.
        blocked_at = owner.last_heartbeat_at
        wait_until(
            lambda: Process.objects.get(pk=owner.pk).last_heartbeat_at > blocked_at,
            timeout=30.0,
            what="a heartbeat while the handler blocks",
        )
        commands.kill(first)  # before the outcome is recorded
    assert Effect.objects.get(effect_id=effect_id).status == "processing"
    assert not Message.objects.filter(idempotency_key=f"effect:{effect_id}:success").exists()

    release.write_text("go")
    with commands.running("run_effect_worker", settings={"PROCESS_ALIVE_THRESHOLD": 2}) as second:
        wait_until(
            lambda: Effect.objects.get(effect_id=effect_id).status == "completed",
            timeout=60,
            what="the redelivery to complete",
        )
        assert commands.terminate(second, timeout=30.0) == 0

    lines = deliveries(sink)
    assert [line["effect_id"] for line in lines] == [effect_id, effect_id]
    assert [line["attempt"] for line in lines] == [1, 2]
    assert [line["pid"] for line in lines] == [first.pid, second.pid]
    assert Process.objects.get(pk=owner.pk).shutdown_state == "stopped"  # cleaned up as dead
    assert Message.objects.filter(idempotency_key=f"effect:{effect_id}:success").count() == 1
    assert [s["effect_id"] for s in payer.summary()["successes"]] == [effect_id]


def test_the_effect_worker_delivers_actor_messages(commands: Commands, tmp_path: Path):
    with commands.running("run_effect_worker"):
        Messenger.ref("amy").tell("bo", "over the wire")
        wait_until(
            lambda: Effect.objects.filter(status="completed").exists(),
            timeout=30.0,
            what="the delivery",
        )
    assert [m["text"] for m in Messenger.ref("bo").heard()] == ["over the wire"]
