"""``ObservableConsumer`` over Channels' ``WebsocketCommunicator``: real tokens, the real
policy, rows of the real broadcast outbox delivered through the in-memory layer."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import pytest
from asgiref.sync import async_to_sync, sync_to_async
from channels.layers import get_channel_layer
from channels.testing import WebsocketCommunicator
from django.contrib.auth.models import AnonymousUser
from django.contrib.sessions.backends.db import SessionStore
from django.db import connection
from django.test import override_settings

from solid_objects.consumers import CLOSE_INVALID, ObservableConsumer
from solid_objects.live import tokens
from solid_objects.outbox.broadcasts import deliver_due
from solid_objects.runtime import processes
from tests.factories import UserFactory
from tests.live import policies
from tests.live.policies import OWNER, SESSION
from tests.testapp.actors.broadcasts import Board

pytestmark = pytest.mark.django_db(transaction=True)
IN_MEMORY = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}


@pytest.fixture(autouse=True)
def layer() -> Iterator[Any]:
    with override_settings(CHANNEL_LAYERS=IN_MEMORY):
        yield get_channel_layer()


def run(test: Callable[[], Awaitable[None]]) -> None:
    async_to_sync(test)()


def socket(user: Any = None, session: Any = None) -> WebsocketCommunicator:
    communicator = WebsocketCommunicator(ObservableConsumer.as_asgi(), "/ws/solid-objects/")
    communicator.scope["user"] = user if user is not None else AnonymousUser()
    communicator.scope["session"] = session
    return communicator


def token(user: Any, actor_id: str, observable: str = "size") -> str:
    return tokens.issue(tokens.Subject("tests.board", actor_id, observable), f"u:{user.pk}")


def deliver(layer: Any) -> int:
    owner = processes.register("broadcast", connection.alias)
    return len(deliver_due(connection.alias, owner, layer=layer))


async def subscribe(ws: WebsocketCommunicator, ref: Any, given: Any) -> dict[str, Any]:
    await ws.send_json_to({"action": "subscribe", "ref": ref, "token": given})
    return await ws.receive_json_from(timeout=5)


def test_a_valid_subscription_receives_changes_with_their_order_fields(policy, layer) -> None:
    policy(OWNER)
    user = UserFactory()
    board = Board.ref(f"board-of-{user.pk}")
    board.add("a")
    deliver(layer)  # the first change went out before anyone listened

    async def test() -> None:
        ws = socket(user)
        connected, _ = await ws.connect()
        assert connected
        assert await subscribe(ws, 1, token(user, board.actor_id)) == {
            "type": "subscribed",
            "ref": 1,
        }
        assert await subscribe(ws, 2, token(user, board.actor_id, "title")) == {
            "type": "subscribed",
            "ref": 2,
        }
        await sync_to_async(board.add_and_retitle)("b", "new title")
        assert await sync_to_async(deliver)(layer) == 2
        snapshot = await sync_to_async(board.snapshot)()
        first = await ws.receive_json_from(timeout=5)
        second = await ws.receive_json_from(timeout=5)
        assert first == {
            "type": "change",
            "refs": [1],
            "observable": "size",
            "value": 2,
            "invalidate": False,
            "instance_id": snapshot.instance_id,
            "state_revision": snapshot.revision,
        }
        # Invalidation only: no value, the page asks observed_values for it.
        assert second == {
            "type": "change",
            "refs": [2],
            "observable": "title",
            "invalidate": True,
            "instance_id": snapshot.instance_id,
            "state_revision": snapshot.revision,
        }
        assert await ws.receive_nothing(timeout=0.2)
        await ws.disconnect()

    run(test)


def test_expired_other_users_and_refused_tokens_never_receive_anything(policy, layer) -> None:
    policy(OWNER)
    owner, intruder = UserFactory(), UserFactory()
    board = Board.ref(f"board-of-{owner.pk}")
    board.add("a")
    deliver(layer)
    fresh = token(owner, board.actor_id)

    async def test() -> None:
        ws = socket(intruder)
        await ws.connect()
        # The owner's token in another user's socket.
        assert await subscribe(ws, 1, fresh) == {"type": "refused", "ref": 1, "reason": "viewer"}
        # A token of the intruder for a board the policy does not give them.
        assert await subscribe(ws, 2, token(intruder, board.actor_id)) == {
            "type": "refused",
            "ref": 2,
            "reason": "forbidden",
        }
        owners = socket(owner)
        await owners.connect()
        tokens.MAX_AGE, saved = -1, tokens.MAX_AGE
        try:
            assert await subscribe(owners, 3, fresh) == {
                "type": "refused",
                "ref": 3,
                "reason": "expired",
            }
        finally:
            tokens.MAX_AGE = saved
        await sync_to_async(board.add)("b")
        assert await sync_to_async(deliver)(layer) == 1
        assert await ws.receive_nothing(timeout=0.3)
        assert await owners.receive_nothing(timeout=0.1)
        await ws.disconnect()
        await owners.disconnect()

    run(test)


def test_forged_tokens_are_refused_and_the_socket_stays(policy) -> None:
    policy(OWNER)
    user = UserFactory()
    genuine = token(user, f"board-of-{user.pk}")
    _, _, signature = genuine.partition(":")
    forged = tokens.issue(tokens.Subject("tests.board", "board-of-0", "size"), f"u:{user.pk}")
    tampered = f"{forged.partition(':')[0]}:{signature}"

    async def test() -> None:
        ws = socket(user)
        await ws.connect()
        for ref, given in enumerate([tampered, "forged:token", None, 12]):
            assert await subscribe(ws, ref, given) == {
                "type": "refused",
                "ref": ref,
                "reason": "invalid",
            }
        assert (await subscribe(ws, "ok", genuine))["type"] == "subscribed"
        await ws.disconnect()

    run(test)


def test_the_policy_is_asked_again_when_subscribing(policy) -> None:
    policy(OWNER)
    user = UserFactory()
    rendered_while_allowed = token(user, f"board-of-{user.pk}")
    policies.switch["on"] = False  # permission withdrawn after the page was rendered

    async def test() -> None:
        ws = socket(user)
        await ws.connect()
        assert await subscribe(ws, "a", rendered_while_allowed) == {
            "type": "refused",
            "ref": "a",
            "reason": "forbidden",
        }
        await ws.disconnect()

    run(test)


@pytest.mark.parametrize(
    "message",
    [
        {"action": "subscribe", "ref": True, "token": "x"},
        {"action": "subscribe", "ref": "x" * 65, "token": "x"},
        {"action": "listen", "ref": 1, "token": "x"},
        ["subscribe"],
    ],
)
def test_malformed_messages_close_the_socket(message: Any, policy) -> None:
    policy(OWNER)

    async def test() -> None:
        ws = socket(UserFactory.build(pk=1))
        await ws.connect()
        await ws.send_json_to(message)
        closed = await ws.receive_output(timeout=5)
        assert closed == {"type": "websocket.close", "code": CLOSE_INVALID}

    run(test)


def test_anonymous_visitors_follow_what_their_session_allows(policy, layer) -> None:
    policy(SESSION)
    session = SessionStore()
    session["board"] = "b-anon-ws"
    session.save()
    given = tokens.issue(
        tokens.Subject("tests.board", "b-anon-ws", "size"), tokens.viewer(None, session)
    )
    other_session = SessionStore()
    other_session.save()

    async def test() -> None:
        ws = socket(session=session)
        await ws.connect()
        assert (await subscribe(ws, 1, given))["type"] == "subscribed"
        stranger = socket(session=other_session)
        await stranger.connect()
        assert (await subscribe(stranger, 1, given))["reason"] == "viewer"
        await sync_to_async(Board.ref("b-anon-ws").add)("x")
        await sync_to_async(deliver)(layer)
        assert (await ws.receive_json_from(timeout=5))["value"] == 1
        assert await stranger.receive_nothing(timeout=0.2)
        await ws.disconnect()
        await stranger.disconnect()

    run(test)
