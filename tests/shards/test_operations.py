"""The operator surfaces over shards (PRODUCT §A18, §A9, §A11, §A12): status, the dead
letter command, the doctor, /health/, /metrics/, the admin and the checks see every alias of
``SOLID_OBJECTS["DATABASES"]`` and act on the row's own shard."""

from __future__ import annotations

import json
from datetime import timedelta
from io import StringIO
from typing import Any
from urllib.parse import urlencode

import pytest
from django.conf import settings
from django.contrib.admin.models import LogEntry
from django.contrib.auth.models import User
from django.core.management import call_command
from django.core.management.base import CommandError
from django.test import Client, override_settings
from django.urls import reverse
from django.utils import timezone
from prometheus_client.parser import text_string_to_metric_families

import solid_objects
from solid_objects import UnknownDatabase, database_for
from solid_objects.checks import check_pool_size, check_routing
from solid_objects.dead_letter_lookup import AmbiguousDeadLetter
from solid_objects.dead_letter_lookup import retry as retry_dead_letter
from solid_objects.diagnostics import DIAGNOSTIC_TYPE, FAIL, OK, WARN, run_checks
from solid_objects.health import health_report
from solid_objects.metrics import registry
from solid_objects.models import DeadLetter, Effect, Instance, Message, Process, ReadyMessage
from solid_objects.runtime import processes
from solid_objects.status import report
from solid_objects.testing import drain
from tests.testapp.actors.core import Counter
from tests.testapp.actors.outbox import Payer

SHARDS = ["default", "shard_b"]
pytestmark = pytest.mark.django_db(transaction=True, databases=SHARDS)
ROUTER = ["solid_objects.routers.SolidObjectsRouter"]


@pytest.fixture
def sharded(solid_settings: Any) -> None:
    solid_settings(DATABASES=SHARDS)


@pytest.fixture
def admin_client() -> Client:
    client = Client()
    client.force_login(User.objects.create_superuser("ops", "ops@example.com", "pw"))
    return client


def ids_on(alias: str, count: int, actor_type: str = "tests.counter") -> list[str]:
    found = [f"op{n}" for n in range(300) if database_for(actor_type, f"op{n}") == alias]
    assert len(found) >= count
    return found[:count]


def fail_once(actor_id: str, solid_settings: Any) -> DeadLetter:
    """A real dead letter of ``actor_id`` on its own shard (a failing sync call)."""
    solid_settings(MAX_ATTEMPTS=1)
    with pytest.raises(solid_objects.MessageFailed):
        Counter.ref(actor_id).boom()
    alias = database_for("tests.counter", actor_id)
    return DeadLetter.objects.using(alias).get(actor_id=actor_id)


def queue(actor_ids: list[str]) -> None:
    for actor_id in actor_ids:
        Counter.ref(actor_id).enqueue().add(amount=1)


def test_status_adds_up_every_shard_and_shows_each(sharded, solid_settings):
    on_a, on_b = ids_on("default", 2), ids_on("shard_b", 3)
    queue(on_a + on_b)
    fail_once(ids_on("shard_b", 4)[3], solid_settings)

    whole = report()
    assert whole["mailbox"]["ready"] == whole["mailbox"]["due"] == 5
    assert [d["alias"] for d in whole["databases"]] == SHARDS
    assert whole["shards"]["default"]["mailbox"]["ready"] == 2
    assert whole["shards"]["shard_b"]["mailbox"]["ready"] == 3
    assert whole["dead_letters"]["unretried"] == 1
    assert whole["dead_letters"]["latest"][0]["database"] == "shard_b"
    assert report("shard_b")["mailbox"]["ready"] == 3
    assert "shards" not in report("shard_b")
    with pytest.raises(UnknownDatabase) as raised:
        report("nowhere")
    assert raised.value.known == ("default", "shard_b")

    out = StringIO()
    call_command("solid_objects_status", "--json", stdout=out)
    assert json.loads(out.getvalue())["shards"]["shard_b"]["mailbox"]["ready"] == 3
    out = StringIO()
    call_command("solid_objects_status", stdout=out)
    text = out.getvalue()
    assert "Shards (2; the figures below are totals over all)" in text
    assert "Mailboxes: 5 ready" in text and "on shard_b" in text
    out = StringIO()
    call_command("solid_objects_status", "--database", "default", stdout=out)
    assert "Mailboxes: 2 ready" in out.getvalue() and "Shards" not in out.getvalue()
    with pytest.raises(CommandError, match="'nowhere' holds no solid_objects tables"):
        call_command("solid_objects_status", "--database", "nowhere")


