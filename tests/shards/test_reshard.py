"""``manage.py solid_objects_reshard`` and the start-up refusal (PRODUCT §A18).

Actors are created while ``SOLID_OBJECTS["DATABASES"]`` is ``["default"]``; the list then
becomes ``["default", "shard_b"]`` and the identities ``shard_b`` now wins must move there
with their state, mailbox, reminders, effects and dead letters, and run there exactly once.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from django.core.management import CommandError, call_command
from django.db import connections
from django.utils import timezone

from solid_objects import resharding, shard_agreement
from solid_objects.errors import InvalidReshard, ReshardRequired
from solid_objects.models import (
    DeadLetter,
    Effect,
    Instance,
    Message,
    ReadyMessage,
    Reminder,
    ShardAgreement,
)
from solid_objects.shards import choose
from solid_objects.testing import drain
from tests.factories import ProcessFactory
from tests.support.terminal import RED, run_on_terminal, screen
from tests.support.waiting import wait_until
from tests.testapp.actors.core import Counter
from tests.testapp.actors.outbox import Alarm, Payer

SHARDS = ["default", "shard_b"]
pytestmark = pytest.mark.django_db(transaction=True, databases=SHARDS)


def ids_moving_to(alias: str, count: int, actor_type: str) -> list[str]:
    """The first ``count`` ids ``<type>-0, <type>-1, ...`` that ``alias`` wins among
    :data:`SHARDS` (every type has its own ids, so an id names one actor)."""
    prefix = actor_type.rsplit(".", 1)[-1]
    candidates = [f"{prefix}-{n}" for n in range(400)]
    found = [actor_id for actor_id in candidates if choose(SHARDS, actor_type, actor_id) == alias]
    assert len(found) >= count
    return found[:count]


@dataclass
class Population:
    """What :func:`populate` put on ``default`` while it was the only shard."""

    moving: list[str]  # counters whose home becomes shard_b
    staying: list[str]  # counters that stay on default
    payer: str
    alarm: str
    failing: str  # a counter with a dead letter
    sink: Path
    pending: dict[str, int]  # counter -> the value its pending messages will add


def populate(solid_settings: Callable[..., Any], tmp_path: Path, movers: int = 4) -> Population:
    solid_settings(DATABASES=["default"])
    moving = ids_moving_to("shard_b", movers, "tests.counter")
    staying = ids_moving_to("default", 2, "tests.counter")
    payer = ids_moving_to("shard_b", 1, "tests.payer")[0]
    alarm = ids_moving_to("shard_b", 1, "tests.alarm")[0]
    failing = ids_moving_to("shard_b", movers + 1, "tests.counter")[-1]
    sink = tmp_path / "sink.jsonl"
    for actor_id in moving + staying:
        Counter.ref(actor_id).enqueue().add(amount=10)
    Counter.ref(failing).enqueue().boom(retryable=False)
    Payer.ref(payer).enqueue().pay(effect="tests.outbox.sink", arguments={"sink": str(sink)})
    Alarm.ref(alarm).enqueue().set_alarm(delay=3600, label="later")
    drain(roles=["actors"])  # state committed; the effect and the reminder stay pending
    pending: dict[str, int] = {}
    for n, actor_id in enumerate(moving + staying):
        for amount in (1, 2 + n):
            Counter.ref(actor_id).enqueue(idempotency_key=f"k{amount}").add(amount=amount)
        pending[actor_id] = 3 + n
    assert set(Instance.objects.using("shard_b").values_list("actor_id", flat=True)) == set()
    return Population(moving, staying, payer, alarm, failing, sink, pending)


def on(alias: str, actor_id: str) -> bool:
    return Instance.objects.using(alias).filter(actor_id=actor_id).exists()


def sink_lines(sink: Path) -> list[dict[str, Any]]:
    if not sink.exists():
        return []
    return [json.loads(line) for line in sink.read_text().splitlines()]


def assert_moved_and_run_once(population: Population) -> None:
    """Every mover is only on shard_b, nothing else moved, and each pending message, the
    effect and the reminder run exactly once there."""
    movers = [*population.moving, population.payer, population.alarm, population.failing]
    for actor_id in movers:
        assert on("shard_b", actor_id) and not on("default", actor_id), actor_id
    for actor_id in population.staying:
        assert on("default", actor_id) and not on("shard_b", actor_id)
    assert not Message.objects.using("default").filter(actor_id__in=movers).exists()
    letter = DeadLetter.objects.using("shard_b").get(actor_id=population.failing)
    assert letter.message.operation == "boom"
    assert letter.message.instance.actor_id == population.failing
    effect = Effect.objects.using("shard_b").get(instance__actor_id=population.payer)
    assert effect.status == Effect.Status.PENDING
    assert Reminder.objects.using("shard_b").filter(actor_id=population.alarm).count() == 1
    drain(at=timezone.now() + timedelta(hours=2))
    for actor_id in population.moving + population.staying:
        assert Counter.ref(actor_id).snapshot().state["value"] == 10 + population.pending[actor_id]
    assert [line["effect_id"] for line in sink_lines(population.sink)] == [effect.effect_id]
    assert [ring["label"] for ring in Alarm.ref(population.alarm).rang()] == ["later"]
    # A dead letter that moved still retries (its message id was mapped).
    letter.retry()
    assert DeadLetter.objects.using("shard_b").get(pk=letter.pk).retried_message is not None


def test_preview_counts_what_moves_and_writes_nothing(solid_settings, tmp_path):
    population = populate(solid_settings, tmp_path)
    solid_settings(DATABASES=SHARDS)
    counts = resharding.preview()
    assert list(counts) == [("default", "shard_b")]
    route = counts["default", "shard_b"]
    movers = len(population.moving) + 3
    assert route.actors == movers
    # Each moving counter: its first add and two pending adds; the payer, the alarm and the
    # failing counter one message each.
    assert route.messages == 3 * len(population.moving) + 3
    assert route.pending == 2 * len(population.moving)
    assert (route.reminders, route.effects, route.dead_letters) == (1, 1, 1)
    out = StringIO()
    call_command("solid_objects_reshard", stdout=out)
    assert f"default -> shard_b: {movers} actors (" in out.getvalue()
    assert "--execute" in out.getvalue()
    assert not Instance.objects.using("shard_b").exists()
    assert not ShardAgreement.objects.using("shard_b").exists()


def test_execute_moves_every_actor_with_its_rows_and_they_run_there_once(solid_settings, tmp_path):
    population = populate(solid_settings, tmp_path)
    effect_id = Effect.objects.get().effect_id
    request_ids = set(
        Message.objects.filter(actor_id__in=population.moving).values_list("request_id", flat=True)
    )
    solid_settings(DATABASES=SHARDS)
    out = StringIO()
    call_command("solid_objects_reshard", "--execute", stdout=out)
    assert f"default -> shard_b: {len(population.moving) + 3} actors moved" in out.getvalue()
    moved = Message.objects.using("shard_b").filter(actor_id__in=population.moving)
    assert set(moved.values_list("request_id", flat=True)) == request_ids
    assert Effect.objects.using("shard_b").get().effect_id == effect_id
    for actor_id in population.moving:  # ready rows follow their (re-numbered) messages
        ready = ReadyMessage.objects.using("shard_b").filter(instance__actor_id=actor_id)
        assert sorted(ready.values_list("sequence", flat=True)) == [2, 3]
        assert all(row.message.sequence == row.sequence for row in ready)
    assert resharding.preview() == {}
    shard_agreement.require_agreement()  # the workers' check passes now
    assert_moved_and_run_once(population)


def test_a_second_execute_moves_nothing(solid_settings, tmp_path):
    populate(solid_settings, tmp_path, movers=1)
    solid_settings(DATABASES=SHARDS)
    first = resharding.execute()
    assert first.complete and first.moved == {("default", "shard_b"): 4}
    counts = {alias: Message.objects.using(alias).count() for alias in SHARDS}
    second = resharding.execute()
    assert second.complete and second.moved == {}
    assert {alias: Message.objects.using(alias).count() for alias in SHARDS} == counts


class Crash(Exception):
    """Stands for the process dying at a pause point (its transactions roll back)."""


@pytest.mark.parametrize("point", ["reshard.before_copy", "reshard.copied", "reshard.deleted"])
def test_a_reshard_that_crashed_at_any_point_is_finished_by_the_next_one(
    solid_settings, tmp_path, point
):
    population = populate(solid_settings, tmp_path)
    solid_settings(DATABASES=SHARDS)
    reached: list[str] = []

    def crash_on_the_second_actor(name: str) -> None:
        reached.append(name)
        if len(reached) == 2:
            raise Crash(name)

    from solid_objects import pause_points

    pause_points.install(point, crash_on_the_second_actor)
    try:
        with pytest.raises(Crash):
            resharding.execute()
    finally:
        pause_points.uninstall(point)
    assert resharding.preview()["default", "shard_b"].actors > 0  # not finished
    result = resharding.execute()
    assert result.complete
    assert_moved_and_run_once(population)


def test_a_target_incarnation_created_after_the_switch_is_merged(solid_settings, tmp_path):
    """An enqueue routed to the new home before the move: the old state and messages come
    first, the new message runs after them, each once."""
    population = populate(solid_settings, tmp_path, movers=1)
    solid_settings(DATABASES=SHARDS)
    actor_id = population.moving[0]
    Counter.ref(actor_id).enqueue(idempotency_key="after").add(amount=100)
    assert on("shard_b", actor_id) and on("default", actor_id)
    assert resharding.execute().complete
    sequences = list(
        Message.objects.using("shard_b")
        .filter(actor_id=actor_id)
        .order_by("sequence")
        .values_list("idempotency_key", "sequence")
    )
    assert sequences == [(None, 1), ("k1", 2), ("k2", 3), ("after", 4)]
    assert_moved_and_run_once(
        Population(**{**population.__dict__, "pending": {**population.pending, actor_id: 103}})
    )


def test_a_leased_actor_is_not_moved_mid_turn(solid_settings, tmp_path):
    population = populate(solid_settings, tmp_path, movers=1)
    solid_settings(DATABASES=SHARDS)
    actor_id = population.moving[0]
    # A live lease, as a worker holds it during a turn (its process fell silent: a running
    # worker would make the command refuse to start at all, see below).
    process = ProcessFactory(last_heartbeat_at=timezone.now() - timedelta(hours=1))
    Instance.objects.filter(actor_id=actor_id).update(
        activation_owner=process,
        activation_token="00000000-0000-0000-0000-000000000001",
        activation_expires_at=timezone.now() + timedelta(hours=1),
    )
    result = resharding.execute(wait=0.2)
    assert not result.complete
    assert [mover.actor_id for mover in result.busy] == [actor_id]
    assert on("default", actor_id) and not on("shard_b", actor_id)
    with pytest.raises(ReshardRequired):
        shard_agreement.require_agreement()
    with pytest.raises(CommandError, match="not moved"):
        call_command("solid_objects_reshard", "--execute", "--wait", "0", stderr=StringIO())
    Instance.objects.filter(actor_id=actor_id).update(
        activation_owner=None, activation_token=None, activation_expires_at=None
    )
    assert resharding.execute().complete
    assert_moved_and_run_once(population)


@pytest.mark.parametrize("alias", SHARDS)
def test_a_running_worker_on_any_shard_refuses_the_reshard(solid_settings, tmp_path, alias):
    populate(solid_settings, tmp_path, movers=1)
    solid_settings(DATABASES=SHARDS)
    ProcessFactory.build(kind="effect", pid=4242).save(using=alias)
    ProcessFactory(kind="caller")  # a web process's sync-call registration does not count
    with pytest.raises(InvalidReshard, match=rf"effect pid 4242 on test-host \({alias}\)"):
        resharding.execute()
    assert not Instance.objects.using("shard_b").exists()
    with pytest.raises(CommandError, match="stop every worker"):
        call_command("solid_objects_reshard", "--execute", stdout=StringIO())
    assert resharding.preview()  # a preview reads only


def test_a_source_incarnation_that_never_ran_is_appended_to_a_target_that_did(
    solid_settings, tmp_path
):
    """A process with the old list enqueued on the old database after the move: the next
    reshard appends that message to the moved actor, whose state is kept."""
    population = populate(solid_settings, tmp_path, movers=1)
    actor_id = population.moving[0]
    solid_settings(DATABASES=SHARDS)
    assert resharding.execute().complete
    solid_settings(DATABASES=["default"])
    Counter.ref(actor_id).enqueue(idempotency_key="late").add(amount=1000)
    solid_settings(DATABASES=SHARDS)
    assert resharding.execute().complete
    keys = list(
        Message.objects.using("shard_b")
        .filter(actor_id=actor_id)
        .order_by("sequence")
        .values_list("idempotency_key", "sequence")
    )
    assert keys == [(None, 1), ("k1", 2), ("k2", 3), ("late", 4)]
    pending = {**population.pending, actor_id: population.pending[actor_id] + 1000}
    assert_moved_and_run_once(Population(**{**population.__dict__, "pending": pending}))


def test_two_incarnations_that_both_ran_are_a_conflict_left_alone(solid_settings, tmp_path):
    solid_settings(DATABASES=SHARDS)
    actor_id = ids_moving_to("shard_b", 1, "tests.counter")[0]
    Counter.ref(actor_id).enqueue().add(amount=5)
    drain()
    solid_settings(DATABASES=["default"])
    Counter.ref(actor_id).enqueue().add(amount=7)
    drain()
    solid_settings(DATABASES=SHARDS)
    result = resharding.execute()
    assert not result.complete and result.moved == {}
    [(mover, reason)] = result.conflicts
    assert mover.actor_id == actor_id and "resolve by hand" in reason
    assert Counter.ref(actor_id).snapshot(using="default").state["value"] == 7
    assert Counter.ref(actor_id).snapshot(using="shard_b").state["value"] == 5
    with pytest.raises(ReshardRequired):
        shard_agreement.require_agreement()
    Counter.ref(actor_id).destroy(using="default")  # resolved: the operator keeps shard_b's
    assert resharding.execute().complete
    shard_agreement.require_agreement()


def test_the_start_up_check_compares_one_row_per_shard(solid_settings, tmp_path):
    populate(solid_settings, tmp_path, movers=1)
    shard_agreement.require_agreement()  # unsharded: agrees at once and records it
    assert ShardAgreement.objects.get().shards == ["default"]
    solid_settings(DATABASES=SHARDS)
    with pytest.raises(ReshardRequired, match=r"'default' last agreed with the shard list"):
        shard_agreement.require_agreement()
    assert resharding.execute().complete
    for alias in SHARDS:
        assert ShardAgreement.objects.using(alias).get().shards == SHARDS
    shard_agreement.require_agreement()
    # Removing shard_b: its actors must come back, and the check names the alias that left.
    solid_settings(DATABASES=["default"])
    with pytest.raises(ReshardRequired, match="--from shard_b"):
        shard_agreement.require_agreement()
    with pytest.raises(InvalidReshard):
        resharding.execute(["nowhere"])
    with pytest.raises(CommandError, match="is a shard"):
        call_command("solid_objects_reshard", "--from", "default")
    counts = resharding.preview(["shard_b"])
    assert list(counts) == [("shard_b", "default")] and counts["shard_b", "default"].actors == 4
    assert resharding.execute(["shard_b"]).complete
    assert not Instance.objects.using("shard_b").exists()
    shard_agreement.require_agreement()


def test_first_deployment_without_a_row(solid_settings, tmp_path):
    """No row yet: empty shards agree at once; actors that would move are refused."""
    solid_settings(DATABASES=SHARDS)
    shard_agreement.require_agreement()
    assert {ShardAgreement.objects.using(alias).get().shards[1] for alias in SHARDS} == {"shard_b"}
    ShardAgreement.objects.all().delete()
    ShardAgreement.objects.using("shard_b").all().delete()
    populate(solid_settings, tmp_path, movers=1)
    solid_settings(DATABASES=SHARDS)
    with pytest.raises(ReshardRequired, match="holds actors whose home is now another shard"):
        shard_agreement.require_agreement()
    assert not ShardAgreement.objects.exists()


WORKER_SETTINGS = {"DATABASES": SHARDS}


def test_workers_refuse_to_start_until_the_reshard_ran(solid_settings, tmp_path, commands):
    population = populate(solid_settings, tmp_path, movers=2)
    for command in (
        "run_actor_worker",
        "run_effect_worker",
        "run_broadcast_worker",
        "run_reminder_scheduler",
    ):
        refused = commands.start(command, settings=WORKER_SETTINGS)
        assert commands.wait_exit(refused) == 1
        assert "refusing to start" in commands.log(refused), command
        assert "solid_objects_reshard --execute" in commands.log(refused)
    assert not Instance.objects.using("shard_b").exists()  # nothing ran on either side
    assert Counter.ref(population.moving[0]).snapshot(using="default").state["value"] == 10
    solid_settings(DATABASES=SHARDS)
    call_command("solid_objects_reshard", "--execute", stdout=StringIO())
    workers = [  # one per shard (--database), whether or not a worker serves every shard
        commands.start(
            "run_actor_worker", "--all-roles", "--database", alias, settings=WORKER_SETTINGS
        )
        for alias in SHARDS
    ]
    commands.wait_registered(workers[0], {"worker"})
    for actor_id in population.moving + population.staying:
        expected = 10 + population.pending[actor_id]
        wait_until(
            lambda actor_id=actor_id, expected=expected: (
                Counter.ref(actor_id).snapshot().state["value"] == expected
            ),
            what=f"{actor_id} to run its moved messages",
            details=commands.logs,
        )
    assert [commands.terminate(worker) for worker in workers] == [0, 0]
    for actor_id in population.moving:
        done = Message.objects.using("shard_b").filter(
            actor_id=actor_id, completed_at__isnull=False
        )
        assert done.count() == 3


@pytest.mark.parametrize("point", ["reshard.before_copy", "reshard.copied", "reshard.deleted"])
def test_a_reshard_process_killed_at_a_pause_point_is_resumed(
    solid_settings, tmp_path, commands, point
):
    population = populate(solid_settings, tmp_path)
    flag = tmp_path / "held"
    commands.extra_environment = {"SOLID_TEST_HOLD_AT": point, "SOLID_TEST_HOLD_FILE": str(flag)}
    killed = commands.start("solid_objects_reshard", "--execute", settings=WORKER_SETTINGS)
    wait_until(
        flag.exists, what=f"the reshard to reach {point}", details=lambda: commands.log(killed)
    )
    commands.kill(killed)
    assert killed.returncode < 0
    for alias in SHARDS:
        connections[alias].close()
    solid_settings(DATABASES=SHARDS)
    first = [actor_id for actor_id in population.moving if on("shard_b", actor_id)]
    if point == "reshard.before_copy":
        assert first == []
    else:  # the first actor's copy committed on shard_b (its source was not deleted)
        assert len(first) == 1 and on("default", first[0])
    commands.extra_environment = {}
    resumed = commands.start("solid_objects_reshard", "--execute", settings=WORKER_SETTINGS)
    assert commands.wait_exit(resumed) == 0, commands.log(resumed)
    assert "Every database agrees" in commands.log(resumed)
    assert_moved_and_run_once(population)


def test_execute_draws_a_progress_bar_per_route_on_a_terminal(solid_settings, tmp_path):
    population = populate(solid_settings, tmp_path)
    movers = len(population.moving) + 3
    code, output = run_on_terminal("solid_objects_reshard", "--execute", settings=WORKER_SETTINGS)
    assert code == 0, output
    assert RED not in output  # drawn on the real stderr, not through the OutputWrapper
    lines = screen(output)
    bars = [line for line in lines if line.startswith("default -> shard_b:") and "actors/" in line]
    assert len(bars) == 1 and "100%" in bars[0] and f"{movers}/{movers}" in bars[0], lines
    assert f"default -> shard_b: {movers} actors moved" in lines


def test_a_shard_without_the_table_is_a_clear_refusal(solid_settings):
    solid_settings(DATABASES=SHARDS)
    with connections["shard_b"].schema_editor() as editor:
        editor.delete_model(ShardAgreement)
    try:
        with pytest.raises(CommandError, match=r"is every shard reachable and migrated"):
            shard_agreement.refuse_to_start()
    finally:
        with connections["shard_b"].schema_editor() as editor:
            editor.create_model(ShardAgreement)
    shard_agreement.refuse_to_start()


def test_work_claimed_by_a_process_of_the_old_database_is_released_on_the_new_one(
    solid_settings, tmp_path
):
    """An effect in flight and a claimed reminder of a worker that is gone: on the new home
    they are claimable again (the effect keeps its id, the providers' idempotency key)."""
    population = populate(solid_settings, tmp_path, movers=1)
    silent = ProcessFactory(kind="effect", last_heartbeat_at=timezone.now() - timedelta(hours=1))
    Effect.objects.update(
        status=Effect.Status.PROCESSING, claimed_by=silent, claimed_at=timezone.now()
    )
    Reminder.objects.update(claimed_by=silent, claimed_at=timezone.now())
    solid_settings(DATABASES=SHARDS)
    assert resharding.execute().complete
    effect = Effect.objects.using("shard_b").get()
    assert (effect.status, effect.claimed_by_id, effect.claimed_at) == ("pending", None, None)
    reminder = Reminder.objects.using("shard_b").get()
    assert (reminder.claimed_by_id, reminder.claimed_at) == (None, None)
    assert_moved_and_run_once(population)
