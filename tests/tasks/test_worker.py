"""Tasks run by real ``run_actor_worker`` processes, with no other command (PRODUCT §A17):
an ordered queue one task at a time in enqueue order while other tasks run in parallel
across threads and workers, and a retry on the way."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Group

from solid_objects.models import Process
from solid_objects.tasks.compat import TaskResultStatus
from tests.support.waiting import wait_until
from tests.testapp import tasks

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

FAST = {
    "POLLING_INTERVAL": 0.05,
    "IDLE_POLLING_INTERVAL": 0.25,
    "PROCESS_HEARTBEAT_INTERVAL": 0.5,
    "RETRY_DELAY": "tests.runtime.helpers.no_delay",
    "MAX_ATTEMPTS": 3,
}


def finished(results) -> bool:
    for result in results:
        result.refresh()
    return all(result.is_finished for result in results)


def test_workers_run_ordered_and_parallel_tasks(commands, vendor):
    count = 1 if vendor == "sqlite" else 2
    procs = [
        commands.start("run_actor_worker", "--threads", "3", settings=FAST) for _ in range(count)
    ]
    wait_until(
        lambda: Process.objects.filter(kind="worker", shutdown_state="running").count() >= count,
        what="workers to register",
    )
    entries = [tasks.post_entry.enqueue(n) for n in range(20)]
    # Each of the two finishes only while the other runs: they must run at the same time.
    pair = [tasks.meet.enqueue("meet-a", "meet-b"), tasks.meet.enqueue("meet-b", "meet-a")]
    retried = tasks.flaky.enqueue(1)
    everything = [*entries, *pair, retried]

    def logs() -> str:
        return "\n".join(commands.log(proc) for proc in procs)

    wait_until(lambda: finished(everything), timeout=120, what="the tasks", details=logs)
    assert [r.status for r in entries] == [TaskResultStatus.SUCCESSFUL] * 20, [
        r.errors for r in entries
    ]
    assert [r.return_value for r in entries] == list(range(20))
    names = list(
        Group.objects.filter(name__startswith="ledger-")
        .order_by("pk")
        .values_list("name", flat=True)
    )
    assert names == [f"ledger-{edge}-{n}" for n in range(20) for edge in ("start", "end")]
    assert [r.return_value for r in pair] == ["meet-a", "meet-b"], [r.errors for r in pair]
    assert retried.return_value["attempt"] == 2
    assert retried.attempts == 2
    for proc in procs:
        assert proc.poll() is None, commands.log(proc)
        assert commands.terminate(proc) == 0, commands.log(proc)
