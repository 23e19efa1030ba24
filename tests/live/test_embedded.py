"""Broadcasts delivered inside the ASGI process (the in-memory layer, no external service),
and workers that no longer hand them to a layer nobody listens to."""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import pytest
from asgiref.sync import async_to_sync, sync_to_async
from channels.layers import get_channel_layer
from channels.routing import URLRouter
from channels.testing import WebsocketCommunicator
from django.core.management import CommandError, call_command
from django.test import override_settings

from solid_objects.live import tokens
from solid_objects.live.embedded import EmbeddedBroadcastRole, EmbeddedBroadcasts
from solid_objects.models import Broadcast, Process
from solid_objects.outbox.broadcasts import BroadcastRole
from solid_objects.routing import websocket_urlpatterns
from solid_objects.runtime.launch import build_supervisor
from tests.factories import UserFactory
from tests.live.policies import ALLOW_ALL, OWNER
from tests.testapp.actors.broadcasts import Board

pytestmark = pytest.mark.django_db(transaction=True)
IN_MEMORY = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}
REDIS = {
    "default": {
        "BACKEND": "channels_redis.core.RedisChannelLayer",
        "CONFIG": {"hosts": ["redis://127.0.0.1:6379/0"]},
    }
}


@pytest.fixture
def in_memory() -> Iterator[Any]:
    with override_settings(CHANNEL_LAYERS=IN_MEMORY):
        yield get_channel_layer()


def test_the_web_process_delivers_to_its_own_sockets(policy, in_memory) -> None:
    policy(OWNER)
    user = UserFactory()
    board = Board.ref(f"board-of-{user.pk}")
    given = tokens.issue(tokens.Subject("tests.board", board.actor_id, "size"), f"u:{user.pk}")
    application = EmbeddedBroadcasts(URLRouter(websocket_urlpatterns))
    # Started by the first connection; the changes arrive in commit order.
    _see_changes(application, user, board, given, 3)
    assert set(Broadcast.objects.values_list("status", flat=True)) == {"delivered"}
    embedded = Process.objects.filter(kind="broadcast")
    assert embedded.count() == 1 and embedded.get().stopped_at is not None


def test_with_a_shared_layer_the_web_process_leaves_delivery_to_workers() -> None:
    with override_settings(CHANNEL_LAYERS=REDIS):
        application = EmbeddedBroadcasts(URLRouter(websocket_urlpatterns))
        assert async_to_sync(sync_to_async(application.start, thread_sensitive=False))() is None
    assert not Process.objects.exists()


def test_enabled_true_delivers_from_the_web_process_with_a_shared_layer(policy) -> None:
    """``EmbeddedBroadcasts(app, enabled=True)``: a site with channels_redis (and workers)
    that wants the web process to deliver anyway."""
    policy(ALLOW_ALL)
    user = UserFactory()
    board = Board.ref(f"shared-{uuid.uuid4().hex}")
    given = tokens.issue(tokens.Subject("tests.board", board.actor_id, "size"), f"u:{user.pk}")
    # A prefix of its own: other runs share this Redis.
    shared = {"default": {**REDIS["default"], "CONFIG": {**REDIS["default"]["CONFIG"]}}}
    shared["default"]["CONFIG"]["prefix"] = f"solid-test-{uuid.uuid4().hex[:12]}"
    with override_settings(CHANNEL_LAYERS=shared):
        application = EmbeddedBroadcasts(URLRouter(websocket_urlpatterns), enabled=True)
        _see_changes(application, user, board, given, 2)  # started although the layer is shared
    assert set(Broadcast.objects.values_list("status", flat=True)) == {"delivered"}
    embedded = Process.objects.get(kind="broadcast")
    assert embedded.stopped_at is not None


def test_enabled_false_leaves_the_in_memory_layer_alone(in_memory) -> None:
    application = EmbeddedBroadcasts(URLRouter(websocket_urlpatterns), enabled=False)
    assert async_to_sync(sync_to_async(application.start, thread_sensitive=False))() is None
    assert application.delivery is None and not Process.objects.exists()


