"""``solid_objects_status`` (table and ``--json``) and ``solid_objects_doctor``."""

from __future__ import annotations

import json
from datetime import timedelta
from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.test import override_settings
from django.utils import timezone

from solid_objects.diagnostics import DIAGNOSTIC_TYPE, FAIL, OK, run_checks
from solid_objects.models import Instance, Process
from solid_objects.runtime import processes
from solid_objects.status import collect
from solid_objects.testing import drain
from tests.factories import (
    BroadcastFactory,
    ClaimedMessageFactory,
    DeadLetterFactory,
    EffectFactory,
    MessageFactory,
    ProcessFactory,
    ReadyMessageFactory,
    ReminderFactory,
)
from tests.testapp import tasks

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def busy() -> dict[str, object]:
    now = timezone.now()
    live = ProcessFactory(kind="worker")
    stale = ProcessFactory(kind="effect", last_heartbeat_at=now - timedelta(minutes=10))
    ProcessFactory(kind="worker", shutdown_state="stopped", stopped_at=now)
    old_due = now - timedelta(seconds=30)
    ReadyMessageFactory(
        message=MessageFactory(actor_type="tests.counter", available_at=old_due),
        available_at=old_due,
    )
    ReadyMessageFactory(message=MessageFactory(), available_at=now + timedelta(hours=1))
    ClaimedMessageFactory(message=MessageFactory(actor_type="tests.counter"), process=live)
    EffectFactory(available_at=old_due)
    EffectFactory(status="dead")
    BroadcastFactory(status="processing", claimed_by=live)
    BroadcastFactory(available_at=old_due)
    ReminderFactory(next_run_at=old_due)
    DeadLetterFactory(operation="explode")
    return {"live": live, "stale": stale}


def test_status_reports_processes_mailboxes_outboxes_and_dead_letters(busy):
    report = collect()
    live = {p["id"]: p for p in report["processes"]["live"]}
    assert live[busy["live"].id]["stale"] is False
    assert live[busy["stale"].id]["stale"] is True
    assert report["processes"]["stopped"] == 1

    mailbox = report["mailbox"]
    assert (mailbox["ready"], mailbox["due"], mailbox["claimed"]) == (2, 1, 1)
    assert 25 <= mailbox["lag_seconds"] < 300
    (row,) = mailbox["by_actor_type"]  # factories use tests.counter
    assert row["actor_type"] == "tests.counter" and row["claimed"] == 1

    effects = report["outbox"]["effects"]
    assert (effects["pending"], effects["due"], effects["dead"]) == (1, 1, 1)
    assert effects["lag_seconds"] >= 25
    broadcasts = report["outbox"]["broadcasts"]
    assert (broadcasts["pending"], broadcasts["processing"]) == (1, 1)
    assert report["reminders"]["scheduled"] == 1 and report["reminders"]["due"] == 1
    dead = report["dead_letters"]
    assert dead["unretried"] == 1 and dead["latest"][0]["operation"] == "explode"


def test_status_command_prints_a_table_or_json(busy):
    out = StringIO()
    call_command("solid_objects_status", stdout=out)
    text = out.getvalue()
    for expected in ("Processes (2 live, 1 stopped)", "STALE", "Mailboxes:", "Outboxes:"):
        assert expected in text
    assert "Dead letters: 1 not retried" in text

    out = StringIO()
    call_command("solid_objects_status", "--json", stdout=out)
    data = json.loads(out.getvalue())
    assert set(data) == {"database", "processes", "mailbox", "outbox", "reminders", "dead_letters"}
    assert data["mailbox"]["ready"] == 2


def test_status_of_an_empty_database():
    report = collect()
    assert report["processes"] == {"live": [], "stopped": 0}
    assert report["mailbox"]["ready"] == 0 and report["mailbox"]["lag_seconds"] is None


