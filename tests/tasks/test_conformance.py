"""``SolidObjectsBackend`` against the behaviour ``django.tasks`` documents and its own backends'
tests pin down (PRODUCT §A17).

The cases come from Django 6.1's ``tests/tasks`` (``test_tasks.py``, ``test_dummy_backend.py``,
``test_immediate_backend.py``) and from the database backend's tests of the ``django-tasks``
project (``tests/tests/test_database_backend.py``, now ``django-tasks-db``'s ``tests/tests.py``;
the ``django-tasks`` sdist ships no tests): what ``enqueue`` returns, ``get_result`` /
``refresh`` and their async twins, the result's statuses and timestamps, how exceptions and
return values that are not JSON are recorded, ``takes_context``, ``run_after``, priorities,
queue names, the capability checks, the signals (and the log lines Django's receivers write
from them), and a worker that survives a task calling ``exit()``. They are written for this
suite (pytest, the tasks of :mod:`tests.tasks.conformance_tasks`), run in passes of the
worker's actor role (``run_tasks``) or by a real ``run_actor_worker``, on every database.

Adapted to what is backend-specific:

- the database backend makes a failed task ``FAILED`` at once; this one retries it up to
  ``MAX_ATTEMPTS``, so the failure cases run with ``MAX_ATTEMPTS=1`` (retries are in
  ``test_backend.py``). ``errors`` holds the latest attempt's error, ``worker_ids`` one entry
  per attempt (``"unrecorded"`` once it finished);
- ``get_result()`` of a fresh enqueue equals the result ``enqueue`` returned except for
  ``enqueued_at``: ``enqueue`` returns the enqueuing process's clock, the row has the
  database's (reading it back would cost the enqueue a statement);
- the database backend's test moves a deferred row's ``run_after``; here the ready row's
  ``available_at`` is moved, which is what ``run_after`` sets.

Left out, and why:

- statement counts (``assertNumQueries``): this runtime's are pinned in
  ``tests/runtime/test_statements.py``;
- the ``db_worker`` command's options (``--batch``, ``--interval``, ``--max-tasks``,
  ``--worker-id``, ``--backend``, ``--queue-name``): ``run_actor_worker`` is the worker here,
  its ``--queues`` / ``--actor-types`` are in ``test_dedicated_workers.py``;
- row locking and index plans of the database backend's table (``select_for_update``,
  ``get_locked``, ``EXPLAIN``): the runtime's claims are tested in ``tests/runtime`` and
  ``tests/adversarial``;
- ``ENQUEUE_ON_COMMIT`` and ``id_function``: not options of this backend (an enqueue is
  always part of the caller's transaction, ids are UUID4s);
- ``prune_db_task_results``: retention is ``prune_solid_objects``
  (``test_operating_tasks.py``);
- the immediate backend letting ``KeyboardInterrupt`` through to its caller: a worker's
  Ctrl-C is its shutdown (``tests/operations/test_process_lifecycle.py``);
- ``USE_TZ=False``: the runtime needs aware datetimes;
- what ``django.tasks`` does without a backend (the ``@task`` decorator's validation,
  ``Task.call``, pickling, custom ``Task`` classes, the dummy backend's ``clear()``).
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import threading
import uuid
from datetime import timedelta
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.contrib.auth.models import Group
from django.db import close_old_connections, connections, transaction
from django.utils import timezone

from solid_objects.models import DeadLetter, Message, Process, ReadyMessage
from solid_objects.references import ref
from solid_objects.tasks import SolidObjectsBackend
from solid_objects.tasks.compat import (
    SOURCE,
    InvalidTask,
    TaskResultDoesNotExist,
    TaskResultMismatch,
    TaskResultStatus,
    task_backends,
    task_enqueued,
    task_finished,
    task_started,
)
from solid_objects.tasks.naming import TASK_ACTOR_TYPE, new_task_actor_id
from tests.support.waiting import wait_until
from tests.tasks import conformance_tasks as tasks
from tests.testapp import tasks as app_tasks

pytestmark = pytest.mark.django_db(transaction=True)

ONE_ATTEMPT = {"MAX_ATTEMPTS": 1, "RETRY_DELAY": "tests.runtime.helpers.no_delay"}


def close_thread_connections() -> None:
    """What an executor thread of ``sync_to_async`` must do before its loop ends."""
    connections.close_all()


def run_async(coroutine_function: Any) -> Any:
    """Run ``coroutine_function()`` on a fresh loop; its executor thread's connection closed."""

    async def scenario() -> Any:
        try:
            return await coroutine_function()
        finally:
            await sync_to_async(close_thread_connections, thread_sensitive=True)()

    return asyncio.run(scenario())