def register_everywhere(kind: str) -> str:
    """A role process registered on both shards under one id (as a worker serving every
    shard is)."""
    process_id = processes.register(kind, "default")
    Process.objects.using("default").get(pk=process_id).save(using="shard_b")
    return process_id


def test_a_process_on_every_shard_is_listed_once_with_its_shards(sharded):
    process_id = register_everywhere("worker")
    (live,) = report()["processes"]["live"]
    assert live["id"] == process_id and live["databases"] == SHARDS
    assert report()["shards"]["shard_b"]["processes"]["live"][0]["id"] == process_id


@pytest.mark.django_db(transaction=True, databases=SHARDS, reset_sequences=True)
def test_dead_letters_are_listed_over_shards_and_retried_on_their_own(sharded, solid_settings):
    on_a, on_b = ids_on("default", 1)[0], ids_on("shard_b", 1)[0]
    first, second = fail_once(on_a, solid_settings), fail_once(on_b, solid_settings)
    assert first.pk == second.pk  # ids are per alias: the same id on both shards

    out = StringIO()
    call_command("solid_objects_dead_letters", stdout=out)
    lines = out.getvalue().splitlines()
    assert "database" in lines[0]
    assert {line.split()[1] for line in lines[1:]} == set(SHARDS)

    with pytest.raises(AmbiguousDeadLetter):
        retry_dead_letter(first.pk)
    with pytest.raises(CommandError, match="exists on default, shard_b: choose one"):
        call_command("solid_objects_dead_letters", "--retry", str(first.pk))
    assert not Message.objects.using("shard_b").filter(idempotency_key__isnull=False).exists()

    out = StringIO()
    call_command(
        "solid_objects_dead_letters", "--retry", str(second.pk), "--database", "shard_b", stdout=out
    )
    assert out.getvalue().rstrip().endswith("on shard_b")
    key = f"dead-letter:{second.pk}"
    assert Message.objects.using("shard_b").get(idempotency_key=key).actor_id == on_b
    assert not Message.objects.using("default").filter(idempotency_key=key).exists()
    with pytest.raises(CommandError, match="no dead letter 999"):
        call_command("solid_objects_dead_letters", "--retry", "999")


def test_operator_verbs_act_on_the_queryset_shard(sharded, solid_settings):
    on_b = ids_on("shard_b", 2)
    queue(on_b)
    paused = Instance.objects.using("shard_b").filter(actor_id=on_b[0]).pause()
    assert paused == 1
    assert Instance.objects.using("shard_b").get(actor_id=on_b[0]).paused_at is not None
    letter = fail_once(on_b[1], solid_settings)
    retried = DeadLetter.objects.using("shard_b").filter(pk=letter.pk).retry()
    assert Message.objects.using("shard_b").filter(pk=retried[letter.pk].id).exists()


def test_with_the_router_a_row_read_from_a_shard_stays_on_it(sharded, solid_settings):
    on_b = ids_on("shard_b", 1)[0]
    letter = fail_once(on_b, solid_settings)
    with override_settings(DATABASE_ROUTERS=ROUTER):
        instance = Instance.objects.using("shard_b").get(actor_id=on_b)
        assert instance.dead_letters.get().pk == letter.pk  # a related lookup on shard_b
        instance.save(update_fields=["last_used_at"])  # written back where it came from
        assert not Instance.objects.exists()  # unhinted queries: DATABASE ("default")
        assert check_routing() == []  # the tables on every shard are no copies


def test_without_a_router_only_the_journal_would_be_copied(sharded):
    with override_settings(DATABASE_ROUTERS=[]):
        found = check_routing()
    assert [m.id for m in found] == ["solid_objects.W003"]
    assert "tilttek_activity" in found[0].msg


def test_a_small_pool_on_any_shard_is_a_warning(sharded, monkeypatch):
    options = settings.DATABASES["shard_b"].setdefault("OPTIONS", {})
    assert check_pool_size() == []
    monkeypatch.setitem(options, "pool", {"max_size": 2})  # no connection is opened meanwhile
    (warning,) = check_pool_size()
    assert warning.id == "solid_objects.W004" and "'shard_b'" in warning.msg


