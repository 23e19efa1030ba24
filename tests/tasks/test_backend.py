"""The django.tasks backend in the test process (PRODUCT §A17): what enqueue writes, what a
worker's pass does with it, and what ``get_result`` reads back, on every database.

The functions are in :mod:`tests.testapp.tasks`; a pass here is the one a worker runs.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta

import pytest
from asgiref.sync import sync_to_async
from django.contrib.auth.models import Group
from django.db import connections, transaction
from django.urls import reverse
from django.utils import timezone

from solid_objects.errors import InvalidPayload
from solid_objects.models import DeadLetter, Instance, Message, ReadyMessage
from solid_objects.retention import retained_types
from solid_objects.tasks import SolidObjectsBackend
from solid_objects.tasks.compat import (
    InvalidTask,
    TaskResultDoesNotExist,
    TaskResultStatus,
    task_backends,
    task_enqueued,
    task_finished,
    task_started,
)
from solid_objects.tasks.naming import TASK_ACTOR_TYPE
from tests.support.waiting import wait_until
from tests.testapp import tasks

pytestmark = pytest.mark.django_db(transaction=True)

NO_DELAY = "tests.runtime.helpers.no_delay"


def test_the_backend_is_ours_and_says_what_it_supports():
    backend = task_backends["default"]
    assert isinstance(backend, SolidObjectsBackend)
    assert backend.supports_defer
    assert backend.supports_async_task
    assert backend.supports_get_result
    assert backend.supports_priority
    # An ordered queue is a valid queue without being listed in QUEUES.
    assert "ledger" in backend.queues
    assert backend.ordered_queues == frozenset({"ledger"})


def test_a_task_runs_and_its_result_is_read_back(run_tasks):
    result = tasks.add.enqueue(2, 3)
    assert result.status == TaskResultStatus.READY
    assert result.args == [2, 3]
    with pytest.raises(ValueError):
        result.return_value  # noqa: B018
    assert tasks.add.get_result(result.id).status == TaskResultStatus.READY

    assert run_tasks() == 1
    result.refresh()
    assert result.status == TaskResultStatus.SUCCESSFUL
    assert result.return_value == 5
    assert result.is_finished
    assert result.errors == []
    assert result.attempts == 1
    assert result.enqueued_at is not None
    assert result.started_at is not None
    assert result.finished_at is not None
    assert result.finished_at >= result.enqueued_at


def test_a_task_may_write_application_models(run_tasks):
    result = tasks.write_group.enqueue("written by a task")
    run_tasks()
    result.refresh()
    assert result.status == TaskResultStatus.SUCCESSFUL
    assert Group.objects.get(pk=result.return_value).name == "written by a task"


def test_enqueue_commits_and_rolls_back_with_the_callers_transaction(run_tasks):
    class Abort(Exception):
        pass

    with pytest.raises(Abort), transaction.atomic():
        Group.objects.create(name="rolled back")
        lost = tasks.write_group.enqueue("never")
        raise Abort
    with transaction.atomic():
        Group.objects.create(name="committed")
        kept = tasks.write_group.enqueue("kept")
    with pytest.raises(TaskResultDoesNotExist):
        tasks.write_group.get_result(lost.id)
    assert Message.objects.filter(request_id=lost.id).count() == 0
    assert tasks.write_group.get_result(kept.id).status == TaskResultStatus.READY
    run_tasks()
    assert tasks.write_group.get_result(kept.id).return_value > 0
    assert not Group.objects.filter(name="never").exists()


def test_the_enqueued_signal_waits_for_the_commit():
    seen = []

    def on_enqueued(sender, task_result, **kwargs):
        seen.append(task_result.id)

    task_enqueued.connect(on_enqueued)
    try:
        with transaction.atomic():
            result = tasks.add.enqueue(1, 1)
            assert seen == []
        assert seen == [result.id]
    finally:
        task_enqueued.disconnect(on_enqueued)


def test_started_and_finished_signals_come_from_the_worker(run_tasks):
    seen = []

    def started(sender, task_result, **kwargs):
        seen.append(("started", task_result.status))

    def finished(sender, task_result, **kwargs):
        seen.append(("finished", task_result.status))

    task_started.connect(started)
    task_finished.connect(finished)
    try:
        tasks.add.enqueue(1, 2)
        run_tasks()
    finally:
        task_started.disconnect(started)
        task_finished.disconnect(finished)
    assert seen == [
        ("started", TaskResultStatus.RUNNING),
        ("finished", TaskResultStatus.SUCCESSFUL),
    ]


def test_a_failing_task_is_retried_then_succeeds(run_tasks, solid_settings):
    solid_settings(RETRY_DELAY=NO_DELAY, MAX_ATTEMPTS=5)
    result = tasks.flaky.enqueue(2)
    run_tasks()
    result.refresh()
    assert result.status == TaskResultStatus.SUCCESSFUL
    assert result.return_value == {"attempt": 3, "id": result.id}
    assert result.attempts == 3


def test_retries_wait_for_the_retry_delay(run_tasks, solid_settings):
    solid_settings(RETRY_DELAY="tests.runtime.helpers.long_delay", MAX_ATTEMPTS=5)
    result = tasks.flaky.enqueue(1)
    run_tasks()
    result.refresh()
    assert result.status == TaskResultStatus.READY  # waiting for its retry
    assert result.attempts == 1
    [error] = result.errors
    assert error.exception_class is ConnectionError
    assert "attempt 1 of a flaky task" in error.traceback
    ready = ReadyMessage.objects.get(message__request_id=result.id)
    assert ready.available_at > timezone.now() + timedelta(minutes=30)


def test_after_max_attempts_the_task_failed_with_its_traceback(run_tasks, solid_settings):
    solid_settings(RETRY_DELAY=NO_DELAY, MAX_ATTEMPTS=3)
    result = tasks.always_fails.enqueue("card declined")
    assert run_tasks() == 3
    result.refresh()
    assert result.status == TaskResultStatus.FAILED
    assert result.is_finished
    assert result.attempts == 3
    [error] = result.errors
    assert error.exception_class is tasks.CardDeclined
    assert error.exception_class_path == "tests.testapp.tasks.CardDeclined"
    assert "card declined" in error.traceback
    assert "always_fails" in error.traceback  # the frame of the task function
    with pytest.raises(ValueError):
        result.return_value  # noqa: B018
    assert DeadLetter.objects.filter(message__request_id=result.id).count() == 1


def test_a_return_value_that_is_not_json_fails_the_task_at_once(run_tasks, solid_settings):
    solid_settings(RETRY_DELAY=NO_DELAY, MAX_ATTEMPTS=5)
    result = tasks.returns_a_set.enqueue()
    run_tasks()
    result.refresh()
    assert result.status == TaskResultStatus.FAILED
    assert result.attempts == 1


def test_async_task_functions_run(run_tasks):
    result = tasks.async_add.enqueue(4, 5)
    run_tasks()
    result.refresh()
    assert result.return_value == 9
    assert Group.objects.filter(name="async-4-5").exists()


def test_aget_result_and_aenqueue():
    async def scenario():
        result = await tasks.add.aenqueue(1, 2)
        again = await tasks.add.aget_result(result.id)
        # The executor thread of sync_to_async keeps its connection: close it.
        await sync_to_async(connections.close_all, thread_sensitive=True)()
        return result, again

    result, again = asyncio.run(scenario())
    assert again.id == result.id
    assert again.status == TaskResultStatus.READY
    assert again.args == [1, 2]


def test_run_after_defers_the_task(run_tasks):
    later = timezone.now() + timedelta(hours=1)
    deferred = tasks.add.using(run_after=later).enqueue(1, 1)
    due = tasks.add.using(run_after=timezone.now() - timedelta(seconds=1)).enqueue(2, 2)
    assert run_tasks() == 1
    assert tasks.add.get_result(due.id).return_value == 4
    waiting = tasks.add.get_result(deferred.id)
    assert waiting.status == TaskResultStatus.READY
    assert waiting.task.run_after == later
    assert ReadyMessage.objects.get(message__request_id=deferred.id).available_at == later


def test_higher_priority_runs_first(run_tasks):
    low = tasks.write_group.using(priority=-5).enqueue("low")
    plain = tasks.write_group.enqueue("plain")
    high = tasks.write_group.using(priority=10).enqueue("high")
    # The lowest priority is held back a twentieth of a second: wait for it to be due.
    wait_until(lambda: run_tasks() >= 0 and Group.objects.filter(name="low").exists())
    order = list(
        Group.objects.filter(name__in=["low", "plain", "high"])
        .order_by("pk")
        .values_list("name", flat=True)
    )
    assert order == ["high", "plain", "low"]
    assert tasks.write_group.get_result(high.id).task.priority == 10
    assert tasks.write_group.get_result(low.id).task.priority == -5
    assert tasks.write_group.get_result(plain.id).status == TaskResultStatus.SUCCESSFUL


def test_ordered_queue_tasks_share_one_mailbox_in_enqueue_order(run_tasks, solid_settings):
    solid_settings(RETRY_DELAY=NO_DELAY, MAX_ATTEMPTS=2)
    results = [tasks.post_entry.enqueue(n) for n in range(6)]
    instances = Instance.objects.filter(actor_type=TASK_ACTOR_TYPE)
    assert list(instances.values_list("actor_id", flat=True)) == ["queue:ledger"]
    run_tasks()
    assert [tasks.post_entry.get_result(r.id).return_value for r in results] == list(range(6))
    names = list(
        Group.objects.filter(name__startswith="ledger-")
        .order_by("pk")
        .values_list("name", flat=True)
    )
    assert names == [f"ledger-{edge}-{n}" for n in range(6) for edge in ("start", "end")]


def test_an_ordered_queue_waits_for_a_failing_task(run_tasks, solid_settings):
    """Strict order: a later entry never overtakes one waiting for its retry."""
    solid_settings(RETRY_DELAY="tests.runtime.helpers.long_delay", MAX_ATTEMPTS=3)
    blocked = tasks.flaky.using(queue_name="ledger").enqueue(1)
    behind = tasks.post_entry.enqueue(1)
    run_tasks()
    assert tasks.flaky.get_result(blocked.id).status == TaskResultStatus.READY
    assert tasks.post_entry.get_result(behind.id).status == TaskResultStatus.READY
    assert not Group.objects.filter(name__startswith="ledger-").exists()


def test_plain_tasks_do_not_wait_for_a_failing_one(run_tasks, solid_settings):
    solid_settings(RETRY_DELAY="tests.runtime.helpers.long_delay", MAX_ATTEMPTS=3)
    blocked = tasks.flaky.enqueue(1)
    free = tasks.add.enqueue(1, 2)
    run_tasks()
    assert tasks.flaky.get_result(blocked.id).status == TaskResultStatus.READY
    assert tasks.add.get_result(free.id).return_value == 3


def test_bad_input_is_refused_before_anything_is_written():
    with pytest.raises((TypeError, ValueError)):
        tasks.add.enqueue({1, 2}, 3)
    with pytest.raises(InvalidPayload):
        tasks.add.enqueue(float("nan"), 3)
    with pytest.raises(InvalidTask):
        tasks.add.using(queue_name="nowhere")
    with pytest.raises(InvalidTask):
        tasks.add.using(run_after=timezone.now().replace(tzinfo=None))
    assert Message.objects.count() == 0


def test_unknown_results_do_not_exist():
    with pytest.raises(TaskResultDoesNotExist):
        tasks.add.get_result("no-such-result")


def test_results_are_kept_for_the_message_retention(solid_settings):
    solid_settings(MESSAGE_RETENTION=timedelta(days=3))
    assert retained_types()[TASK_ACTOR_TYPE] == timedelta(days=3)


def test_the_admin_names_the_task_and_its_queue(admin_client, run_tasks, solid_settings):
    solid_settings(RETRY_DELAY=NO_DELAY, MAX_ATTEMPTS=1)
    result = tasks.add.enqueue(1, 2)
    tasks.always_fails.enqueue("declined")
    tasks.post_entry.enqueue(1)
    messages = admin_client.get(reverse("admin:solid_objects_message_changelist"))
    assert messages.status_code == 200
    text = messages.content.decode()
    assert "task tests.testapp.tasks.add on queue &quot;default&quot;" in text
    assert "task tests.testapp.tasks.post_entry on queue &quot;ledger&quot; (ordered)" in text
    found = admin_client.get(
        reverse("admin:solid_objects_message_changelist"), {"q": result.id}
    ).content.decode()
    assert "tests.testapp.tasks.add" in found
    assert "tests.testapp.tasks.always_fails" not in found
    run_tasks()
    dead = admin_client.get(reverse("admin:solid_objects_deadletter_changelist"))
    assert (
        "task tests.testapp.tasks.always_fails on queue &quot;default&quot;"
        in dead.content.decode()
    )