def count_elsewhere(request_id: str) -> int:
    """How many messages of ``request_id`` another connection sees."""
    seen: list[int] = []

    def look() -> None:
        try:
            seen.append(Message.objects.filter(request_id=request_id).count())
        finally:
            close_old_connections()
            connections.close_all()

    thread = threading.Thread(target=look)
    thread.start()
    thread.join()
    return seen[0]


# -- the backend -------------------------------------------------------------------------------
def test_the_default_backend_is_configured_and_checks_clean():
    backend = tasks.noop.get_backend()
    assert backend is task_backends["default"]
    assert isinstance(backend, SolidObjectsBackend)
    assert backend.alias == "default"
    assert backend.options == {"ORDERED_QUEUES": ["ledger"]}
    assert list(backend.check()) == []


# -- enqueue -----------------------------------------------------------------------------------
@pytest.mark.parametrize("task", [tasks.noop, tasks.noop_async], ids=["sync", "async"])
def test_enqueue_returns_a_ready_result_and_sends_task_enqueued(task):
    received = []

    def on_enqueued(sender, task_result, **kwargs):
        received.append((sender, task_result))

    task_enqueued.connect(on_enqueued)
    try:
        result = task.enqueue(1, two=3)
    finally:
        task_enqueued.disconnect(on_enqueued)
    assert uuid.UUID(result.id).version == 4
    assert result.status == TaskResultStatus.READY
    assert not result.is_finished
    assert result.enqueued_at is not None
    assert (result.started_at, result.last_attempted_at, result.finished_at) == (None,) * 3
    with pytest.raises(ValueError, match="Task has not finished yet"):
        result.return_value  # noqa: B018
    assert result.task == task
    assert (result.args, result.kwargs) == ([1], {"two": 3})
    assert (result.errors, result.attempts, result.backend) == ([], 0, "default")
    assert received == [(SolidObjectsBackend, result)]


def test_aenqueue_returns_a_ready_result():
    async def scenario():
        return await tasks.noop_async.aenqueue(), await tasks.noop.aenqueue(4)

    first, second = run_async(scenario)
    assert (first.status, first.task, first.args, first.kwargs) == (
        TaskResultStatus.READY,
        tasks.noop_async,
        [],
        {},
    )
    assert (second.status, second.args, second.attempts) == (TaskResultStatus.READY, [4], 0)
    assert Message.objects.filter(request_id__in=[first.id, second.id]).count() == 2


def test_arguments_that_are_not_json_are_refused_as_django_refuses_them():
    with pytest.raises(TypeError, match="Unsupported type"):
        tasks.noop.enqueue(timezone.now())
    with pytest.raises(TypeError, match="Unsupported type"):
        run_async(lambda: tasks.noop.aenqueue(kind=object()))
    with pytest.raises(ValueError, match="Unsupported value"):
        tasks.noop.enqueue(b"\xff")  # bytes are stored as text: these are not UTF-8
    assert not Message.objects.exists()
    # Tuples are lists and bytes text, as for every backend.
    result = tasks.noop.enqueue((1, 2), name=b"abc")
    assert (result.args, result.kwargs) == ([[1, 2]], {"name": "abc"})
    assert tasks.noop.get_result(result.id).args == [[1, 2]]


def test_an_enqueue_inside_a_transaction_is_seen_by_others_once_it_commits():
    with transaction.atomic():
        result = tasks.noop.enqueue()
        assert result.enqueued_at is not None
        assert Message.objects.filter(request_id=result.id).count() == 1
        assert count_elsewhere(result.id) == 0
    assert count_elsewhere(result.id) == 1


# -- results -----------------------------------------------------------------------------------
def test_get_result_reads_back_what_enqueue_returned():
    result = tasks.noop.enqueue(1, two=3)
    again = tasks.noop.get_result(result.id)
    backend_read = task_backends["default"].get_result(result.id)
    assert again == backend_read
    # Everything but enqueued_at, which is the database clock's once read back.
    assert dataclasses.replace(result, enqueued_at=again.enqueued_at) == again
    assert abs(again.enqueued_at - result.enqueued_at) < timedelta(seconds=5)
    result.refresh()
    assert result == again


