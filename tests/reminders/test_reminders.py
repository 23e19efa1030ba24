"""Reminders: schedule / unschedule, one-shot and recurring, missed policies, destroy."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.db import connection
from django.utils import timezone

from solid_objects import reminders, signals
from solid_objects.models import Effect, Instance, Message, Reminder
from solid_objects.outbox import run_pending_effects
from solid_objects.testing import run_due_reminders
from tests.support.processes import Commands
from tests.support.waiting import wait_until
from tests.testapp.actors.outbox import Alarm

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def captured() -> Any:
    seen: dict[str, list[dict[str, Any]]] = {"fired": [], "replaced": []}

    def fired(sender: Any, **payload: Any) -> None:
        seen["fired"].append(payload)

    def replaced(sender: Any, **payload: Any) -> None:
        seen["replaced"].append(payload)

    signals.reminder_fired.connect(fired)
    signals.reminder_replaced.connect(replaced)
    yield seen
    signals.reminder_fired.disconnect(fired)
    signals.reminder_replaced.disconnect(replaced)


def keys(actor_id: str) -> list[str]:
    return [ring["key"] for ring in Alarm.ref(actor_id).rang()]


@pytest.mark.slow
def test_a_one_shot_reminder_fires_through_the_scheduler_process(commands: Commands):
    alarm = Alarm.ref("wake")
    alarm.set_alarm(delay=0.2, label="morning")
    reminder = Reminder.objects.get()
    assert (reminder.name, reminder.status, reminder.interval_seconds) == (
        "ring",
        "scheduled",
        None,
    )
    key = f"reminder:{reminder.pk}:1"

    with commands.running("run_reminder_scheduler") as scheduler:
        wait_until(
            lambda: Message.objects.filter(idempotency_key=key).exists(),
            timeout=30.0,
            what="the reminder's message",
        )
        assert commands.terminate(scheduler, timeout=30.0) == 0

    message = Message.objects.get(idempotency_key=key)
    assert (message.operation, message.delivery_mode) == ("ring", "internal")
    reminder.refresh_from_db()
    assert (reminder.status, reminder.occurrence) == ("completed", 1)
    assert alarm.rang() == [{"label": "morning", "key": key}]


def test_a_one_shot_reminder_fires_once_when_due(captured):
    alarm = Alarm.ref("once")
    alarm.set_alarm(delay=60)
    reminder = Reminder.objects.get()
    assert run_due_reminders() == 0  # not due yet on the real clock
    assert run_due_reminders(at=reminder.next_run_at - timedelta(seconds=1)) == 0

    assert run_due_reminders(at=reminder.next_run_at + timedelta(seconds=1)) == 1
    assert run_due_reminders(at=reminder.next_run_at + timedelta(days=1)) == 0
    reminder.refresh_from_db()
    assert (reminder.status, reminder.occurrence) == ("completed", 1)
    assert keys("once") == [f"reminder:{reminder.pk}:1"]
    assert [(f["reminder_id"], f["name"], f["occurrence"]) for f in captured["fired"]] == [
        (reminder.pk, "ring", 1)
    ]


def test_a_reminder_at_a_given_time():
    at = timezone.now() + timedelta(days=3)
    Alarm.ref("dated").set_alarm(at=at.isoformat())
    reminder = Reminder.objects.get()
    assert abs(reminder.next_run_at - at) < timedelta(milliseconds=1)
    assert run_due_reminders(at=at) == 1


def test_missed_latest_coalesces_a_long_outage_into_one_message():
    alarm = Alarm.ref("latest")
    alarm.set_alarm(delay=0, every=60, missed="latest")
    reminder = Reminder.objects.get()
    start = reminder.next_run_at
    assert reminder.interval_seconds == 60

    outage_end = start + timedelta(hours=1, seconds=30)  # 61 slots were due
    assert run_due_reminders(at=outage_end) == 1
    reminder.refresh_from_db()
    assert reminder.occurrence == 1
    assert reminder.status == "scheduled"
    assert reminder.next_run_at == start + timedelta(minutes=61)  # the next future slot
    assert reminder.next_run_at > outage_end

    assert run_due_reminders(at=outage_end) == 0
    assert run_due_reminders(at=reminder.next_run_at) == 1
    assert keys("latest") == [f"reminder:{reminder.pk}:1", f"reminder:{reminder.pk}:2"]


def test_missed_all_enqueues_one_message_per_missed_occurrence():
    alarm = Alarm.ref("all")
    alarm.set_alarm(delay=0, every=60, missed="all", label="tick")
    reminder = Reminder.objects.get()
    start = reminder.next_run_at

    assert run_due_reminders(at=start + timedelta(minutes=10, seconds=30)) == 11
    reminder.refresh_from_db()
    assert reminder.occurrence == 11
    assert reminder.next_run_at == start + timedelta(minutes=11)
    assert keys("all") == [f"reminder:{reminder.pk}:{n}" for n in range(1, 12)]


def test_missed_all_is_bounded_per_pass(monkeypatch):
    monkeypatch.setattr(reminders, "MAX_CATCH_UP", 5)
    Alarm.ref("bounded").set_alarm(delay=0, every=60, missed="all")
    reminder = Reminder.objects.get()
    at = reminder.next_run_at + timedelta(minutes=11, seconds=30)  # 12 slots

    start = reminder.next_run_at
    assert len(reminders.fire_due_reminders(now=at)) == 5
    reminder.refresh_from_db()
    assert reminder.occurrence == 5
    assert reminder.next_run_at == start + timedelta(minutes=5)  # still due: more follow
    assert run_due_reminders(at=at) == 7
    assert Message.objects.filter(operation="ring").count() == 12


def test_rescheduling_a_name_moves_it(captured):
    alarm = Alarm.ref("moving")
    alarm.set_alarm(delay=3600, key="a", label="first")
    first = Reminder.objects.get()
    assert captured["replaced"] == []

    alarm.set_alarm(delay=7200, key="a", label="second")
    moved = Reminder.objects.get()
    assert (moved.pk, moved.name) == (first.pk, "ring:a")
    assert moved.next_run_at > first.next_run_at + timedelta(minutes=50)
    assert moved.arguments == {"label": "second"}
    assert [(r["actor_id"], r["name"]) for r in captured["replaced"]] == [("moving", "ring:a")]

    alarm.set_alarm(delay=3600, key="b")
    assert sorted(Reminder.objects.values_list("name", flat=True)) == ["ring:a", "ring:b"]
    assert run_due_reminders(at=moved.next_run_at + timedelta(seconds=1)) == 2
    assert [ring["label"] for ring in alarm.rang()] == ["ring", "second"]


def test_unschedule_cancels():
    alarm = Alarm.ref("cancelled")
    alarm.set_alarm(delay=60, key="x")
    alarm.set_alarm(delay=60)
    alarm.cancel(key="x")
    assert list(Reminder.objects.values_list("name", flat=True)) == ["ring"]
    alarm.cancel()
    alarm.cancel()  # cancelling nothing is fine
    assert not Reminder.objects.exists()
    assert run_due_reminders(at=timezone.now() + timedelta(days=1)) == 0
    assert alarm.rang() == []


def test_destroy_removes_reminders_and_pending_effects(tmp_path: Path):
    sink = tmp_path / "sink.jsonl"
    alarm = Alarm.ref("doomed")
    alarm.pay_later(str(sink))
    assert Effect.objects.count() == 1 and Reminder.objects.count() == 1

    assert alarm.destroy() is True
    assert not Effect.objects.exists()
    assert not Reminder.objects.exists()
    assert run_pending_effects() == 0
    assert run_due_reminders(at=timezone.now() + timedelta(days=1)) == 0
    assert not sink.exists()
    assert not Instance.objects.filter(actor_type="tests.alarm", actor_id="doomed").exists()


def delete_without_cascade(instance_id: int) -> None:
    """Delete an instance row leaving its reminders behind, as a host without foreign-key
    enforcement would (or as a destroy between the scheduler's probe and its lock looks)."""
    table = connection.ops.quote_name(Instance._meta.db_table)
    off, on = {
        "sqlite": ("PRAGMA foreign_keys = OFF", "PRAGMA foreign_keys = ON"),
        "postgresql": (
            "SET session_replication_role = replica",
            "SET session_replication_role = DEFAULT",
        ),
        "mysql": ("SET FOREIGN_KEY_CHECKS = 0", "SET FOREIGN_KEY_CHECKS = 1"),
    }[connection.vendor]
    with connection.cursor() as cursor:
        cursor.execute(off)
        try:
            cursor.execute(f"DELETE FROM {table} WHERE id = %s", [instance_id])
        finally:
            cursor.execute(on)


def test_a_reminder_never_recreates_a_destroyed_actor():
    alarm = Alarm.ref("gone")
    alarm.set_alarm(delay=0)
    reminder = Reminder.objects.get()
    delete_without_cascade(reminder.instance_id)
    assert Reminder.objects.filter(pk=reminder.pk).exists()

    assert run_due_reminders(at=timezone.now() + timedelta(seconds=5)) == 0
    assert not Instance.objects.filter(actor_type="tests.alarm", actor_id="gone").exists()
    assert not Message.objects.filter(operation="ring").exists()
    assert not Reminder.objects.exists()  # the orphan was removed


def test_concurrent_schedulers_fire_each_occurrence_once():
    import threading

    from django.db import connections

    for n in range(12):
        Alarm.ref(f"crowd-{n}").set_alarm(delay=0, every=60, missed="all")
    at = timezone.now() + timedelta(minutes=2, seconds=30)  # 3 occurrences each
    start = threading.Barrier(3)
    errors: list[BaseException] = []

    def schedule() -> None:
        try:
            start.wait(10)
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
    assert messages.count() == 36
    assert messages.values("idempotency_key").distinct().count() == 36
    assert set(Reminder.objects.values_list("occurrence", flat=True)) == {3}


def test_the_roles_join_all_roles():
    from solid_objects.outbox import EffectRole
    from solid_objects.reminders import ReminderRole
    from solid_objects.runtime.launch import build_supervisor, extra_roles

    roles = [role for role, _ in extra_roles()]
    assert EffectRole in roles and ReminderRole in roles
    assert (EffectRole.kind, ReminderRole.kind) == ("effect", "reminder")
    supervisor = build_supervisor(all_roles=True)
    kinds = {slot.factory(supervisor, slot.index).kind for slot in supervisor.slots()}
    assert {"worker", "effect", "reminder"} <= kinds
