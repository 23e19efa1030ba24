"""Retention (§A9): previews change nothing; pruning deletes only what retention allows and
never work that is pending, claimed, scheduled, unfinished in an outbox or dead-lettered."""

from __future__ import annotations

import threading
from datetime import timedelta
from typing import Any

import pytest
from django.core.management import call_command
from django.db import connection, connections, transaction
from django.utils import timezone

from solid_objects import retention, signals
from solid_objects.conf import get_settings
from solid_objects.models import Broadcast, Effect, Instance, Message, Process
from tests.factories import (
    BroadcastFactory,
    ClaimedMessageFactory,
    DeadLetterFactory,
    EffectFactory,
    InstanceFactory,
    MessageFactory,
    ProcessFactory,
    ReadyMessageFactory,
    ReminderFactory,
)

pytestmark = pytest.mark.django_db(transaction=True)

LONG_AGO = timedelta(days=40)  # past every default retention (30 and 7 days) and 1 day


def ago(delta: timedelta = LONG_AGO) -> Any:
    return timezone.now() - delta


def old_message(**kwargs: Any) -> Message:
    return MessageFactory(completed_at=ago(), **kwargs)


def ids(model: Any) -> set[Any]:
    return set(model.objects.values_list("id", flat=True))


@pytest.fixture
def messages() -> dict[str, Message]:
    """One message per case; the keys say whether retention may delete it."""
    made = {
        "delete_old": old_message(),
        "delete_finished_outbox": old_message(),
        "keep_recent": MessageFactory(completed_at=ago(timedelta(days=1))),
        "keep_never_completed": MessageFactory(completed_at=None),
        "keep_pending_effect": old_message(),
        "keep_processing_effect": old_message(),
        "keep_dead_effect": old_message(),
        "keep_pending_broadcast": old_message(),
        "keep_dead_broadcast": old_message(),
        "keep_dead_letter": old_message(),
        "keep_retried_as": old_message(),
        "keep_ready": old_message(),
    }
    finished = made["delete_finished_outbox"]
    EffectFactory(message=finished, status="completed", completed_at=ago())
    BroadcastFactory(message=finished, status="delivered", delivered_at=ago())
    EffectFactory(message=made["keep_pending_effect"], status="pending")
    EffectFactory(message=made["keep_processing_effect"], status="processing")
    EffectFactory(message=made["keep_dead_effect"], status="dead")
    BroadcastFactory(message=made["keep_pending_broadcast"], status="pending")
    BroadcastFactory(message=made["keep_dead_broadcast"], status="dead")
    DeadLetterFactory(message=made["keep_dead_letter"])
    DeadLetterFactory(retried_message=made["keep_retried_as"])
    ReadyMessageFactory(message=made["keep_ready"])
    return made


def expected(made: dict[str, Any], keep: bool) -> set[int]:
    return {row.id for key, row in made.items() if key.startswith("keep") == keep}


def test_message_retention_keeps_everything_still_owed(messages):
    before = ids(Message)
    counts = retention.preview(instances=False, processes=False)
    assert counts.messages == 2
    assert ids(Message) == before  # the preview changed nothing

    deleted = retention.prune(instances=False, processes=False)
    assert deleted.messages == 2
    remaining = ids(Message)
    assert not remaining & expected(messages, keep=False)
    assert expected(messages, keep=True) <= remaining
    # Finished outbox rows of a pruned message go with it (database cascade).
    assert not Effect.objects.filter(message_id=messages["delete_finished_outbox"].id).exists()
    assert not Broadcast.objects.filter(message_id=messages["delete_finished_outbox"].id).exists()
    assert retention.preview(instances=False, processes=False).messages == 0


def test_messages_are_pruned_in_batches_with_progress(solid_settings):
    solid_settings(PRUNE_BATCH_SIZE=2)
    for _ in range(5):
        old_message()
    batches: list[tuple[str, int]] = []
    counts = retention.prune(
        instances=False, processes=False, progress=lambda kind, n: batches.append((kind, n))
    )
    assert counts.messages == 5
    assert batches == [("messages", 2), ("messages", 2), ("messages", 1)]


