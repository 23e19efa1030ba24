"""The soak's invariant checks can fail: a clean run passes them, and each way a run could
break a promise (a message applied twice, one lost, a swap, a kept rejection, a wrong
revision or result, a left-over row, a stray dead letter, a lease of a stopped process...)
is reported by name. Part of the normal run: it drives the soak actor in this process."""

from __future__ import annotations

import random
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from solid_objects.models import ClaimedMessage, DeadLetter, Instance, Message, ReadyMessage
from solid_objects.runtime import processes
from tests.factories import DeadLetterFactory, ProcessFactory
from tests.runtime.helpers import alias, drain
from tests.testapp.actors.soak import SoakCounter

from .invariants import violations
from .ledger import APPLY, FAIL, REJECT, Ledger, Sent

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def ledger() -> Ledger:
    """Sixteen messages (numbers 90-105: one rejection, one failure) to three soak actors,
    processed in this process by a worker that then stops gracefully."""
    sent = Ledger(3, random.Random(3), first_n=90)
    sent.every_actor_once()
    sent.random_messages(13)
    owner = processes.register("worker", alias())
    for actor_id in sent.actor_ids:
        drain(Instance.objects.get(actor_id=actor_id).id, owner)
    processes.deregister(owner, alias())
    assert {REJECT, FAIL} <= {item.kind for item in sent.all()}
    return sent


def busiest(ledger: Ledger) -> tuple[Instance, list[Sent]]:
    """The actor with the most applied messages, and those messages."""
    actor_id = max(ledger.actor_ids, key=lambda a: sum(s.kind == APPLY for s in ledger.by_actor[a]))
    applied = [s for s in ledger.by_actor[actor_id] if s.kind == APPLY]
    assert len(applied) >= 2
    return Instance.objects.get(actor_id=actor_id), applied


def set_seen(instance: Instance, seen: list[int]) -> None:
    Instance.objects.filter(id=instance.id).update(state={"seen": seen})


def applied_twice(ledger: Ledger) -> None:
    instance, applied = busiest(ledger)
    numbers = [s.n for s in applied]
    set_seen(instance, [numbers[0], *numbers])


def lost(ledger: Ledger) -> None:
    instance, applied = busiest(ledger)
    set_seen(instance, [s.n for s in applied][:-1])


def swapped(ledger: Ledger) -> None:
    instance, applied = busiest(ledger)
    numbers = [s.n for s in applied]
    numbers[0], numbers[1] = numbers[1], numbers[0]
    set_seen(instance, numbers)


def rejection_kept(ledger: Ledger) -> None:
    refused = ledger.of_kind(REJECT)[0]
    instance = Instance.objects.get(actor_id=refused.actor_id)
    set_seen(instance, [*instance.state["seen"], refused.n])


def wrong_revision(ledger: Ledger) -> None:
    instance, _ = busiest(ledger)
    Instance.objects.filter(id=instance.id).update(state_revision=instance.state_revision + 1)


def wrong_result(ledger: Ledger) -> None:
    _, applied = busiest(ledger)
    Message.objects.filter(id=applied[-1].message_id).update(result=1)


def never_completed(ledger: Ledger) -> None:
    _, applied = busiest(ledger)
    Message.objects.filter(id=applied[0].message_id).update(completed_at=None)


def ready_row_left(ledger: Ledger) -> None:
    _, applied = busiest(ledger)
    message = Message.objects.get(id=applied[-1].message_id)
    ReadyMessage.objects.create(
        message=message,
        instance_id=message.instance_id,
        sequence=message.sequence,
        available_at=timezone.now(),
    )


def claimed_row_left(ledger: Ledger) -> None:
    _, applied = busiest(ledger)
    message = Message.objects.get(id=applied[-1].message_id)
    ClaimedMessage.objects.create(
        message=message,
        instance_id=message.instance_id,
        process=ProcessFactory(shutdown_state="stopped"),
        activation_token="token",
        activation_generation=1,
        claimed_at=timezone.now(),
    )


