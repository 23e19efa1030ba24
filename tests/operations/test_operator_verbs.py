"""Operator verbs on the models' querysets (pause and resume actors, retry dead letters and
dead effects), and the admin actions and the command that call them.

Times come from the database clock: the tests move this process's clock (Django's
``timezone.now``) far into the past, so a verb stamped by Python would be caught."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from django.db import connection, transaction
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from solid_objects.db.vendors import dialect_for
from solid_objects.models import DeadLetter, Effect, Instance, Message
from solid_objects.runtime.wakeup import doorbell
from tests.factories import DeadLetterFactory, EffectFactory, InstanceFactory

pytestmark = pytest.mark.django_db(transaction=True)

#: Where this process's clock is moved during a test.
PYTHON_CLOCK = datetime(2001, 1, 1, tzinfo=UTC)


@pytest.fixture
def python_clock_in_2001(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(timezone, "now", lambda: PYTHON_CLOCK)


@pytest.fixture
def operator() -> Client:
    client = Client()
    client.force_login(User.objects.create_superuser("operator", "op@example.com", "pw"))
    return client


def database_now() -> datetime:
    with connection.cursor() as cursor:
        return dialect_for(connection).database_now(cursor)


def assert_on_database_clock(value: datetime | None, before: datetime) -> None:
    assert value is not None
    # The database clock, to the second (SQLite and MySQL store microseconds; PostgreSQL's
    # now() is its transaction's start, taken after ``before``).
    assert before - timedelta(seconds=1) <= value <= database_now() + timedelta(seconds=1)


# -- pause and resume ---------------------------------------------------------------------------
def test_pause_stamps_the_database_clock_and_skips_paused_actors(python_clock_in_2001) -> None:
    earlier = datetime(2020, 5, 5, tzinfo=UTC)
    first, second = InstanceFactory(), InstanceFactory()
    already = InstanceFactory(paused_at=earlier)
    before = database_now()
    selected = Instance.objects.filter(pk__in=[first.pk, second.pk, already.pk])
    assert selected.pause() == 2
    for instance in (first, second):
        instance.refresh_from_db()
        assert_on_database_clock(instance.paused_at, before)
    already.refresh_from_db()
    assert already.paused_at == earlier  # a second pause keeps the first time
    assert selected.pause() == 0


def test_resume_clears_the_pause_and_rings_the_work_doorbell_after_commit() -> None:
    paused = InstanceFactory(paused_at=datetime(2020, 5, 5, tzinfo=UTC))
    running = InstanceFactory()
    bell = doorbell("work")
    with transaction.atomic():
        seen = bell.generation
        assert Instance.objects.filter(pk__in=[paused.pk, running.pk]).resume() == 1
        assert bell.generation == seen  # not before the commit
    assert bell.generation != seen
    paused.refresh_from_db()
    assert paused.paused_at is None
    seen = bell.generation
    assert Instance.objects.filter(pk=paused.pk).resume() == 0
    assert bell.generation == seen  # nothing resumed, nothing rung


def test_admin_pause_and_resume_call_the_verbs(operator: Client, python_clock_in_2001) -> None:
    instance = InstanceFactory()
    url = reverse("admin:solid_objects_instance_changelist")
    before = database_now()
    response = operator.post(url, {"action": "pause", "_selected_action": [instance.pk]})
    assert response.status_code == 302
    instance.refresh_from_db()
    assert_on_database_clock(instance.paused_at, before)
    operator.post(url, {"action": "resume", "_selected_action": [instance.pk]})
    instance.refresh_from_db()
    assert instance.paused_at is None


# -- dead letters --------------------------------------------------------------------------------
def dead_letter(**kwargs: Any) -> DeadLetter:
    return DeadLetterFactory(
        message__operation="add",
        message__arguments={"args": [1], "kwargs": {}},
        **kwargs,
    )


def test_dead_letter_retry_enqueues_once_and_points_at_the_retry() -> None:
    first, second = dead_letter(), dead_letter()
    retried = DeadLetter.objects.filter(pk__in=[first.pk, second.pk]).retry()
    assert sorted(retried) == sorted([first.pk, second.pk])
    again = DeadLetter.objects.filter(pk__in=[first.pk, second.pk]).retry()
    assert {pk: ref.id for pk, ref in again.items()} == {pk: ref.id for pk, ref in retried.items()}
    for row in (first, second):
        row.refresh_from_db()
        message = Message.objects.get(pk=retried[row.pk].id)
        assert row.retried_message_id == message.pk
        assert message.idempotency_key == f"dead-letter:{row.pk}"
        assert (message.operation, message.instance_id) == ("add", row.instance_id)
    assert first.retry().id == retried[first.pk].id  # one row: the same verb
    assert DeadLetter.objects.none().retry() == {}


def test_dead_letter_command_retries_through_the_verb(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # The verb is watched, not replaced: every call goes on to the real DeadLetter.retry.
    verb = DeadLetter.retry
    through_the_verb: list[tuple[int, str | None]] = []

    def watched(self: DeadLetter) -> Any:
        through_the_verb.append((self.pk, self._state.db))
        return verb(self)

    monkeypatch.setattr(DeadLetter, "retry", watched)
    row = dead_letter()
    call_command("solid_objects_dead_letters", retry=row.pk)
    assert through_the_verb == [(row.pk, connection.alias)]  # on the row's own database
    row.refresh_from_db()
    assert row.retried_message_id is not None
    assert f"retried as message {row.retried_message_id}" in capsys.readouterr().out
    from django.core.management.base import CommandError

    with pytest.raises(CommandError, match=f"no dead letter {row.pk + 1000}"):
        call_command("solid_objects_dead_letters", retry=row.pk + 1000)


def test_admin_bulk_retry_of_dead_letters(operator: Client) -> None:
    first, second = dead_letter(), dead_letter()
    url = reverse("admin:solid_objects_deadletter_changelist")
    data = {"action": "retry_selected", "_selected_action": [first.pk, second.pk]}
    assert operator.post(url, data).status_code == 302
    assert operator.post(url, data).status_code == 302
    assert Message.objects.filter(idempotency_key__startswith="dead-letter:").count() == 2
    assert not DeadLetter.objects.filter(retried_message__isnull=True).exists()


# -- dead effects --------------------------------------------------------------------------------
def test_dead_effect_retry_resets_only_dead_effects(python_clock_in_2001) -> None:
    long_ago = datetime(2020, 5, 5, tzinfo=UTC)
    dead = EffectFactory(
        status=Effect.Status.DEAD, attempt_count=5, available_at=long_ago, completed_at=long_ago
    )
    pending = EffectFactory(available_at=long_ago)
    bell = doorbell("effect")
    seen = bell.generation
    before = database_now()
    assert Effect.objects.filter(pk__in=[dead.pk, pending.pk]).retry_dead() == 1
    assert bell.generation != seen
    dead.refresh_from_db()
    assert (dead.status, dead.attempt_count, dead.completed_at, dead.claimed_by_id) == (
        "pending",
        0,
        None,
        None,
    )
    assert_on_database_clock(dead.available_at, before)
    pending.refresh_from_db()
    assert (pending.status, pending.available_at) == ("pending", long_ago)
    assert Effect.objects.filter(pk=dead.pk).retry_dead() == 0  # pending now, not dead


def test_admin_retry_of_dead_effects(operator: Client) -> None:
    dead = EffectFactory(status=Effect.Status.DEAD, attempt_count=5)
    completed = EffectFactory(status=Effect.Status.COMPLETED, attempt_count=1)
    url = reverse("admin:solid_objects_effect_changelist")
    data = {"action": "retry_dead", "_selected_action": [dead.pk, completed.pk]}
    response = operator.post(url, data, follow=True)
    assert b"Retrying 1 dead effect(s)." in response.content
    dead.refresh_from_db()
    completed.refresh_from_db()
    assert (dead.status, dead.attempt_count) == ("pending", 0)
    assert (completed.status, completed.attempt_count) == ("completed", 1)


def test_admin_retry_refuses_handled_effects_and_says_so(operator: Client) -> None:
    """A handled effect's failure reached ``on_failure`` (a declined card): retrying it
    would run it again, so the action leaves it and tells the operator why."""
    finished = timezone.now() - timedelta(hours=1)
    dead = EffectFactory(status=Effect.Status.DEAD, attempt_count=5)
    handled = EffectFactory(status=Effect.Status.HANDLED, attempt_count=1, completed_at=finished)
    url = reverse("admin:solid_objects_effect_changelist")
    data = {"action": "retry_dead", "_selected_action": [dead.pk, handled.pk]}
    text = operator.post(url, data, follow=True).content.decode()
    assert "Retrying 1 dead effect(s)." in text
    refused = "1 handled effect(s) not retried: their failure was delivered to on_failure"
    assert refused in text
    dead.refresh_from_db()
    handled.refresh_from_db()
    assert (dead.status, dead.attempt_count) == ("pending", 0)
    assert (handled.status, handled.attempt_count) == ("handled", 1)
    assert handled.completed_at == finished

    data = {"action": "retry_dead", "_selected_action": [handled.pk]}
    text = operator.post(url, data, follow=True).content.decode()
    assert refused in text and "Retrying 0" not in text
    handled.refresh_from_db()
    assert handled.status == "handled"
    assert Effect.objects.filter(pk=handled.pk).retry_dead() == 0


# -- permissions ---------------------------------------------------------------------------------
def staff_with(*codenames: str) -> Client:
    from django.contrib.auth.models import Permission

    user = User.objects.create_user("staff", "staff@example.com", "pw", is_staff=True)
    user.user_permissions.set(
        Permission.objects.filter(content_type__app_label="solid_objects", codename__in=codenames)
    )
    client = Client()
    client.force_login(user)
    return client


def test_operator_actions_need_the_change_permission() -> None:
    instance = InstanceFactory()
    dead = EffectFactory(status=Effect.Status.DEAD, attempt_count=5)
    viewer = staff_with("view_instance", "view_effect")
    instances = reverse("admin:solid_objects_instance_changelist")
    effects = reverse("admin:solid_objects_effect_changelist")
    viewer.post(instances, {"action": "pause", "_selected_action": [instance.pk]})
    viewer.post(effects, {"action": "retry_dead", "_selected_action": [dead.pk]})
    instance.refresh_from_db()
    dead.refresh_from_db()
    assert (instance.paused_at, dead.status) == (None, "dead")  # not offered, not run

    User.objects.filter(username="staff").delete()
    operator = staff_with("view_instance", "change_instance", "view_effect", "change_effect")
    operator.post(instances, {"action": "pause", "_selected_action": [instance.pk]})
    operator.post(effects, {"action": "retry_dead", "_selected_action": [dead.pk]})
    instance.refresh_from_db()
    dead.refresh_from_db()
    assert instance.paused_at is not None and dead.status == "pending"
