"""Dedicated workers: ``run_actor_worker --actor-types / --exclude-actor-types / --queues``
take only the actors (and tasks) they are given, in the scans and in stale-claim recovery."""

from __future__ import annotations

import pytest
from django.core.management import CommandError, call_command
from django.db import connection

from solid_objects.db.vendors import dialect_for
from solid_objects.db.work_filter import ActorSelection, WorkFilter
from solid_objects.models import Instance, Process
from solid_objects.runtime.dedication import work_filter
from solid_objects.tasks.compat import TaskResultStatus
from solid_objects.tasks.naming import TASK_ACTOR_TYPE
from tests.support.waiting import wait_until
from tests.testapp import tasks
from tests.testapp.actors.core import Counter

pytestmark = pytest.mark.django_db(transaction=True)


def due(work: WorkFilter | None) -> set[str]:
    dialect = dialect_for(connection)
    with connection.cursor() as cursor:
        ids = dialect.due_instances(cursor, 100, work)
    return set(Instance.objects.filter(id__in=ids).values_list("actor_id", flat=True))


def others(instance_actor_id: str, work: WorkFilter | None) -> bool:
    instance = Instance.objects.get(actor_id=instance_actor_id)
    dialect = dialect_for(connection)
    with connection.cursor() as cursor:
        return dialect.others_due(cursor, instance.id, work)


def test_the_scan_takes_only_the_chosen_actors_and_queues():
    Counter.ref("a_b-1").enqueue().add(1)
    Counter.ref("axb-1").enqueue().add(1)
    tasks.add.enqueue(1, 1)  # queue "default"
    tasks.write_group.using(queue_name="emails").enqueue("mail")
    tasks.post_entry.enqueue(1)  # the ordered queue "ledger"
    every = due(None)
    assert len(every) == 5
    assert due(work_filter(actor_types=("tests.counter",))) == {"a_b-1", "axb-1"}
    only_tasks = due(work_filter(exclude_actor_types=("tests.counter",)))
    assert len(only_tasks) == 3
    emails = due(work_filter(queues=("emails",)))
    assert len(emails) == 1
    assert next(iter(emails)).startswith("task:emails:")
    assert due(work_filter(queues=("ledger",))) == {"queue:ledger"}
    mixed = due(work_filter(actor_types=("tests.counter",), queues=("ledger",)))
    assert mixed == {"a_b-1", "axb-1", "queue:ledger"}
    # LIKE wildcards in a name are matched literally.
    literal = WorkFilter(actors=(ActorSelection("tests.counter", prefixes=("a_b",)),))
    assert due(literal) == {"a_b-1"}
    assert due(WorkFilter(actors=(ActorSelection("tests.counter", ids=("axb-1",)),))) == {"axb-1"}
    assert others("a_b-1", None)
    assert not others("a_b-1", literal)


def test_unknown_actor_types_are_refused():
    with pytest.raises(CommandError, match="nope"):
        call_command("run_actor_worker", actor_types="tests.counter,nope")
    assert work_filter() is None
    assert work_filter(actor_types=(TASK_ACTOR_TYPE,)) is not None


@pytest.mark.slow
def test_a_worker_dedicated_to_a_queue_runs_only_its_tasks(commands):
    settings = {"POLLING_INTERVAL": 0.05, "IDLE_POLLING_INTERVAL": 0.25}
    elsewhere = tasks.add.enqueue(1, 2)
    counter = Counter.ref("not-mine").enqueue().add(1)
    mine = tasks.write_group.using(queue_name="emails").enqueue("dedicated")
    proc = commands.start("run_actor_worker", "--queues", "emails", settings=settings)

    def done() -> bool:
        mine.refresh()
        return mine.is_finished

    wait_until(done, what="the emails task", details=lambda: commands.log(proc))
    assert mine.status == TaskResultStatus.SUCCESSFUL
    # Enqueued before it, due, and never taken.
    elsewhere.refresh()
    assert elsewhere.status == TaskResultStatus.READY
    assert elsewhere.attempts == 0
    assert counter.status() != "completed"
    assert Process.objects.filter(kind="worker").count() == 1
    assert commands.terminate(proc) == 0, commands.log(proc)


WORKER = {"POLLING_INTERVAL": 0.05, "IDLE_POLLING_INTERVAL": 0.25}


@pytest.mark.slow
def test_a_worker_given_actor_types_runs_only_those(commands):
    # Enqueued first and due all along: a worker taking any actor would take it first.
    task = tasks.add.enqueue(1, 2)
    first = Counter.ref("dedicated-1").enqueue().add(1)
    proc = commands.start("run_actor_worker", "--actor-types", "tests.counter", settings=WORKER)
    wait_until(
        lambda: first.status() == "completed",
        what="the counter's message",
        details=lambda: commands.log(proc),
    )
    second = Counter.ref("dedicated-2").enqueue().add(2)  # a later scan, the same choice
    wait_until(lambda: second.status() == "completed", what="the second counter")
    task.refresh()
    assert (task.status, task.attempts) == (TaskResultStatus.READY, 0)
    assert (first.result(), second.result()) == (1, 2)
    assert commands.terminate(proc) == 0, commands.log(proc)


@pytest.mark.slow
def test_a_worker_excluding_actor_types_runs_every_other(commands):
    counter = Counter.ref("excluded").enqueue().add(1)
    first = tasks.add.enqueue(1, 2)
    proc = commands.start(
        "run_actor_worker", "--exclude-actor-types", "tests.counter", settings=WORKER
    )

    def finished(result) -> bool:
        result.refresh()
        return result.is_finished

    wait_until(lambda: finished(first), what="the task", details=lambda: commands.log(proc))
    second = tasks.post_entry.enqueue(7)  # an ordered queue's actor is not excluded either
    wait_until(lambda: finished(second), what="the ordered task")
    assert (first.return_value, second.return_value) == (3, 7)
    assert (counter.status(), counter.outcome().attempts) == ("ready", 0)  # never claimed
    assert commands.terminate(proc) == 0, commands.log(proc)
