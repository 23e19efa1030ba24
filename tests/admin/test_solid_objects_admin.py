"""The solid_objects admin: dead-letter retry (single and bulk, idempotent, audited) and
instance pause/resume, through the real admin views."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.contrib.admin.models import LogEntry
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse
from django.utils import timezone

import solid_objects
from solid_objects.models import DeadLetter, Instance, Message
from tests.factories import ProcessFactory
from tests.testapp.actors.core import Counter

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def admin_client_logged_in() -> Client:
    user = User.objects.create_superuser("ops", "ops@example.com", "pw")
    client = Client()
    client.force_login(user)
    return client


def _dead_letter(actor_id: str, solid_settings: Any) -> DeadLetter:
    solid_settings(MAX_ATTEMPTS=1)
    with pytest.raises(solid_objects.MessageFailed):
        Counter.ref(actor_id).boom()
    return DeadLetter.objects.get(actor_id=actor_id)


def test_dead_letter_list_and_detail(admin_client_logged_in: Client, solid_settings: Any) -> None:
    dead = _dead_letter("admin-list", solid_settings)
    changelist = admin_client_logged_in.get(reverse("admin:solid_objects_deadletter_changelist"))
    assert changelist.status_code == 200
    assert b"admin-list" in changelist.content and b"RuntimeError" in changelist.content
    detail = admin_client_logged_in.get(
        reverse("admin:solid_objects_deadletter_change", args=[dead.pk])
    )
    assert detail.status_code == 200
    assert b"boom" in detail.content  # the exception message and the backtrace
    assert b"Retry" in detail.content


def test_retry_button_is_idempotent_and_audited(
    admin_client_logged_in: Client, solid_settings: Any
) -> None:
    dead = _dead_letter("admin-retry", solid_settings)
    url = reverse("admin:solid_objects_deadletter_retry", args=[dead.pk])
    for _ in range(2):
        response = admin_client_logged_in.post(url)
        assert response.status_code == 302
    retries = Message.objects.filter(idempotency_key=f"dead-letter:{dead.pk}")
    assert retries.count() == 1
    retry = retries.get()
    assert retry.operation == "boom" and retry.sequence == 2
    dead.refresh_from_db()
    assert dead.retried_message_id == retry.pk
    assert LogEntry.objects.filter(object_id=str(dead.pk)).count() == 2


def test_bulk_retry_action(admin_client_logged_in: Client, solid_settings: Any) -> None:
    first = _dead_letter("admin-bulk-1", solid_settings)
    second = _dead_letter("admin-bulk-2", solid_settings)
    url = reverse("admin:solid_objects_deadletter_changelist")
    data = {"action": "retry_selected", "_selected_action": [first.pk, second.pk]}
    admin_client_logged_in.post(url, data)
    admin_client_logged_in.post(url, data)
    keys = set(
        Message.objects.filter(idempotency_key__startswith="dead-letter:").values_list(
            "idempotency_key", flat=True
        )
    )
    assert keys == {f"dead-letter:{first.pk}", f"dead-letter:{second.pk}"}
    assert Message.objects.filter(idempotency_key__startswith="dead-letter:").count() == 2


def test_instance_admin_pause_and_resume(admin_client_logged_in: Client) -> None:
    Counter.ref("admin-pause").add(1)
    instance = Instance.objects.get(actor_id="admin-pause")
    url = reverse("admin:solid_objects_instance_changelist")
    detail = admin_client_logged_in.get(
        reverse("admin:solid_objects_instance_change", args=[instance.pk])
    )
    assert detail.status_code == 200 and b"&quot;value&quot;: 1" in detail.content
    admin_client_logged_in.post(url, {"action": "pause", "_selected_action": [instance.pk]})
    instance.refresh_from_db()
    assert instance.paused_at is not None
    message = Counter.ref("admin-pause").enqueue().add(1)
    with pytest.raises(solid_objects.SyncTimeout):
        message.result(timeout=0.3)  # paused: nobody may claim it
    admin_client_logged_in.post(url, {"action": "resume", "_selected_action": [instance.pk]})
    instance.refresh_from_db()
    assert instance.paused_at is None
    assert message.result(timeout=5) == 2


def test_read_only_admins_render(admin_client_logged_in: Client) -> None:
    Counter.ref("admin-pages").add(1)
    for model in (
        "message",
        "instance",
        "reminder",
        "effect",
        "broadcast",
        "process",
        "deadletter",
    ):
        response = admin_client_logged_in.get(reverse(f"admin:solid_objects_{model}_changelist"))
        assert response.status_code == 200, model
        add = admin_client_logged_in.get(reverse(f"admin:solid_objects_{model}_add"))
        assert add.status_code == 403, model


def test_the_process_list_flags_a_silent_role_but_never_a_sync_caller(
    admin_client_logged_in: Client,
) -> None:
    """A sync caller (a web or script process) heartbeats only while it calls: silent for an
    hour, it is idle, not a crashed worker."""
    an_hour_ago = timezone.now() - timedelta(hours=1)
    silent_worker = ProcessFactory(kind="worker", last_heartbeat_at=an_hour_ago)
    idle_caller = ProcessFactory(kind="caller", last_heartbeat_at=an_hour_ago)
    live_worker = ProcessFactory(kind="worker")
    stopped = ProcessFactory(kind="worker", last_heartbeat_at=an_hour_ago, shutdown_state="stopped")
    response = admin_client_logged_in.get(reverse("admin:solid_objects_process_changelist"))
    assert response.status_code == 200
    rows = response.content.decode().split("<tr")

    def stale(process_id: str) -> bool:
        (row,) = [row for row in rows if process_id in row]
        assert ('alt="True"' in row) != ('alt="False"' in row), row  # the one boolean column
        return 'alt="True"' in row

    assert stale(silent_worker.id) is True
    assert stale(idle_caller.id) is False
    assert stale(live_worker.id) is False
    assert stale(stopped.id) is False