def test_status_names_tasks_by_their_task_and_queue(solid_settings):
    solid_settings(MAX_ATTEMPTS=1)
    DeadLetterFactory(operation="explode")
    tasks.always_fails.enqueue("card declined")
    tasks.flaky.using(queue_name="ledger").enqueue(1)
    drain()
    tasks.add.enqueue(1, 2)  # waiting in the mailbox
    plain = 'task tests.testapp.tasks.always_fails on queue "default"'
    ordered = 'task tests.testapp.tasks.flaky on queue "ledger" (ordered)'
    latest = collect()["dead_letters"]["latest"]
    assert {(row["operation"], row["label"]) for row in latest} == {
        ("explode", "explode"),
        ("run", plain),
        ("run", ordered),
    }
    out = StringIO()
    call_command("solid_objects_status", stdout=out)
    text = out.getvalue()
    assert "Dead letters: 3 not retried" in text
    assert plain in text and ordered in text and "explode" in text
    assert "solid_objects.task/" not in text  # not the internal actor and its "run"
    [tasks_line] = [line for line in text.splitlines() if "(django.tasks)" in line]
    assert tasks_line.split()[:4] == ["solid_objects.task", "(django.tasks)", "ready", "1"]


def test_the_dead_letters_command_names_tasks_by_their_task_and_queue(solid_settings):
    solid_settings(MAX_ATTEMPTS=1)
    DeadLetterFactory(operation="explode")
    tasks.always_fails.enqueue("card declined")
    drain()
    out = StringIO()
    call_command("solid_objects_dead_letters", stdout=out)
    text = out.getvalue()
    assert 'task tests.testapp.tasks.always_fails on queue "default"' in text
    assert "solid_objects.task/" not in text  # not the internal actor and its "run"
    assert "explode" in text  # an actor's dead letter keeps its actor and operation


ROLE_KINDS = ("worker", "effect", "reminder", "broadcast")


def test_doctor_passes_on_a_working_setup_and_cleans_up_after_itself():
    for kind in ROLE_KINDS:
        processes.register(kind, "default")
    # The test actors declare observables: a working setup has a Channels layer (W005).
    layers = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}
    # The test settings' second alias (shard_b, for the shard tests) holds the tables of
    # both apps without a router: silenced here as a project would (the doctor honours it).
    silenced = ["solid_objects.W003"]
    with override_settings(CHANNEL_LAYERS=layers, SILENCED_SYSTEM_CHECKS=silenced):
        findings = {f.check: f for f in run_checks()}
    assert [f.status for f in findings.values()] == [OK] * 8, findings
    assert "sync call committed" in findings["round trip"].detail
    assert not Instance.objects.filter(actor_type=DIAGNOSTIC_TYPE).exists()
    # The short-lived caller registration of the round trip is stopped, not left to go stale.
    assert not Process.objects.filter(kind="caller", shutdown_state="running").exists()

    out = StringIO()
    call_command("solid_objects_doctor", stdout=out)
    assert "round trip" in out.getvalue()


def test_doctor_warns_without_live_workers_but_does_not_fail():
    out = StringIO()
    call_command("solid_objects_doctor", "--json", "--no-round-trip", stdout=out)
    findings = {f["check"]: f for f in json.loads(out.getvalue())}
    assert findings["roles"]["status"] == "warn"
    assert "not running: worker (actor turns" in findings["roles"]["detail"]
    assert findings["backlog"]["status"] == "ok"  # nothing waits, so nothing fails
    assert "round trip" not in findings


def test_doctor_fails_on_overdue_work_whose_role_is_not_running(solid_settings):
    """Only run_actor_worker: effects, reminders and broadcasts silently never run."""
    solid_settings(PROCESS_ALIVE_THRESHOLD=5.0)
    processes.register("worker", "default")
    overdue = timezone.now() - timedelta(seconds=30)
    EffectFactory(available_at=overdue)
    ReminderFactory(next_run_at=overdue)
    BroadcastFactory(available_at=timezone.now())  # not overdue, but nobody delivers it
    ReadyMessageFactory(message=MessageFactory(available_at=overdue), available_at=overdue)
    findings = {f.check: f for f in run_checks(round_trip=False)}
    roles, backlog = findings["roles"], findings["backlog"]
    assert roles.status == "warn" and "effect (effects" in roles.detail
    assert backlog.status == FAIL, backlog
    for expected in (
        "1 effects overdue by 30s and no effect role running",
        "1 reminders overdue by 30s and no reminder role running",
        "1 broadcasts pending and no broadcast role delivers them",
        "1 mailbox messages overdue by 30s",  # its role runs: behind, listed too
    ):
        assert expected in backlog.detail
    with pytest.raises(SystemExit):
        call_command(
            "solid_objects_doctor", "--no-round-trip", stdout=StringIO(), stderr=StringIO()
        )

    for kind in ("effect", "reminder", "broadcast"):
        processes.register(kind, "default")
    backlog = {f.check: f for f in run_checks(round_trip=False)}["backlog"]
    assert backlog.status == "warn" and "the roles are behind" in backlog.detail
    assert "broadcasts" not in backlog.detail  # pending but not overdue, and delivered


