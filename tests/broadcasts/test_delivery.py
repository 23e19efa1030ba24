"""The broadcast worker: Channels groups, order per actor, retries, dead rows, signals."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.db import connection, connections
from django.test import override_settings

from solid_objects import signals
from solid_objects.channels_groups import group_name
from solid_objects.models import Broadcast, Process
from solid_objects.outbox.broadcasts import MESSAGE_TYPE, BroadcastRole, deliver_due
from solid_objects.runtime import processes
from solid_objects.runtime.supervisor import Supervisor
from tests.operations.support import running
from tests.support.waiting import wait_until
from tests.testapp.actors.broadcasts import Board

pytestmark = pytest.mark.django_db(transaction=True)

IN_MEMORY = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}
NO_DELAY = "tests.broadcasts.test_delivery.no_delay"
LONG_DELAY = "tests.broadcasts.test_delivery.long_delay"


def no_delay(attempt: int) -> float:
    return 0.0


def long_delay(attempt: int) -> float:
    return 3600.0


@pytest.fixture
def layer() -> Iterator[Any]:
    with override_settings(CHANNEL_LAYERS=IN_MEMORY):
        yield get_channel_layer()


@pytest.fixture
def owner() -> str:
    return processes.register("broadcast", connection.alias)


def subscribe(layer: Any, actor_type: str, actor_id: str) -> str:
    channel = async_to_sync(layer.new_channel)()
    async_to_sync(layer.group_add)(group_name(actor_type, actor_id), channel)
    return channel


def received(layer: Any, channel: str, count: int) -> list[dict[str, Any]]:
    async def take() -> list[dict[str, Any]]:
        return [await asyncio.wait_for(layer.receive(channel), 5) for _ in range(count)]

    return async_to_sync(take)()


def deliver_all(owner: str, layer: Any = None, rounds: int = 20) -> int:
    total = 0
    for _ in range(rounds):
        outcomes = deliver_due(connection.alias, owner, layer=layer)
        if not outcomes:
            return total
        total += len(outcomes)
    return total


# -- delivery -----------------------------------------------------------------------------------
def test_the_worker_delivers_to_the_actor_group_in_revision_order(layer, owner):
    first, second = Board.ref("first"), Board.ref("second")
    channel_1 = subscribe(layer, "tests.board", "first")
    channel_2 = subscribe(layer, "tests.board", "second")
    for n in range(4):
        first.add(f"a{n}")
        second.add_and_retitle(f"b{n}", f"title {n}")
    assert deliver_all(owner, layer) == 4 + 8

    to_first = received(layer, channel_1, 4)
    assert [m["value"] for m in to_first] == [1, 2, 3, 4]
    assert [m["state_revision"] for m in to_first] == [1, 2, 3, 4]
    message = to_first[0]
    assert message["type"] == MESSAGE_TYPE
    assert message["actor_type"] == "tests.board"
    assert message["actor_id"] == "first"
    assert message["observable"] == "size"
    assert message["instance_id"] > 0
    assert set(message) == {
        "type",
        "actor_type",
        "actor_id",
        "observable",
        "value",
        "instance_id",
        "state_revision",
        "broadcast_id",
    }

    to_second = received(layer, channel_2, 8)
    revisions = [(m["state_revision"], m["observable"]) for m in to_second]
    assert revisions == sorted(revisions, key=lambda pair: pair[0])
    assert {m["observable"] for m in to_second} == {"size", "title"}
    assert all(m["value"] == {} for m in to_second if m["observable"] == "title")
    assert Broadcast.objects.exclude(status="delivered").count() == 0
    delivered = Broadcast.objects.filter(status="delivered")
    assert all(b.delivered_at is not None and b.claimed_by_id is None for b in delivered)


def test_an_empty_poll_is_one_statement(layer, owner):
    from tests.support.statements import capturing_statements

    with capturing_statements() as queries:
        assert deliver_due(connection.alias, owner, layer=layer) == []
    assert len(queries.captured_queries) == 1


class FlakyLayer:
    """Wraps the in-memory layer; ``group_send`` to ``failing`` groups raises."""

    def __init__(self, inner: Any, failing: set[str]) -> None:
        self.inner = inner
        self.failing = failing
        self.sent: list[dict[str, Any]] = []

    async def group_send(self, group: str, message: dict[str, Any]) -> None:
        if group in self.failing:
            raise ConnectionError("layer unavailable")
        self.sent.append(message)
        await self.inner.group_send(group, message)


def test_a_failed_delivery_retries_later_and_holds_the_actors_later_rows(
    layer, owner, solid_settings
):
    solid_settings(RETRY_DELAY=LONG_DELAY)
    broken, fine = Board.ref("broken"), Board.ref("fine")
    for n in range(3):
        broken.add(f"x{n}")
    fine.add("y")
    flaky = FlakyLayer(layer, {group_name("tests.board", "broken")})
    failures: list[dict[str, Any]] = []

    def on_failed(sender: Any, signal: Any = None, **payload: Any) -> None:
        failures.append(payload)

    signals.broadcast_failed.connect(on_failed)
    try:
        outcomes = deliver_due(connection.alias, owner, layer=flaky)
    finally:
        signals.broadcast_failed.disconnect(on_failed)
    assert len(outcomes) == 4
    assert [m["actor_id"] for m in flaky.sent] == ["fine"]
    rows = list(Broadcast.objects.filter(instance__actor_id="broken").order_by("id"))
    head, *later = rows
    assert head.status == "pending" and head.attempt_count == 1
    assert head.error["class"] == "builtins.ConnectionError"
    assert all(r.status == "pending" and r.attempt_count == 0 for r in later)
    # The later rows wait for the head's retry: none is due before it.
    assert all(r.available_at == head.available_at for r in later)
    assert deliver_due(connection.alias, owner, layer=flaky) == []
    assert len(failures) == 1
    assert failures[0]["actor_id"] == "broken" and failures[0]["attempt"] == 1
    assert failures[0]["dead"] is False
    assert "value" not in failures[0]


def test_after_max_attempts_a_row_is_dead_and_the_actor_moves_on(layer, owner, solid_settings):
    solid_settings(RETRY_DELAY=NO_DELAY, MAX_ATTEMPTS=2)
    board = Board.ref("doomed")
    board.add("a")
    board.add("b")
    group = group_name("tests.board", "doomed")
    flaky = FlakyLayer(layer, {group})
    deliver_due(connection.alias, owner, layer=flaky)  # attempt 1 fails
    deliver_due(connection.alias, owner, layer=flaky)  # attempt 2 fails: dead
    head, second = Broadcast.objects.order_by("id")
    head.refresh_from_db()
    assert head.status == "dead" and head.attempt_count == 2
    assert second.status == "pending"
    flaky.failing.clear()
    assert len(deliver_due(connection.alias, owner, layer=flaky)) == 1
    second.refresh_from_db()
    assert second.status == "delivered"
    assert [m["value"] for m in flaky.sent] == [2]


def test_rows_stuck_behind_a_retry_do_not_starve_other_actors(layer, owner, solid_settings):
    solid_settings(RETRY_DELAY=LONG_DELAY)
    busy, other = Board.ref("busy"), Board.ref("other")
    for n in range(5):
        busy.add(f"x{n}")
    other.add("y")
    flaky = FlakyLayer(layer, {group_name("tests.board", "busy")})
    deliver_due(connection.alias, owner, layer=flaky, limit=3)  # busy 1 fails, 2-3 held back
    # busy 4-5 are the oldest due rows; they are pushed behind busy 1 and "other" goes out.
    outcomes = deliver_due(connection.alias, owner, layer=flaky, limit=3)
    assert [o.row.actor_id for o in outcomes] == ["other"]
    assert Broadcast.objects.filter(instance__actor_id="busy", status="pending").count() == 5


def test_delivered_signal_carries_identities_not_values(layer, owner):
    board = Board.ref("signalled")
    board.add("secret-item")
    payloads: list[dict[str, Any]] = []

    def on_delivered(sender: Any, signal: Any = None, **payload: Any) -> None:
        payloads.append(payload)

    signals.broadcast_delivered.connect(on_delivered)
    try:
        deliver_all(owner, layer)
    finally:
        signals.broadcast_delivered.disconnect(on_delivered)
    (payload,) = payloads
    assert payload["actor_id"] == "signalled"
    assert payload["observable"] == "size"
    assert payload["state_revision"] == 1
    assert payload["attempt"] == 1
    assert "value" not in payload and "secret-item" not in repr(payload)


def test_concurrent_workers_keep_each_actors_order(layer, solid_settings):
    """Two workers claim at once (with slow sends): every row is delivered once and each
    actor's rows arrive in revision order."""
    actors = [Board.ref(f"race-{n}") for n in range(3)]
    for round_ in range(6):
        for actor in actors:
            actor.add(f"item-{round_}")
    sent: list[dict[str, Any]] = []
    lock = threading.Lock()

    class SlowLayer:
        async def group_send(self, group: str, message: dict[str, Any]) -> None:
            await asyncio.sleep(0.002)
            with lock:
                sent.append(message)

    owners = [processes.register("broadcast", connection.alias) for _ in range(2)]
    errors: list[BaseException] = []

    def work(owner: str) -> None:
        try:
            for _ in range(200):
                if Broadcast.objects.exclude(status="delivered").count() == 0:
                    return
                deliver_due(connection.alias, owner, layer=SlowLayer(), limit=4)
        except BaseException as exc:
            errors.append(exc)
        finally:
            connections[connection.alias].close()

    threads = [threading.Thread(target=work, args=(o,)) for o in owners]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert not errors, errors
    assert len(sent) == 18
    assert len({m["broadcast_id"] for m in sent}) == 18
    for actor in actors:
        values = [m["value"] for m in sent if m["actor_id"] == actor.actor_id]
        assert values == [1, 2, 3, 4, 5, 6]