def test_a_stopping_worker_ends_its_retention_run_between_batches(solid_settings):
    solid_settings(PRUNE_BATCH_SIZE=2)
    for _ in range(5):
        old_message()
    batches: list[int] = []
    counts = retention.prune(
        instances=False,
        processes=False,
        progress=lambda kind, n: batches.append(n),
        should_stop=lambda: len(batches) >= 1,
    )
    assert counts.messages == 2
    assert Message.objects.count() == 3


@pytest.fixture
def stopped_processes() -> dict[str, Process]:
    def stopped(**kwargs: Any) -> Process:
        return ProcessFactory(shutdown_state="stopped", stopped_at=ago(), **kwargs)

    made = {
        "delete_idle": stopped(),
        "keep_recent": ProcessFactory(shutdown_state="stopped", stopped_at=ago(timedelta(days=1))),
        "keep_running": ProcessFactory(last_heartbeat_at=ago()),
        "keep_lease": stopped(),
        "keep_claim": stopped(),
        "keep_processing_broadcast": stopped(),
        "keep_reminder_claim": stopped(),
    }
    InstanceFactory(
        activation_owner=made["keep_lease"],
        activation_token="11111111-1111-1111-1111-111111111111",
        activation_generation=1,
    )
    ClaimedMessageFactory(process=made["keep_claim"])
    BroadcastFactory(status="processing", claimed_by=made["keep_processing_broadcast"])
    ReminderFactory(claimed_by=made["keep_reminder_claim"])
    return made


def test_process_retention_deletes_only_old_stopped_processes_that_own_nothing(
    stopped_processes,
):
    pruned: list[dict[str, Any]] = []

    def on_pruned(sender: Any, signal: Any = None, **payload: Any) -> None:
        pruned.append(payload)

    assert retention.preview(messages=False, instances=False).processes == 1
    signals.process_pruned.connect(on_pruned)
    try:
        counts = retention.prune(messages=False, instances=False)
    finally:
        signals.process_pruned.disconnect(on_pruned)
    assert counts.processes == 1
    remaining = ids(Process)
    assert expected(stopped_processes, keep=True) <= remaining
    assert stopped_processes["delete_idle"].id not in remaining
    assert pruned == [{"process_id": stopped_processes["delete_idle"].id, "reason": "retention"}]


def retained(**kwargs: Any) -> Instance:
    instance = InstanceFactory(actor_type="tests.retained", **kwargs)
    Instance.objects.filter(id=instance.id).update(created_at=ago())
    return instance


@pytest.fixture
def instances() -> dict[str, Instance]:
    made = {
        "delete_idle": retained(last_used_at=ago()),
        "delete_never_used": retained(),
        "keep_recent": retained(last_used_at=ago(timedelta(hours=1))),
        "keep_other_type": InstanceFactory(actor_type="tests.counter", last_used_at=ago()),
        "keep_paused": retained(last_used_at=ago(), paused_at=ago()),
        "keep_leased": retained(
            last_used_at=ago(),
            activation_owner=ProcessFactory(),
            activation_token="22222222-2222-2222-2222-222222222222",
            activation_generation=3,
        ),
        "keep_ready": retained(last_used_at=ago()),
        "keep_claimed": retained(last_used_at=ago()),
        "keep_scheduled": retained(last_used_at=ago()),
        "keep_paused_reminder": retained(last_used_at=ago()),
        "keep_pending_effect": retained(last_used_at=ago()),
        "keep_pending_broadcast": retained(last_used_at=ago()),
        "keep_dead_letter": retained(last_used_at=ago()),
    }
    ReadyMessageFactory(message=MessageFactory(instance=made["keep_ready"]))
    ClaimedMessageFactory(message=MessageFactory(instance=made["keep_claimed"]))
    ReminderFactory(instance=made["keep_scheduled"], status="scheduled")
    ReminderFactory(instance=made["keep_paused_reminder"], status="paused")
    EffectFactory(message=old_message(instance=made["keep_pending_effect"]))
    BroadcastFactory(message=old_message(instance=made["keep_pending_broadcast"]))
    DeadLetterFactory(message=MessageFactory(instance=made["keep_dead_letter"]))
    # Finished history does not keep an instance alive: it goes with it.
    idle = made["delete_idle"]
    done = old_message(instance=idle)
    EffectFactory(message=done, status="completed")
    ReminderFactory(instance=idle, status="completed")
    return made