def test_aget_result_and_arefresh(run_tasks):
    result = tasks.meaning_of_life.enqueue()

    async def read():
        return await tasks.meaning_of_life.aget_result(result.id)

    assert run_async(read) == tasks.meaning_of_life.get_result(result.id)
    run_tasks()

    async def refresh():
        await result.arefresh()

    run_async(refresh)
    assert (result.status, result.return_value) == (TaskResultStatus.SUCCESSFUL, 42)


@pytest.mark.parametrize("result_id", [str(uuid.uuid4()), "123", ""])
def test_results_that_were_never_enqueued_do_not_exist(result_id):
    backend = task_backends["default"]
    with pytest.raises(TaskResultDoesNotExist):
        backend.get_result(result_id)
    with pytest.raises(TaskResultDoesNotExist):
        tasks.noop.get_result(result_id)
    with pytest.raises(TaskResultDoesNotExist):
        run_async(lambda: backend.aget_result(result_id))


def test_the_result_of_another_task_is_a_mismatch():
    result = tasks.noop_async.enqueue()
    with pytest.raises(TaskResultMismatch, match="Task does not match"):
        tasks.noop.get_result(result.id)
    with pytest.raises(TaskResultMismatch, match="Task does not match"):
        run_async(lambda: tasks.noop.aget_result(result.id))
    assert tasks.noop_async.get_result(result.id).id == result.id


# -- running -----------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("task", "value"),
    [(tasks.noop, None), (tasks.noop_async, None), (tasks.meaning_of_life, 42)],
    ids=["sync", "async", "value"],
)
def test_a_task_runs_and_refresh_updates_its_result(run_tasks, task, value):
    result = task.enqueue()
    assert run_tasks() == 1
    assert (result.status, result.attempts) == (TaskResultStatus.READY, 0)  # not refreshed
    result.refresh()
    assert result.status == TaskResultStatus.SUCCESSFUL
    assert result.is_finished
    assert result.return_value == value
    assert None not in (result.started_at, result.last_attempted_at, result.finished_at)
    assert result.enqueued_at <= result.started_at <= result.finished_at
    assert (result.errors, result.attempts) == ([], 1)
    assert result == task.get_result(result.id)
    assert not ReadyMessage.objects.filter(message__request_id=result.id).exists()


@pytest.mark.parametrize(
    ("task", "exception", "text"),
    [
        (tasks.raises_value_error, ValueError, "this task failed with a ValueError"),
        (tasks.raises_system_exit, SystemExit, "this task failed with a SystemExit"),
    ],
    ids=["ValueError", "SystemExit"],
)
def test_an_exception_fails_the_task_with_its_class_and_traceback(
    run_tasks, solid_settings, task, exception, text
):
    solid_settings(**ONE_ATTEMPT)
    result = task.enqueue()
    assert run_tasks() == 1
    result.refresh()
    assert result.status == TaskResultStatus.FAILED
    assert result.is_finished
    with pytest.raises(ValueError, match="Task failed"):
        result.return_value  # noqa: B018
    assert None not in (result.started_at, result.last_attempted_at, result.finished_at)
    assert result.enqueued_at <= result.started_at <= result.finished_at
    [error] = result.errors
    assert error.exception_class is exception
    assert error.traceback.endswith(f"{exception.__name__}: {text}\n"), error.traceback
    assert f"in {task.name}" in error.traceback  # the frame of the task function
    assert (result.task, result.args, result.kwargs, result.attempts) == (task, [], {}, 1)
    assert DeadLetter.objects.filter(message__request_id=result.id).count() == 1


def test_an_exception_wrapping_another_is_recorded_as_raised(run_tasks, solid_settings):
    solid_settings(**ONE_ATTEMPT)
    result = tasks.raises_nested_exception.enqueue()
    run_tasks()
    result.refresh()
    assert result.status == TaskResultStatus.FAILED
    assert result._return_value is None
    [error] = result.errors
    assert error.exception_class is ValueError
    assert 'ValueError(ValueError("this task failed"))' in error.traceback


def test_a_return_value_that_is_not_json_fails_at_once_with_a_type_error(run_tasks, solid_settings):
    solid_settings(MAX_ATTEMPTS=5, RETRY_DELAY="tests.runtime.helpers.no_delay")
    result = tasks.returns_a_function.enqueue()
    assert run_tasks() == 1  # not retried: the same value would come back
    result.refresh()
    assert (result.status, result.attempts) == (TaskResultStatus.FAILED, 1)
    assert result._return_value is None
    [error] = result.errors
    assert error.exception_class is TypeError
    assert "Unsupported type" in error.traceback


