"""Schedules declared in ``SOLID_OBJECTS["SCHEDULES"]``: validated by system checks, armed by
schedulers, fired once per occurrence however many schedulers race, for actor operations
and django.tasks tasks."""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from django.conf import settings
from django.contrib.auth.models import Group
from django.db import connections
from django.test import override_settings
from django.utils import timezone

from solid_objects.checks import check_settings
from solid_objects.models import Message, Reminder
from solid_objects.schedules import SCHEDULE_ACTOR_TYPE, sync_schedules
from solid_objects.testing import drain, run_due_reminders
from tests.support.processes import Commands
from tests.support.waiting import wait_until
from tests.testapp.actors.outbox import Alarm

pytestmark = pytest.mark.django_db(transaction=True)

RING = {
    "cron": "30 2 * * *",
    "tz": "Europe/Paris",
    "actor": "tests.alarm",
    "actor_id": "scheduled",
    "operation": "ring",
    "arguments": {"label": "nightly"},
}
TASK = {"cron": "0 9 * * mon-fri", "tz": "Europe/Paris", "task": "tests.testapp.tasks.write_group"}


def schedule_row() -> Reminder:
    return Reminder.objects.get(actor_type=SCHEDULE_ACTOR_TYPE)


def test_an_actor_operation_fires_on_its_cron_slots(solid_settings: Any):
    solid_settings(SCHEDULES={"nightly": RING})
    assert sync_schedules() == 1
    drain()
    row = schedule_row()
    assert (row.actor_id, row.cron, row.time_zone) == ("nightly", "30 2 * * *", "Europe/Paris")
    first = row.next_run_at
    drain(at=first)
    assert [ring["label"] for ring in Alarm.ref("scheduled").rang()] == ["nightly"]
    row.refresh_from_db()
    assert row.next_run_at > first


def test_a_task_fires_through_the_tasks_backend(solid_settings: Any):
    solid_settings(SCHEDULES={"report": {**TASK, "kwargs": {"name": "from-a-schedule"}}})
    sync_schedules()
    drain()
    drain(at=schedule_row().next_run_at)
    assert Group.objects.filter(name="from-a-schedule").count() == 1
    assert Message.objects.filter(actor_type="solid_objects.task", operation="run").count() == 1


def test_an_unchanged_definition_is_armed_once_and_a_removed_one_is_disarmed(
    solid_settings: Any,
):
    solid_settings(SCHEDULES={"nightly": RING})
    sync_schedules()
    drain()
    row = schedule_row()
    sync_schedules()  # another scheduler starting: a no-op turn
    drain()
    assert schedule_row().updated_at == row.updated_at

    solid_settings(SCHEDULES={"nightly": {**RING, "cron": "0 3 * * *"}})
    sync_schedules()
    drain()
    assert schedule_row().cron == "0 3 * * *"

    solid_settings(SCHEDULES={})
    assert sync_schedules() == 1
    drain()
    assert not Reminder.objects.filter(actor_type=SCHEDULE_ACTOR_TYPE).exists()


def race(count: int, work: Callable[[], Any]) -> None:
    barrier = threading.Barrier(count)
    errors: list[BaseException] = []

    def run() -> None:
        try:
            barrier.wait(10)
            work()
        except BaseException as exc:  # reported below
            errors.append(exc)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=run) for _ in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert errors == []


def test_racing_schedulers_fire_each_occurrence_exactly_once(solid_settings: Any):
    solid_settings(
        SCHEDULES={
            f"every-{n}": {**RING, "cron": "*/5 * * * *", "missed": "all", "actor_id": f"a{n}"}
            for n in range(4)
        }
    )
    race(3, sync_schedules)  # three schedulers start together
    drain()
    rows = list(Reminder.objects.filter(actor_type=SCHEDULE_ACTOR_TYPE))
    assert len(rows) == 4
    assert len({row.next_run_at for row in rows}) == 1  # the same */5 slot
    at = rows[0].next_run_at + timedelta(minutes=10)  # three slots of each
    race(3, lambda: run_due_reminders(at=at))
    drain(at=at)
    for n in range(4):
        assert len(Alarm.ref(f"a{n}").rang()) == 3
    assert set(Reminder.objects.values_list("occurrence", flat=True)) == {3}


@pytest.mark.parametrize(
    ("schedule", "message"),
    [
        ({**RING, "cron": "0 25 * * *"}, "invalid cron expression"),
        ({**RING, "tz": "Europe/Atlantis"}, "unknown time zone"),
        ({**RING, "every": 60}, "unknown keys ['every']"),
        ({**RING, "operation": "no_such_operation"}, "no_such_operation"),
        ({**RING, "task": "tests.testapp.tasks.add"}, "exactly one of task= or actor="),
        ({**TASK, "task": "tests.testapp.tasks.nowhere"}, "no task"),
        ({**RING, "missed": "some"}, "missed must be"),
    ],
)
def test_bad_schedules_fail_the_system_checks(
    solid_settings: Any, schedule: dict[str, Any], message: str
):
    solid_settings(SCHEDULES={"bad": schedule})
    errors = [error for error in check_settings() if error.id == "solid_objects.E014"]
    assert len(errors) == 1
    assert message in errors[0].msg


def test_good_schedules_pass_the_system_checks(solid_settings: Any):
    solid_settings(SCHEDULES={"nightly": RING, "report": TASK})
    assert [error for error in check_settings() if error.id == "solid_objects.E014"] == []


@pytest.mark.slow
def test_two_scheduler_processes_fire_each_occurrence_once(commands: Commands):
    every_minute = {**RING, "cron": "* * * * *", "tz": "UTC", "missed": "all"}
    overrides = {"SCHEDULES": {"minutely": every_minute}}
    first = commands.start("run_reminder_scheduler", settings=overrides)
    second = commands.start("run_reminder_scheduler", settings=overrides)
    wait_until(
        lambda: (
            Message.objects.filter(actor_type=SCHEDULE_ACTOR_TYPE, operation="arm").count() == 2
        ),
        timeout=60.0,
        what="both schedulers to arm the schedule",
    )
    with override_settings(SOLID_OBJECTS={**settings.SOLID_OBJECTS, **overrides}):
        drain()  # the two arm turns: the second is a no-op
    row = schedule_row()
    # Three slots in the past: both scheduler processes find them due at once.
    now = timezone.now().replace(second=0, microsecond=0)
    Reminder.objects.filter(pk=row.pk).update(next_run_at=now - timedelta(minutes=2))
    wait_until(
        lambda: Reminder.objects.get(pk=row.pk).occurrence >= 3,
        timeout=60.0,
        what="the three missed occurrences",
    )
    assert commands.terminate(first, timeout=30.0) == 0
    assert commands.terminate(second, timeout=30.0) == 0
    occurrence = Reminder.objects.get(pk=row.pk).occurrence
    ticks = Message.objects.filter(actor_type=SCHEDULE_ACTOR_TYPE, operation="tick")
    assert ticks.count() == occurrence
    assert ticks.values("idempotency_key").distinct().count() == occurrence
    with override_settings(SOLID_OBJECTS={**settings.SOLID_OBJECTS, **overrides}):
        # Not the reminders role: a minute that turned since would fire one occurrence more.
        drain(roles=("actors", "effects"))
    assert len(Alarm.ref("scheduled").rang()) == occurrence
