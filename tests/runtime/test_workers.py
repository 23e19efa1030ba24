"""Real ``run_actor_worker`` processes (§A4, §A6, §A8): ordering under concurrency, crash
recovery, graceful shutdown, and handlers that kill their worker every time.

Every wait polls the database (or the worker's log) with a deadline; the ``commands`` fixture
kills whatever is still running at the end.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

from solid_objects.models import (
    ClaimedMessage,
    DeadLetter,
    Instance,
    Message,
    Process,
    ReadyMessage,
)
from tests.support.waiting import wait_until
from tests.testapp.actors.core import Blocker, Counter
from tests.testapp.actors.runtime_tests import Poison

from .helpers import membership

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

FAST = {
    "POLLING_INTERVAL": 0.05,
    "IDLE_POLLING_INTERVAL": 0.25,
    "PROCESS_HEARTBEAT_INTERVAL": 0.5,
}


def running_workers(count: int) -> bool:
    return Process.objects.filter(kind="worker", shutdown_state="running").count() >= count


def process_of(proc) -> Process:
    return Process.objects.get(pid=proc.pid, kind="worker")


def test_two_workers_keep_every_actor_in_order(commands, vendor, record_property):
    actors, per_actor = 50, 40
    count = 1 if vendor == "sqlite" else 2  # SQLite serialises writers: one worker
    # The second worker also runs two actor threads (sharing one activation cache).
    procs = [
        commands.start("run_actor_worker", *(["--threads", "2"] if n else []), settings=FAST)
        for n in range(count)
    ]
    wait_until(lambda: running_workers(count), what="workers to register")

    # Enqueue while the workers run, round-robin over the actors.
    refs = [Counter.ref(f"ordered-{n}") for n in range(actors)]
    for _ in range(per_actor):
        for ref in refs:
            ref.enqueue().record_sequence()
    claimers: set[str] = set()

    def finished() -> bool:
        claimers.update(ClaimedMessage.objects.values_list("process_id", flat=True))
        return not ReadyMessage.objects.exists() and not ClaimedMessage.objects.exists()

    wait_until(finished, timeout=120, what="the workers to drain the mailboxes")
    record_property("claiming_workers", len(claimers))
    assert Message.objects.count() == actors * per_actor
    assert not Message.objects.filter(completed_at__isnull=True).exists()
    assert not DeadLetter.objects.exists()
    for instance in Instance.objects.filter(actor_id__startswith="ordered-"):
        # Exactly 1..40 in order: nothing lost, nothing committed twice, never reordered.
        assert instance.state["seen"] == list(range(1, per_actor + 1)), instance.actor_id
        assert instance.state_revision == per_actor
        assert instance.activation_token is None
    results = Message.objects.values_list("sequence", "result")
    assert all(sequence == result for sequence, result in results)
    for proc in procs:
        assert proc.poll() is None, commands.log(proc)  # nobody crashed on the way
        assert commands.terminate(proc) == 0, commands.log(proc)


def test_a_killed_worker_s_turn_is_completed_by_another(commands, tmp_path):
    settings = {**FAST, "PROCESS_ALIVE_THRESHOLD": 3}
    release = tmp_path / "release"
    message = Blocker.ref("killed").enqueue().hold_on_file(str(release))
    first = commands.start("run_actor_worker", settings=settings)
    wait_until(lambda: Path(f"{release}.entered").exists(), what="the handler to start")
    claim = ClaimedMessage.objects.get(message_id=message.id)
    assert claim.process_id == process_of(first).id

    os.kill(first.pid, signal.SIGKILL)
    assert commands.wait_exit(first) == -signal.SIGKILL
    release.write_text("go")  # the retry must not block
    second = commands.start("run_actor_worker", settings=settings)

    wait_until(lambda: message.status() == "completed", what="another worker to finish the turn")
    stored = Message.objects.get(id=message.id)
    assert stored.attempt_count == 2
    assert stored.result == 1
    assert Blocker.ref("killed").snapshot().hits == 1  # the state change applied once
    dead_process = Process.objects.get(pid=first.pid)
    assert dead_process.shutdown_state == "stopped"  # cleaned up as dead
    assert commands.terminate(second) == 0, commands.log(second)


def test_sigterm_finishes_the_turn_in_flight_then_exits_cleanly(commands, tmp_path):
    release = tmp_path / "release"
    ref = Blocker.ref("graceful")
    message = ref.enqueue().hold_on_file(str(release))
    proc = commands.start("run_actor_worker", settings={**FAST, "SHUTDOWN_TIMEOUT": 60})
    wait_until(lambda: Path(f"{release}.entered").exists(), what="the handler to start")
    behind = ref.enqueue().bump()

    proc.send_signal(signal.SIGTERM)
    wait_until(lambda: "stop requested" in commands.log(proc), what="the worker to see SIGTERM")
    assert proc.poll() is None  # still finishing the turn
    release.write_text("go")
    assert commands.wait_exit(proc) == 0, commands.log(proc)

    stored = Message.objects.get(id=message.id)
    assert (stored.attempt_count, stored.result) == (1, 1)
    assert message.status() == "completed"
    assert ref.snapshot().hits == 1
    # It stopped claiming: the message behind was not started.
    assert membership(behind.id) == "ready"
    assert Message.objects.get(id=behind.id).attempt_count == 0
    instance = Instance.objects.get(actor_id="graceful")
    assert instance.activation_token is None  # the lease was released
    assert not ClaimedMessage.objects.exists()
    row = process_of(proc)
    assert row.shutdown_state == "stopped"
    assert row.stopped_at is not None


def test_a_handler_that_kills_its_worker_every_time_reaches_its_dead_letter(
    commands, solid_settings
):
    """The crashing message first runs as a follower in a group (its attempt is not counted
    there), then alone as the head of each claim: three counted attempts, then a dead letter,
    and the mailbox moves on. The message before it is retried alone and commits once."""
    solid_settings(MAX_ATTEMPTS=3)  # stored on the message at enqueue
    settings = {
        **FAST,
        "LEASE_DURATION": 1.0,
        "LEASE_RENEWAL_INTERVAL": 0.5,
        "MAX_COMMIT_DELAY": 30,  # the first group surely reaches the crashing turn
    }
    ref = Poison.ref("poison")
    before = ref.enqueue().ok()
    crash = ref.enqueue().crash()
    after = ref.enqueue().ok()

    deaths = 0
    for _ in range(8):
        proc = commands.start("run_actor_worker", settings=settings)

        def progressed(proc=proc) -> bool:
            return proc.poll() is not None or after.status() == "completed"

        wait_until(progressed, what="the worker to crash or finish")
        if after.status() == "completed":
            assert commands.terminate(proc) == 0, commands.log(proc)
            break
        assert proc.returncode == 17, commands.log(proc)
        deaths += 1
    assert deaths == 4  # once as a follower, three times as the claimed head
    assert Message.objects.get(id=crash.id).attempt_count == 3
    dead = DeadLetter.objects.get(message_id=crash.id)
    assert dead.attempts == 3
    assert dead.exception_class == "solid_objects.errors.LostActivation"
    stored = Message.objects.get(id=before.id)
    assert (stored.attempt_count, stored.result) == (2, 1)  # rerun after the group was lost
    assert after.result(timeout=1) == 2
    assert Message.objects.get(id=after.id).attempt_count == 1
    assert ref.snapshot().runs == 2  # each ok() committed exactly once
    assert not ClaimedMessage.objects.exists()