def test_a_message_naming_something_other_than_a_task_fails_without_calling_it(
    run_tasks, solid_settings
):
    """What the database backend checks of a row's task path: here a message of the task
    actor (written by hand, as a tampered or stale row would be)."""
    solid_settings(**ONE_ATTEMPT)
    arguments = {"args": ["never written"], "kwargs": {}, "backend": "default"}
    for path in ("tests.testapp.tasks.record", "tests.tasks.conformance_tasks.missing"):
        ref(TASK_ACTOR_TYPE, new_task_actor_id("default")).enqueue().run(
            task=path, queue="default", **arguments
        )
    assert run_tasks() == 2
    classes = set(DeadLetter.objects.values_list("exception_class", flat=True))
    not_a_task = f"{InvalidTask.__module__}.{InvalidTask.__qualname__}"
    assert classes == {not_a_task, "builtins.ImportError"}
    assert not Group.objects.filter(name="never written").exists()  # record() never ran


def test_a_task_taking_context_gets_its_result_and_attempt(run_tasks):
    own = tasks.own_id.enqueue()
    checked = tasks.check_context.enqueue(1)
    run_tasks()
    own.refresh()
    checked.refresh()
    assert (own.status, own.return_value) == (TaskResultStatus.SUCCESSFUL, own.id)
    assert (checked.status, checked.return_value) == (TaskResultStatus.SUCCESSFUL, 1)


def test_run_after_holds_the_task_until_it_is_due(run_tasks):
    later = timezone.now() + timedelta(hours=10)
    result = tasks.noop.using(run_after=later).enqueue()
    assert result.task.run_after == later
    assert run_tasks() == 0
    result.refresh()
    assert (result.status, result.started_at) == (TaskResultStatus.READY, None)
    assert result.task.run_after == later
    ReadyMessage.objects.filter(message__request_id=result.id).update(
        available_at=timezone.now() - timedelta(minutes=1)
    )
    assert run_tasks() == 1
    result.refresh()
    assert result.status == TaskResultStatus.SUCCESSFUL


def test_due_tasks_run_by_priority_and_deferred_ones_wait(run_tasks):
    """The database backend's ``test_run_after_priority``: the due tasks run first by how long
    they have been due, then by priority; the deferred ones, whatever their priority, wait."""
    now = timezone.now()
    enqueue = app_tasks.write_group.using
    enqueue(priority=20, run_after=now - timedelta(hours=2)).enqueue("old")
    enqueue(priority=20, run_after=now - timedelta(hours=10)).enqueue("very old")
    far = enqueue(run_after=now + timedelta(hours=10)).enqueue("far future")
    urgent_far = enqueue(priority=10, run_after=now + timedelta(hours=10)).enqueue("urgent far")
    soon = enqueue(run_after=now + timedelta(hours=2)).enqueue("future")
    enqueue(priority=10).enqueue("high")
    enqueue(priority=2).enqueue("low")
    enqueue(priority=-2).enqueue("lower")  # held back 0.02 s: wait for it to be due
    wait_until(lambda: run_tasks() >= 0 and Group.objects.filter(name="lower").exists())
    order = list(Group.objects.order_by("pk").values_list("name", flat=True))
    assert order == ["very old", "old", "high", "low", "lower"]
    for waiting in (far, urgent_far, soon):
        assert app_tasks.write_group.get_result(waiting.id).status == TaskResultStatus.READY


def test_queue_names_and_priorities_are_validated_by_the_backend(settings, run_tasks):
    with pytest.raises(InvalidTask, match="Queue 'nowhere' is not valid for backend"):
        tasks.noop.using(queue_name="nowhere")
    for priority in (-101, 101, 3.1):
        with pytest.raises(InvalidTask, match="priority must be a whole number"):
            tasks.noop.using(priority=priority)
    assert [tasks.noop.using(priority=p).priority for p in (100, -100, 0)] == [100, -100, 0]
    to_emails = tasks.noop.using(queue_name="emails")
    # The backend is built again from the new settings; the task was made for the old one.
    settings.TASKS = {"default": {**settings.TASKS["default"], "QUEUES": ["default"]}}
    with pytest.raises(InvalidTask, match="Queue 'emails' is not valid for backend"):
        to_emails.enqueue()
    with pytest.raises(InvalidTask, match="Queue 'emails' is not valid for backend"):
        run_async(to_emails.aenqueue)
    assert not Message.objects.exists()
    # An empty QUEUES allows every name.
    settings.TASKS = {"default": {**settings.TASKS["default"], "QUEUES": []}}
    anywhere = tasks.meaning_of_life.using(queue_name="any-name").enqueue()
    run_tasks()
    assert tasks.meaning_of_life.get_result(anywhere.id).return_value == 42


