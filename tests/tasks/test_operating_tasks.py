"""Operating tasks (``docs/tasks.md``, "Operating tasks" and "Results"): an operator's retry
of a failed task, which ``get_result()`` of the original id follows, and results removed by
the message retention, after which they do not exist."""

from __future__ import annotations

from datetime import timedelta
from io import StringIO

import pytest
from django.contrib.auth.models import Group
from django.core.management import call_command
from django.db.models import F

from solid_objects.models import DeadLetter, Instance, Message
from solid_objects.tasks.compat import TaskResultDoesNotExist, TaskResultStatus
from tests.tasks import conformance_tasks as tasks
from tests.testapp import tasks as app_tasks

pytestmark = pytest.mark.django_db(transaction=True)


def retry_dead_letter_of(result_id: str) -> None:
    dead = DeadLetter.objects.get(message__request_id=result_id)
    out = StringIO()
    call_command("solid_objects_dead_letters", "--retry", str(dead.pk), stdout=out)
    assert out.getvalue().startswith(f"dead letter {dead.pk} retried as message ")


def test_a_failed_task_retried_by_an_operator_runs_again_and_its_result_follows(
    run_tasks, solid_settings
):
    solid_settings(MAX_ATTEMPTS=1)
    result = tasks.requires_group.enqueue("the fix")
    run_tasks()
    result.refresh()
    assert (result.status, result.attempts) == (TaskResultStatus.FAILED, 1)
    assert result.errors[0].exception_class is LookupError

    Group.objects.create(name="the fix")  # the operator fixes the cause, then retries
    retry_dead_letter_of(result.id)
    result.refresh()
    assert result.status == TaskResultStatus.READY  # the retry's own message, not yet run
    assert (result.errors, result.attempts, result.finished_at) == ([], 0, None)

    run_tasks()
    result.refresh()
    assert (result.status, result.return_value, result.attempts) == (
        TaskResultStatus.SUCCESSFUL,
        "the fix",
        1,
    )
    assert result == tasks.requires_group.get_result(result.id)  # the original id
    assert Group.objects.filter(name="ran-the fix").count() == 1


def test_a_retried_task_of_an_ordered_queue_goes_to_the_tail(run_tasks, solid_settings):
    solid_settings(MAX_ATTEMPTS=1)
    failing = tasks.requires_group.using(queue_name="ledger").enqueue("ledger fix")
    behind = app_tasks.post_entry.enqueue(1)
    run_tasks()
    # Failed for good, it holds the queue no longer: the entry behind it ran.
    assert tasks.requires_group.get_result(failing.id).status == TaskResultStatus.FAILED
    assert app_tasks.post_entry.get_result(behind.id).return_value == 1

    waiting = app_tasks.post_entry.enqueue(2)
    Group.objects.create(name="ledger fix")
    retry_dead_letter_of(failing.id)
    run_tasks()
    assert tasks.requires_group.get_result(failing.id).return_value == "ledger fix"
    assert app_tasks.post_entry.get_result(waiting.id).return_value == 2
    ran = list(
        Group.objects.filter(name__in=["ledger-end-2", "ran-ledger fix"])
        .order_by("pk")
        .values_list("name", flat=True)
    )
    assert ran == ["ledger-end-2", "ran-ledger fix"]  # enqueued before the retry: first


def test_results_are_pruned_after_the_message_retention_then_do_not_exist(
    run_tasks, solid_settings
):
    solid_settings(MESSAGE_RETENTION=timedelta(days=3), MAX_ATTEMPTS=1)
    old = tasks.meaning_of_life.enqueue()
    recent = tasks.meaning_of_life.enqueue()
    failed = tasks.raises_value_error.enqueue()
    run_tasks()
    # As though the first and the failed one had finished four days ago (database fields
    # moved back on the database's own arithmetic), the second one yesterday.
    for result_id, age in ((old.id, 4), (failed.id, 4), (recent.id, 1)):
        message = Message.objects.filter(request_id=result_id)
        message.update(
            completed_at=F("completed_at") - timedelta(days=age),
            last_failed_at=F("last_failed_at") - timedelta(days=age),
        )
        Instance.objects.filter(messages__request_id=result_id).update(
            last_used_at=F("last_used_at") - timedelta(days=age)
        )
    DeadLetter.objects.filter(message__request_id=failed.id).update(
        last_failed_at=F("last_failed_at") - timedelta(days=4)
    )
    old_instance = Instance.objects.get(messages__request_id=old.id).pk

    call_command("prune_solid_objects", "--messages", "--instances", "--execute", stdout=StringIO())

    with pytest.raises(TaskResultDoesNotExist):
        tasks.meaning_of_life.get_result(old.id)
    with pytest.raises(TaskResultDoesNotExist):
        old.refresh()
    assert not Instance.objects.filter(pk=old_instance).exists()  # its actor went too
    assert tasks.meaning_of_life.get_result(recent.id).return_value == 42
    # A failed task is a dead letter: kept until an operator deletes it.
    assert tasks.raises_value_error.get_result(failed.id).status == TaskResultStatus.FAILED
