"""Cron reminders: wall-clock slots in a time zone, daylight saving time, missed policies,
typed errors before anything is written, and racing schedulers."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from django.db import connections

from solid_objects import MessageFailed
from solid_objects.models import Message, Reminder
from solid_objects.testing import run_due_reminders
from tests.testapp.actors.outbox import Alarm

pytestmark = pytest.mark.django_db(transaction=True)

PARIS = ZoneInfo("Europe/Paris")


def paris(*parts: int, fold: int = 0) -> datetime:
    return datetime(*parts, tzinfo=PARIS, fold=fold)  # type: ignore[misc]


def reminder() -> Reminder:
    return Reminder.objects.get()


def test_a_weekday_cron_runs_at_nine_paris_time():
    Alarm.ref("office").set_alarm(cron="0 9 * * mon-fri", tz="Europe/Paris")
    row = reminder()
    assert (row.cron, row.time_zone, row.interval_seconds) == (
        "0 9 * * mon-fri",
        "Europe/Paris",
        None,
    )
    first = row.next_run_at.astimezone(PARIS)
    assert (first.hour, first.minute) == (9, 0)
    assert first.weekday() < 5

    friday = paris(2027, 1, 8, 9, 0)
    assert run_due_reminders(at=friday.astimezone(UTC)) == 1
    row.refresh_from_db()
    assert row.next_run_at == paris(2027, 1, 11, 9, 0)  # Monday: the weekend is skipped
    assert run_due_reminders(at=friday.astimezone(UTC)) == 0


def test_a_slot_in_the_skipped_spring_hour_runs_right_after_the_jump():
    Alarm.ref("spring").set_alarm(cron="30 2 * * *", tz="Europe/Paris")
    # Clocks go from 02:00 to 03:00 on Sunday 28 March 2027: 02:30 does not exist that day.
    assert run_due_reminders(at=paris(2027, 3, 27, 12, 0)) == 1
    row = reminder()
    assert row.next_run_at == paris(2027, 3, 28, 3, 0)  # 01:00 UTC, once
    assert row.next_run_at == datetime(2027, 3, 28, 1, 0, tzinfo=UTC)
    assert run_due_reminders(at=row.next_run_at) == 1
    row.refresh_from_db()
    assert row.next_run_at == paris(2027, 3, 29, 2, 30)  # back to 02:30, now UTC+2
    assert row.next_run_at == datetime(2027, 3, 29, 0, 30, tzinfo=UTC)


def test_a_slot_in_the_repeated_autumn_hour_runs_once():
    Alarm.ref("autumn").set_alarm(cron="30 2 * * *", tz="Europe/Paris", missed="all")
    # Clocks go from 03:00 back to 02:00 on Sunday 31 October 2027: 02:30 happens twice.
    first = paris(2027, 10, 31, 2, 30)  # the first 02:30, UTC+2
    Reminder.objects.update(next_run_at=first)
    assert run_due_reminders(at=paris(2027, 10, 31, 2, 30, fold=1)) == 1  # an hour later
    row = reminder()
    assert row.next_run_at == paris(2027, 11, 1, 2, 30)  # not the second 02:30
    assert row.next_run_at == datetime(2027, 11, 1, 1, 30, tzinfo=UTC)
    assert Message.objects.filter(operation="ring").count() == 1


def test_an_hourly_cron_runs_in_both_passes_of_the_repeated_hour():
    Alarm.ref("hourly").set_alarm(cron="15 * * * *", tz="Europe/Paris", missed="all")
    Reminder.objects.update(next_run_at=paris(2027, 10, 31, 1, 15))
    assert run_due_reminders(at=paris(2027, 10, 31, 3, 20)) == 4  # 01:15, 02:15 x2, 03:15
    assert reminder().next_run_at == paris(2027, 10, 31, 4, 15)


def test_missed_latest_coalesces_and_keeps_the_wall_clock():
    Alarm.ref("latest").set_alarm(cron="0 9 * * *", tz="Europe/Paris", missed="latest")
    Reminder.objects.update(next_run_at=paris(2027, 3, 20, 9, 0))
    # A ten-day outage across the spring change: one message, the next 09:00 after it.
    assert run_due_reminders(at=paris(2027, 3, 30, 10, 0)) == 1
    row = reminder()
    assert row.occurrence == 1
    assert row.next_run_at == paris(2027, 3, 31, 9, 0)


def test_missed_all_enqueues_every_missed_slot_across_the_change():
    Alarm.ref("all").set_alarm(cron="0 9 * * *", tz="Europe/Paris", missed="all")
    Reminder.objects.update(next_run_at=paris(2027, 3, 26, 9, 0))
    assert run_due_reminders(at=paris(2027, 3, 30, 10, 0)) == 5  # 26, 27, 28, 29, 30
    row = reminder()
    assert row.occurrence == 5
    assert row.next_run_at == paris(2027, 3, 31, 9, 0)
    keys = [ring["key"] for ring in Alarm.ref("all").rang()]
    assert keys == [f"reminder:{row.pk}:{n}" for n in range(1, 6)]


def test_missed_all_is_bounded_per_pass(monkeypatch):
    from solid_objects import reminders

    monkeypatch.setattr(reminders, "MAX_CATCH_UP", 3)
    Alarm.ref("bounded").set_alarm(cron="0 * * * *", tz="UTC", missed="all")
    start = datetime(2027, 1, 1, 0, 0, tzinfo=UTC)
    Reminder.objects.update(next_run_at=start)
    at = start + timedelta(hours=6, minutes=30)  # 7 slots
    assert len(reminders.fire_due_reminders(now=at)) == 3
    assert reminder().next_run_at == start + timedelta(hours=3)  # still due: more follow
    assert len(reminders.fire_due_reminders(now=at)) == 3
    assert len(reminders.fire_due_reminders(now=at)) == 1
    assert reminder().next_run_at == start + timedelta(hours=7)
    assert Message.objects.filter(operation="ring").count() == 7


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"cron": "61 * * * *"}, "invalid cron expression"),
        ({"cron": "not a cron"}, "invalid cron expression"),
        ({"cron": "0 0 30 2 *"}, "invalid cron expression"),
        ({"cron": "*/10 * * * * *"}, "five fields"),
        ({"cron": "0 9 * * *", "tz": "Mars/Olympus"}, "unknown time zone"),
        ({"cron": "0 9 * * *", "every": 60}, "cron= or every="),
        ({"cron": "0 9 * * *", "delay": 5}, "no at= or delay="),
        ({"tz": "Europe/Paris", "delay": 5}, "tz=...) needs cron="),
    ],
)
def test_bad_cron_options_fail_the_turn_before_anything_is_written(
    solid_settings: Any, options: dict[str, Any], message: str
):
    solid_settings(RETRY_DELAY="tests.runtime.helpers.no_delay")
    with pytest.raises(MessageFailed) as caught:
        Alarm.ref("bad").sync(timeout=20).set_alarm(**options)
    assert caught.value.error["class"] == "solid_objects.errors.InvalidPayload"
    assert message in caught.value.error["message"]
    assert not Reminder.objects.exists()


def test_rescheduling_with_every_clears_the_cron():
    alarm = Alarm.ref("switch")
    alarm.set_alarm(cron="0 9 * * *", tz="Europe/Paris")
    alarm.set_alarm(delay=0, every=60)
    row = reminder()
    assert (row.cron, row.time_zone, row.interval_seconds) == (None, None, 60)


def test_racing_schedulers_fire_each_cron_occurrence_once():
    for n in range(10):
        Alarm.ref(f"crowd-{n}").set_alarm(cron="*/5 * * * *", tz="Europe/Paris", missed="all")
    start = datetime(2027, 10, 31, 0, 0, tzinfo=UTC)  # 02:00 Paris, the repeated hour
    Reminder.objects.update(next_run_at=start)
    at = start + timedelta(minutes=14)  # 3 slots each
    barrier = threading.Barrier(3)
    errors: list[BaseException] = []

    def schedule() -> None:
        try:
            barrier.wait(10)
            run_due_reminders(at=at)
        except BaseException as exc:  # reported below
            errors.append(exc)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=schedule) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert errors == []
    run_due_reminders(at=at)  # whatever a skipped lock left behind
    messages = Message.objects.filter(operation="ring")
    assert messages.count() == 30
    assert messages.values("idempotency_key").distinct().count() == 30
    assert set(Reminder.objects.values_list("occurrence", flat=True)) == {3}