def test_the_doctor_checks_every_shard_with_a_round_trip_on_each(sharded):
    for kind in ("worker", "effect", "reminder", "broadcast"):
        register_everywhere(kind)
    layers = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}
    # The test settings keep the journal on "default" (W003: its tables on shard_b too).
    silenced = ["solid_objects.W003"]
    with override_settings(CHANNEL_LAYERS=layers, SILENCED_SYSTEM_CHECKS=silenced):
        findings = run_checks()
    by_shard = {(f.check, f.database): f for f in findings}
    for check in ("database", "schema", "wake-ups", "round trip"):
        for alias in SHARDS:
            assert by_shard[(check, alias)].status == OK, by_shard[(check, alias)]
    assert [f.status for f in findings] == [OK] * len(findings), findings
    for alias in SHARDS:
        assert not Instance.objects.using(alias).filter(actor_type=DIAGNOSTIC_TYPE).exists()
        # The round trip's short-lived caller registration is stopped on each shard.
        callers = Process.objects.using(alias).filter(kind="caller", shutdown_state="running")
        assert not callers.exists()

    out = StringIO()
    with override_settings(CHANNEL_LAYERS=layers, SILENCED_SYSTEM_CHECKS=silenced):
        call_command("solid_objects_doctor", "--json", "--database", "shard_b", stdout=out)
    checked = json.loads(out.getvalue())
    assert "database" not in checked[0]  # one alias: nothing to tell apart
    assert next(f for f in checked if f["check"] == "round trip")["status"] == "ok"
    with pytest.raises(CommandError, match="'nowhere' holds no solid_objects tables"):
        call_command("solid_objects_doctor", "--database", "nowhere")


def test_health_asks_every_shard_and_metrics_label_each(sharded, solid_settings):
    on_a, on_b = ids_on("default", 1), ids_on("shard_b", 2)
    queue(on_a + on_b)
    processes.register("worker", "default")  # a worker that serves the first shard only
    health = health_report()
    assert health["status"] == "ok"
    assert "default" in health["checks"]["database"]["detail"]
    assert "shard_b" in health["checks"]["database"]["detail"]
    roles = health_report(roles={"worker"})["checks"]["roles"]
    assert roles == {"status": "fail", "detail": "no live worker process on shard_b"}
    assert health_report("default", roles={"worker"})["status"] == "ok"

    text = registry().collect()
    samples = {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text
        for sample in family.samples
    }
    ready = "solid_objects_mailbox_ready_messages"
    assert samples[(ready, (("actor_type", "tests.counter"), ("database", "shard_b")))] == 2
    assert samples[(ready, (("actor_type", "tests.counter"), ("database", "default")))] == 1
    up = "solid_objects_role_up"
    assert samples[(up, (("database", "default"), ("kind", "worker")))] == 1
    assert samples[(up, (("database", "shard_b"), ("kind", "worker")))] == 0
    exposition = Client().get("/ops/metrics/")
    assert exposition.status_code == 200
    families = list(text_string_to_metric_families(exposition.content.decode()))
    assert any(s.labels.get("database") == "shard_b" for f in families for s in f.samples)
    assert Client().get("/ops/health/").json()["status"] == "ok"


def test_a_shard_nobody_serves_fails_the_doctors_backlog_and_shows_in_the_overview(
    sharded, admin_client
):
    register_everywhere("broadcast")
    for kind in ("effect", "reminder"):
        register_everywhere(kind)
    processes.register("worker", "default")  # the worker serves the first shard only
    overdue = timezone.now() - timedelta(minutes=5)
    for alias in SHARDS:
        actor_id = ids_on(alias, 1)[0]
        Counter.ref(actor_id).enqueue().add(amount=1)
        ReadyMessage.objects.using(alias).update(available_at=overdue)
    findings = {(f.check, f.database): f for f in run_checks(round_trip=False)}
    assert findings[("roles", "default")].status == OK
    assert findings[("roles", "shard_b")].status == WARN
    assert findings[("backlog", "shard_b")].status == FAIL
    assert "no worker role running" in findings[("backlog", "shard_b")].detail
    assert findings[("backlog", "default")].status == WARN  # served, only behind
    page = admin_client.get(reverse("admin:solid_objects_overview"))
    assert page.context["missing_roles"] == ["worker on shard_b"]