def doctor_json(*args: str) -> tuple[int, dict[str, dict[str, str]]]:
    """``solid_objects_doctor --json --no-round-trip *args``: its exit code and findings."""
    out = StringIO()
    code = 0
    try:
        call_command("solid_objects_doctor", "--json", "--no-round-trip", *args, stdout=out)
    except SystemExit as exit_info:
        code = int(exit_info.code or 0)
    return code, {f["check"]: f for f in json.loads(out.getvalue())}


def test_doctor_roles_fails_when_a_required_role_has_no_live_process():
    processes.register("worker", "default")
    ProcessFactory(kind="effect", last_heartbeat_at=timezone.now() - timedelta(hours=1))

    code, findings = doctor_json()  # by default a missing role only warns
    assert (code, findings["roles"]["status"]) == (0, "warn")

    code, findings = doctor_json("--roles", "worker,effect")
    assert (code, findings["roles"]["status"]) == (1, FAIL)
    detail = findings["roles"]["detail"]
    assert "required but not running: effect (effects" in detail  # a stale one is not live
    assert "not running: reminder (reminders" in detail  # not required: listed, not failed
    assert "stale: effect" in detail

    code, findings = doctor_json("--roles", " worker ")  # the one required kind is live
    assert (code, findings["roles"]["status"]) == (0, "warn")
    for kind in ("effect", "reminder", "broadcast"):
        processes.register(kind, "default")
    code, findings = doctor_json("--roles", "worker,effect,reminder,broadcast")
    assert (code, findings["roles"]["status"]) == (0, "warn")  # every one live; one stale
    assert "not running" not in findings["roles"]["detail"]

    with pytest.raises(CommandError, match="unknown role kind"):
        call_command("solid_objects_doctor", "--roles", "worker,workers", stdout=StringIO())


def test_an_idle_sync_caller_is_neither_stale_nor_a_missing_role():
    for kind in ROLE_KINDS:
        processes.register(kind, "default")
    idle = ProcessFactory(kind="caller", last_heartbeat_at=timezone.now() - timedelta(hours=1))
    (row,) = [p for p in collect()["processes"]["live"] if p["id"] == idle.id]
    assert (row["stale"], row["idle"], row["role"]) == (False, True, False)
    assert {f.check: f for f in run_checks(round_trip=False)}["roles"].status == OK
    out = StringIO()
    call_command("solid_objects_status", stdout=out)
    assert "idle caller" in out.getvalue() and "STALE" not in out.getvalue()


def test_doctor_fails_when_the_wake_up_transport_is_broken(solid_settings):
    solid_settings(WAKE_UP="redis", REDIS_URL="redis://127.0.0.1:1/0")
    findings = {f.check: f for f in run_checks(round_trip=False)}
    assert findings["wake-ups"].status == FAIL
    with pytest.raises(SystemExit) as exit_info:
        call_command(
            "solid_objects_doctor", "--no-round-trip", stdout=StringIO(), stderr=StringIO()
        )
    assert exit_info.value.code == 1


def test_doctor_fails_when_the_schema_is_missing(solid_settings):
    solid_settings(TABLE_PREFIX="absent_prefix_")
    findings = run_checks()
    schema = findings[-1]
    assert schema.check == "schema" and schema.status == FAIL  # and the checks stop there
    assert "absent_prefix_processes" in schema.detail


def test_doctor_fails_on_invalid_settings(solid_settings):
    solid_settings(POLLING_INTERVAL=-1)
    findings = {f.check: f for f in run_checks(round_trip=False)}
    assert findings["configuration"].status == FAIL
    assert "POLLING_INTERVAL" in findings["configuration"].detail


def test_process_rows_are_unaffected_by_the_doctor():
    before = Process.objects.count()
    run_checks(round_trip=False)
    assert Process.objects.count() == before
