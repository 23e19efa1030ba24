"""The partition test's checks can fail: the rows of a clean run pass them, and each way a
partition could break a promise (a turn applied twice or lost, a held turn committed by the
cut-off host, a generation that did not move on, a doubled or undelivered effect, a wrong
revision, a row left behind) is reported. Part of the normal run, on every database: it
drives the partition actor in this process, which stands for host B."""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from django.db import connection

from solid_objects.models import Effect, Instance, ReadyMessage
from solid_objects.testing import drain
from tests.testapp.actors.partition import PartitionLedger

from .harness import Partition, violations

pytestmark = pytest.mark.django_db(transaction=True)

HELD = "partition-held-0"
FREE = "partition-free-0"
#: A pid no process of the test has: host A's, whose turns must not commit.
A_PID = -1


@dataclass
class Recorded:
    """What :func:`violations` reads of a run, on the suite's own database."""

    sink: Path
    sent: dict[str, list[int]]
    held: list[str] = field(default_factory=lambda: [HELD])
    generations_at_cut: dict[str, int] = field(default_factory=lambda: {HELD: 0})
    workers: dict[str, Any] = field(
        default_factory=lambda: {
            "hostA": SimpleNamespace(pid=A_PID),
            "hostB": SimpleNamespace(pid=os.getpid()),
        }
    )

    def query(self, sql: str, params: list[Any] | None = None) -> list[tuple[Any, ...]]:
        with connection.cursor() as cursor:
            cursor.execute(sql, params or [])
            return list(cursor.fetchall())

    generations = Partition.generations


@pytest.fixture
def recorded(tmp_path: Path) -> Recorded:
    run = Recorded(tmp_path / "deliveries.jsonl", {HELD: [1, 2, 3], FREE: [1, 2]})
    for actor, numbers in run.sent.items():
        for n in numbers:
            calls = PartitionLedger.ref(actor).enqueue(idempotency_key=f"{actor}:{n}")
            calls.apply(n, str(run.sink))
    drain()
    return run


def test_a_clean_run_passes(recorded: Recorded):
    assert violations(recorded) == []


def _set_seen(actor: str, change: Callable[[list[list[int]]], list[list[int]]]) -> None:
    instance = Instance.objects.get(actor_id=actor)
    Instance.objects.filter(id=instance.id).update(state={"seen": change(instance.state["seen"])})


def applied_twice(run: Recorded) -> None:
    _set_seen(HELD, lambda seen: [seen[0], *seen])


def lost(run: Recorded) -> None:
    _set_seen(FREE, lambda seen: seen[:-1])


def committed_by_a(run: Recorded) -> None:
    _set_seen(HELD, lambda seen: [[seen[0][0], A_PID], *seen[1:]])


def generation_stood_still(run: Recorded) -> None:
    run.generations_at_cut = {HELD: Instance.objects.get(actor_id=HELD).activation_generation}


def wrong_revision(run: Recorded) -> None:
    Instance.objects.filter(actor_id=FREE).update(state_revision=1)


def doubled_effect(run: Recorded) -> None:
    effect = Effect.objects.first()
    assert effect is not None
    effect.pk = None
    effect.effect_id = str(uuid.uuid4())
    effect.save()


def undelivered(run: Recorded) -> None:
    run.sink.write_text("")


def ready_row_left(run: Recorded) -> None:
    instance = Instance.objects.get(actor_id=FREE)
    message = instance.messages.order_by("-sequence").first()
    assert message is not None
    ReadyMessage.objects.create(
        instance=instance,
        message=message,
        sequence=message.sequence,
        available_at=message.available_at,
    )


CASES: list[tuple[Callable[[Recorded], None], str]] = [
    (applied_twice, f"{HELD}: seen [1, 1, 2, 3]"),
    (lost, f"{FREE}: seen [1]"),
    (committed_by_a, "the held turn committed as"),
    (generation_stood_still, "did not move on"),
    (wrong_revision, f"{FREE}: state_revision 1"),
    (doubled_effect, "more than one effect row"),
    (undelivered, "was never delivered"),
    (ready_row_left, "rows left in ready_messages"),
]


@pytest.mark.parametrize(("tamper", "expected"), CASES, ids=[case[0].__name__ for case in CASES])
def test_each_broken_promise_is_reported(
    recorded: Recorded, tamper: Callable[[Recorded], None], expected: str
):
    tamper(recorded)
    found = violations(recorded)
    assert any(expected in line for line in found), found