def test_the_admin_lists_one_shard_at_a_time_and_acts_on_the_rows_own(
    sharded, solid_settings, admin_client
):
    on_a, on_b = ids_on("default", 1)[0], ids_on("shard_b", 1)[0]
    fail_once(on_a, solid_settings)
    letter_b = fail_once(on_b, solid_settings)
    changelist = reverse("admin:solid_objects_deadletter_changelist")

    first = admin_client.get(changelist)
    assert first.status_code == 200
    assert on_a.encode() in first.content and on_b.encode() not in first.content
    assert b"?shard=shard_b" in first.content  # the shard filter offers every alias
    second = admin_client.get(changelist, {"shard": "shard_b"})
    assert on_b.encode() in second.content and on_a.encode() not in second.content
    assert admin_client.get(changelist, {"shard": "nowhere"}).status_code == 400

    # The object page of a shard_b row, as linked from the filtered list.
    preserved = urlencode({"_changelist_filters": "shard=shard_b"})
    change = reverse("admin:solid_objects_deadletter_change", args=[letter_b.pk])
    page = admin_client.get(f"{change}?{preserved}")
    assert page.status_code == 200
    assert b"(shard shard_b)" in page.content and on_b.encode() in page.content
    retry = reverse("admin:solid_objects_deadletter_retry", args=[letter_b.pk])
    assert f"{retry}?{preserved}".replace("&", "&amp;").encode() in page.content
    response = admin_client.post(f"{retry}?{preserved}")
    assert response.status_code == 302 and response["Location"] == f"{change}?{preserved}"
    key = f"dead-letter:{letter_b.pk}"
    assert Message.objects.using("shard_b").filter(idempotency_key=key).count() == 1
    assert not Message.objects.using("default").filter(idempotency_key=key).exists()
    assert "on shard_b" in LogEntry.objects.get().get_change_message()

    # A page opened with ?shard= (the overview's links) keeps it for its forms.
    page = admin_client.get(change, {"shard": "shard_b"})
    assert f"{retry}?{preserved}".encode() in page.content.replace(b"&amp;", b"&")

    # A bulk action on the shard_b list pauses shard_b's instance only.
    instance_b = Instance.objects.using("shard_b").get(actor_id=on_b)
    response = admin_client.post(
        reverse("admin:solid_objects_instance_changelist") + "?shard=shard_b",
        {"action": "pause", "_selected_action": [instance_b.pk]},
    )
    assert response.status_code == 302
    assert Instance.objects.using("shard_b").get(pk=instance_b.pk).paused_at is not None
    assert Instance.objects.using("default").get(actor_id=on_a).paused_at is None
    instance_page = admin_client.get(
        reverse("admin:solid_objects_instance_change", args=[instance_b.pk]), {"shard": "shard_b"}
    )
    assert instance_page.status_code == 200
    assert b"#1 boom" in instance_page.content and b"#2 boom" in instance_page.content


def test_the_overview_adds_up_every_shard_and_links_to_each(sharded, solid_settings, admin_client):
    queue(ids_on("default", 1) + ids_on("shard_b", 2))
    fail_once(ids_on("shard_b", 3)[2], solid_settings)
    overview = reverse("admin:solid_objects_overview")
    page = admin_client.get(overview)
    assert page.status_code == 200
    html = page.content.decode()
    assert 'data-shard="default"' in html and 'data-shard="shard_b"' in html
    assert page.context["overview"]["mailbox"]["due"] == 3
    assert "deadletter/?shard=shard_b" in html
    assert "on shard_b" in html  # the latest dead letters name their shard
    one = admin_client.get(overview, {"shard": "shard_b"})
    assert one.context["overview"]["mailbox"]["due"] == 2
    assert "data-shard=" not in one.content.decode()
    assert admin_client.get(overview, {"shard": "nowhere"}).status_code == 400


def test_the_admin_retries_a_dead_effect_on_its_shard(sharded, admin_client, solid_settings):
    payer = ids_on("shard_b", 1, "tests.payer")[0]
    # No on_failure callback: nobody handles the failure, so the effect is dead.
    Payer.ref(payer).pay("tests.outbox.fatal", {}, on_failure=None)
    drain()
    dead = Effect.objects.using("shard_b").get(status="dead")
    assert not Effect.objects.using("default").exists()
    changelist = reverse("admin:solid_objects_effect_changelist")
    listed = admin_client.get(changelist, {"shard": "shard_b", "status__exact": "dead"})
    assert dead.effect_id.encode() in listed.content
    response = admin_client.post(
        f"{changelist}?shard=shard_b",
        {"action": "retry_dead", "_selected_action": [dead.pk]},
    )
    assert response.status_code == 302 and "shard=shard_b" in response["Location"]
    retried = Effect.objects.using("shard_b").get(pk=dead.pk)
    assert retried.status == "pending" and retried.attempt_count == 0