# -- signals and their log lines ---------------------------------------------------------------
def test_started_and_finished_signals_and_the_log_lines_of_django_receivers(
    run_tasks, solid_settings, caplog
):
    solid_settings(**ONE_ATTEMPT)
    seen = []

    def started(sender, task_result, **kwargs):
        seen.append(("started", sender, task_result.id, task_result.status))

    def finished(sender, task_result, **kwargs):
        errors = [error.exception_class for error in task_result.errors]
        seen.append(("finished", sender, task_result.id, task_result.status, errors))

    caplog.set_level(logging.DEBUG, logger=SOURCE)
    task_started.connect(started)
    task_finished.connect(finished)
    try:
        ok = tasks.noop.enqueue()
        run_tasks()
        failed = tasks.raises_value_error.enqueue()
        run_tasks()
    finally:
        task_started.disconnect(started)
        task_finished.disconnect(finished)
    backend = SolidObjectsBackend
    assert seen == [
        ("started", backend, ok.id, TaskResultStatus.RUNNING),
        ("finished", backend, ok.id, TaskResultStatus.SUCCESSFUL, []),
        ("started", backend, failed.id, TaskResultStatus.RUNNING),
        ("finished", backend, failed.id, TaskResultStatus.FAILED, [ValueError]),
    ]
    lines = [
        (record.levelno, record.getMessage()) for record in caplog.records if record.name == SOURCE
    ]
    path = "tests.tasks.conformance_tasks"
    assert lines == [
        (logging.DEBUG, f"Task id={ok.id} path={path}.noop enqueued backend=default"),
        (logging.INFO, f"Task id={ok.id} path={path}.noop state=RUNNING"),
        (logging.INFO, f"Task id={ok.id} path={path}.noop state=SUCCESSFUL"),
        (
            logging.DEBUG,
            f"Task id={failed.id} path={path}.raises_value_error enqueued backend=default",
        ),
        (logging.INFO, f"Task id={failed.id} path={path}.raises_value_error state=RUNNING"),
        (logging.ERROR, f"Task id={failed.id} path={path}.raises_value_error state=FAILED"),
    ]
    failure = [r for r in caplog.records if r.name == SOURCE and r.levelno == logging.ERROR]
    assert failure[0].exc_info is not None  # the receiver logs the task's exception


# -- a real worker -----------------------------------------------------------------------------
@pytest.mark.slow
def test_a_worker_reports_a_running_task_and_survives_one_calling_exit(commands):
    """The database backend's ``test_worker_doesnt_exit``: ``exit()`` in a task fails that
    task; the worker (here with a single thread) goes on with the next one."""
    settings = {"POLLING_INTERVAL": 0.05, "IDLE_POLLING_INTERVAL": 0.25, **ONE_ATTEMPT}
    settings["MAX_ATTEMPTS"] = 3  # SystemExit is not retried whatever the policy
    proc = commands.start("run_actor_worker", "--threads", "1", settings=settings)
    running = app_tasks.meet.enqueue("conformance-running", "conformance-go")
    wait_until(
        lambda: Group.objects.filter(name="conformance-running").exists(),
        what="the task to start",
        details=lambda: commands.log(proc),
    )
    running.refresh()
    assert running.status == TaskResultStatus.RUNNING
    assert not running.is_finished
    assert running.started_at is not None and running.finished_at is None
    worker = Process.objects.get(kind="worker", shutdown_state="running")
    assert (
        running.worker_ids
        == [f"{worker.hostname}:{worker.pid}"]
        == [f"{worker.hostname}:{proc.pid}"]
    )
    Group.objects.create(name="conformance-go")

    exits = tasks.calls_exit.enqueue()
    after = tasks.meaning_of_life.enqueue()

    def done() -> bool:
        for result in (running, exits, after):
            result.refresh()
        return all(result.is_finished for result in (running, exits, after))

    wait_until(done, what="the tasks", details=lambda: commands.log(proc))
    assert running.return_value == "conformance-running"
    assert (exits.status, exits.attempts) == (TaskResultStatus.FAILED, 1)
    [error] = exits.errors
    assert error.exception_class is SystemExit
    assert error.traceback.endswith("SystemExit: 1\n"), error.traceback
    assert after.return_value == 42
    assert proc.poll() is None, commands.log(proc)
    assert "stopped unexpectedly" not in commands.log(proc)  # no role thread ended
    assert commands.terminate(proc) == 0, commands.log(proc)