def test_dead_process_cleanup_hands_claimed_broadcasts_back(layer, owner):
    from solid_objects.db.vendors import dialect_for
    from solid_objects.outbox.broadcasts import claim

    Board.ref("orphan").add("x")
    with connection.cursor() as cursor:
        rows = claim(cursor, dialect_for(connection), owner, 10)
    assert len(rows) == 1
    assert Broadcast.objects.get().status == "processing"
    Process.objects.filter(id=owner).update(last_heartbeat_at="2000-01-01T00:00:00Z")
    assert processes.cleanup_dead(connection.alias) == [owner]
    row = Broadcast.objects.get()
    assert row.status == "pending" and row.claimed_by_id is None
    survivor = processes.register("broadcast", connection.alias)
    assert len(deliver_due(connection.alias, survivor, layer=layer)) == 1


def test_the_broadcast_role_delivers_under_a_supervisor(layer):
    channel = subscribe(layer, "tests.board", "live")
    supervisor = Supervisor(roles=[(BroadcastRole, 1)], install_signal_handlers=False)
    with running(supervisor) as runner:
        Board.ref("live").add("x")
        wait_until(lambda: Broadcast.objects.filter(status="delivered").exists(), what="a delivery")
        assert runner.supervisor.process_ids.keys() == {"broadcast"}
    (message,) = received(layer, channel, 1)
    assert message["value"] == 1
    assert Process.objects.get(kind="broadcast").shutdown_state == "stopped"


def test_without_a_channel_layer_rows_stay_pending(owner):
    from solid_objects.outbox.broadcasts import NoChannelLayer

    Board.ref("nolayer").add("x")
    with override_settings(CHANNEL_LAYERS={}):
        with pytest.raises(NoChannelLayer):
            deliver_due(connection.alias, owner)
        role = BroadcastRole(Supervisor(roles=[], install_signal_handlers=False))
        assert role.run_once() is False
    assert Broadcast.objects.get().status == "pending"


@pytest.mark.slow
def test_run_broadcast_worker_registers_a_broadcast_process_and_stops_on_sigterm(commands):
    worker = commands.start("run_broadcast_worker")
    (row,) = commands.wait_registered(worker, {"broadcast"})
    assert row.kind == "broadcast"
    assert commands.terminate(worker) == 0, commands.log(worker)
    row.refresh_from_db()
    assert row.shutdown_state == "stopped"