def test_workers_leave_broadcasts_to_the_web_process_with_the_in_memory_layer(in_memory) -> None:
    roles = [
        factory
        for slot in build_supervisor(all_roles=True, broadcasts=False)._slots
        for factory in [slot.factory]
    ]
    assert BroadcastRole not in roles and EmbeddedBroadcastRole not in roles
    assert BroadcastRole in [slot.factory for slot in build_supervisor(all_roles=True)._slots]
    with pytest.raises(CommandError, match="reaches only this process"):
        call_command("run_broadcast_worker")


@pytest.mark.django_db(transaction=True, databases=["default", "shard_b"])
def test_with_shards_the_web_process_delivers_every_shard_s_broadcasts(
    policy, in_memory, solid_settings
) -> None:
    from solid_objects import database_for
    from solid_objects.runtime.shard_group import SupervisorGroup

    policy(ALLOW_ALL)
    solid_settings(DATABASES=["default", "shard_b"])
    user = UserFactory()
    boards = {}
    for n in range(200):
        boards.setdefault(
            database_for("tests.board", f"board-{user.pk}-{n}"), f"board-{user.pk}-{n}"
        )
    application = EmbeddedBroadcasts(URLRouter(websocket_urlpatterns))

    async def test() -> None:
        ws = await _connect(application, user)
        assert isinstance(application.delivery.supervisor, SupervisorGroup)
        for ref, alias in enumerate(("default", "shard_b"), start=1):
            subject = tokens.Subject("tests.board", boards[alias], "size")
            given = tokens.issue(subject, f"u:{user.pk}")
            await ws.send_json_to({"action": "subscribe", "ref": ref, "token": given})
            assert (await ws.receive_json_from(timeout=5))["type"] == "subscribed"
        for alias in ("shard_b", "default"):
            await sync_to_async(Board.ref(boards[alias]).add)(f"on-{alias}")
        seen = [await ws.receive_json_from(timeout=30) for _ in range(2)]
        assert sorted(message["value"] for message in seen) == [1, 1]
        await ws.disconnect()

    _run(application, test)
    for alias in ("default", "shard_b"):
        rows = Broadcast.objects.using(alias)
        assert set(rows.values_list("status", flat=True)) == {"delivered"}
        process = Process.objects.using(alias).get(kind="broadcast")
        assert process.stopped_at is not None


def _see_changes(
    application: EmbeddedBroadcasts, user: Any, board: Any, given: str, changes: int
) -> None:
    """Subscribe one socket with ``given``, make ``changes`` changes to ``board`` and see
    each of them on the socket in commit order; the embedded delivery must have started
    with the connection. Stops the application."""

    async def test() -> None:
        ws = await _connect(application, user)
        await ws.send_json_to({"action": "subscribe", "ref": 1, "token": given})
        assert (await ws.receive_json_from(timeout=5))["type"] == "subscribed"
        for n in range(changes):
            await sync_to_async(board.add)(f"item-{n}")
        seen = [(await ws.receive_json_from(timeout=30))["value"] for _ in range(changes)]
        assert seen == list(range(1, changes + 1))
        await ws.disconnect()

    _run(application, test)


async def _connect(application: EmbeddedBroadcasts, user: Any) -> WebsocketCommunicator:
    """A socket of ``user``, connected; the embedded delivery started with it."""
    ws = WebsocketCommunicator(application, "/ws/solid-objects/")
    ws.scope["user"] = user
    assert (await ws.connect())[0]
    assert application.delivery is not None
    return ws


def _run(application: EmbeddedBroadcasts, test: Callable[[], Awaitable[None]]) -> None:
    """Run ``test`` and stop the application (from the event loop, and again after)."""

    async def run() -> None:
        await test()
        await sync_to_async(application.stop)()

    try:
        async_to_sync(run)()
    finally:
        application.stop()