def stray_dead_letter(ledger: Ledger) -> None:
    _, applied = busiest(ledger)
    DeadLetterFactory(
        message=Message.objects.get(id=applied[-1].message_id),
        exception_class="solid_objects.errors.LostActivation",
    )


def dead_letter_missing(ledger: Ledger) -> None:
    DeadLetter.objects.filter(message_id=ledger.of_kind(FAIL)[0].message_id).delete()


def leased_by_a_stopped_process(ledger: Ledger) -> None:
    instance, _ = busiest(ledger)
    Instance.objects.filter(id=instance.id).update(
        activation_owner=ProcessFactory(shutdown_state="stopped"),
        activation_token="token",
        activation_expires_at=timezone.now() + timedelta(seconds=30),
    )


def worker_left_running(ledger: Ledger) -> None:
    ProcessFactory(kind="worker")


def message_not_enqueued_by_the_soak(ledger: Ledger) -> None:
    SoakCounter.ref(ledger.actor_ids[0]).enqueue().apply(1)


BROKEN: dict[str, tuple[Callable[[Ledger], Any], str]] = {
    "applied twice": (applied_twice, "applied more than once: n="),
    "lost": (lost, "never applied: n="),
    "swapped": (swapped, "first difference at position 1"),
    "rejection kept": (rejection_kept, "applied but must not be: n="),
    "revision": (wrong_revision, "state_revision: "),
    "result": (wrong_result, "expected its position"),
    "completed_at": (never_completed, "applied message has no completed_at"),
    "ready row": (ready_row_left, "1 ready row(s) left"),
    "claimed row": (claimed_row_left, "1 claimed row(s) left"),
    "stray dead letter": (stray_dead_letter, "LostActivation) but should not be"),
    "missing dead letter": (dead_letter_missing, ") has none"),
    "lease": (leased_by_a_stopped_process, "which is not running"),
    "worker row": (worker_left_running, "although every worker is gone"),
    "unexpected message": (message_not_enqueued_by_the_soak, "was never enqueued by the soak"),
}


def test_a_clean_run_keeps_every_invariant(ledger: Ledger) -> None:
    assert violations(ledger) == []
    seen = {
        actor_id: Instance.objects.get(actor_id=actor_id).state["seen"]
        for actor_id in ledger.actor_ids
    }
    assert sum(map(len, seen.values())) == len(ledger.of_kind(APPLY))


@pytest.mark.parametrize("name", BROKEN)
def test_each_broken_promise_is_reported(ledger: Ledger, name: str) -> None:
    breaks, expected = BROKEN[name]
    breaks(ledger)

    found = violations(ledger)

    assert any(expected in line for line in found), found


SHARDS = ["default", "shard_b"]


@pytest.mark.django_db(transaction=True, databases=SHARDS)
def test_with_shards_each_shard_is_checked_for_its_own_actors(solid_settings: Any) -> None:
    """Ids are numbered per database: the checks read each shard for the actors it holds,
    name the shard in each line, and report an actor found on a shard not its own."""
    from solid_objects.shards import database_for
    from solid_objects.testing import drain as drain_every_shard

    solid_settings(DATABASES=SHARDS)
    sent = Ledger(12, random.Random(5), first_n=90)
    sent.every_actor_once()
    sent.random_messages(30)
    drain_every_shard()
    homes = {database_for(SoakCounter.actor_type, actor_id) for actor_id in sent.actor_ids}
    assert homes == set(SHARDS)
    assert violations(sent) == []

    on_b = next(a for a in sent.actor_ids if database_for(SoakCounter.actor_type, a) == "shard_b")
    Instance.objects.using("shard_b").filter(actor_id=on_b).update(state={"seen": []})
    found = violations(sent)
    assert any(
        line.startswith("applied exactly once, in order: [shard_b] " + on_b) for line in found
    )
    assert not any("[default]" in line for line in found), found

    Instance.objects.using("default").create(
        actor_type=SoakCounter.actor_type, actor_id=on_b, state={}, created_at=timezone.now()
    )
    assert any(f"{on_b} has an instance row on 'default'" in line for line in violations(sent))