def test_instance_retention_only_for_types_that_ask_and_only_when_idle(instances):
    # The django.tasks actor keeps its idle instances (and their results) for MESSAGE_RETENTION.
    assert retention.retained_types() == {
        "tests.retained": timedelta(days=1),
        "solid_objects.task": get_settings().MESSAGE_RETENTION,
    }
    preview = retention.preview(messages=False, processes=False)
    assert preview.instances == 2
    assert preview.instances_by_type == {"tests.retained": 2, "solid_objects.task": 0}
    counts = retention.prune(messages=False, processes=False)
    assert counts.instances == 2
    remaining = ids(Instance)
    assert expected(instances, keep=True) <= remaining
    assert not remaining & expected(instances, keep=False)
    assert not Message.objects.filter(instance_id=instances["delete_idle"].id).exists()


@pytest.mark.db_vendor("postgresql", "mysql")
def test_an_instance_locked_by_someone_else_is_skipped_then_pruned_later():
    instance = retained(last_used_at=ago())
    locked, release = threading.Event(), threading.Event()

    def hold_the_row() -> None:
        try:
            with transaction.atomic():
                list(Instance.objects.select_for_update().filter(id=instance.id))
                locked.set()
                release.wait(30)
        finally:
            connections[connection.alias].close()

    holder = threading.Thread(target=hold_the_row)
    holder.start()
    try:
        assert locked.wait(30)
        assert retention.prune(messages=False, processes=False).instances == 0
        assert Instance.objects.filter(id=instance.id).exists()
    finally:
        release.set()
        holder.join(30)
    assert retention.prune(messages=False, processes=False).instances == 1


@pytest.mark.db_vendor("postgresql", "mysql")  # SQLite: writers are serialised
def test_an_enqueue_revives_a_candidate_before_it_is_deleted(monkeypatch):
    """The recheck under the lock sees work that committed after the candidate scan."""
    from tests.testapp.actors.broadcasts import Retained

    instance = retained(actor_id="revived", last_used_at=ago())
    original = retention._recheck

    def enqueue_elsewhere() -> None:
        try:
            Retained.ref("revived").enqueue().touch()
        finally:
            connections[connection.alias].close()

    def enqueue_between_scan_and_recheck(*args: Any, **kwargs: Any) -> Any:
        other = threading.Thread(target=enqueue_elsewhere)
        other.start()
        other.join(30)
        return original(*args, **kwargs)

    monkeypatch.setattr(retention, "_recheck", enqueue_between_scan_and_recheck)
    assert retention.prune(messages=False, processes=False).instances == 0
    assert Instance.objects.filter(id=instance.id).exists()


def test_the_command_previews_unless_told_to_execute(messages, stopped_processes, capsys):
    before = (ids(Message), ids(Process))
    call_command("prune_solid_objects")
    out = capsys.readouterr().out
    assert "messages: 2 would be deleted" in out
    assert "processes: 1 would be deleted" in out
    assert "instances: 0 would be deleted" in out
    assert "preview only" in out
    assert (ids(Message), ids(Process)) == before

    call_command("prune_solid_objects", "--messages", "--execute")
    out = capsys.readouterr().out
    assert "messages: 2 deleted" in out
    assert "processes" not in out
    assert len(ids(Process)) == len(before[1])  # not selected: untouched
    call_command("prune_solid_objects", "--processes", "--execute")
    assert "processes: 1 deleted" in capsys.readouterr().out
