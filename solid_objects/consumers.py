"""``ObservableConsumer``: the WebSocket end of live pages (PRODUCT §A10).

One socket per page (``ws/solid-objects/``, see :mod:`solid_objects.routing`). The client
sends one message per element::

    {"action": "subscribe", "ref": 3, "token": "<from {% observe %}>"}

and the consumer answers ``{"type": "subscribed", "ref": 3}`` only when the token is valid,
fresh and was issued to the connecting viewer (user, or anonymous session) **and** the
``AUTHORIZE_SUBSCRIPTION`` policy allows it again now; then it joins the actor's Channels
group. Otherwise it answers ``{"type": "refused", "ref": 3, "reason": ...}`` with reason
``"invalid"`` (forged or damaged), ``"expired"`` (the page may fetch a fresh token),
``"viewer"`` (issued to someone else) or ``"forbidden"`` (the policy said no), and never
sends that element anything. A message that is not a subscription closes the socket
(code 4400).

Each broadcast of a followed observable is forwarded as::

    {"type": "change", "refs": [3], "observable": "item_count", "value": 2,
     "invalidate": false, "instance_id": 812, "state_revision": 57}

(``"invalidate": true`` and no value for invalidation-only observables: the page fetches them
from :func:`solid_objects.views.observed_values`).
"""

from __future__ import annotations

from typing import Any

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer

from .channels_groups import group_name
from .live import tokens
from .live.policy import allowed
from .registry import actor_types

#: Subscriptions one socket may hold (a page with more elements opens no more).
MAX_SUBSCRIPTIONS = 200
#: Close code for a malformed or forged message.
CLOSE_INVALID = 4400


class ObservableConsumer(AsyncJsonWebsocketConsumer):
    """Forwards the broadcasts of the observables a page may follow."""

    async def connect(self) -> None:
        # (group, observable) -> refs of this socket following it
        self.following: dict[tuple[str, str], list[Any]] = {}
        self.groups_joined: set[str] = set()
        await self.accept()

    async def disconnect(self, code: int) -> None:
        for group in getattr(self, "groups_joined", ()):
            await self.channel_layer.group_discard(group, self.channel_name)
        self.groups_joined = set()

    async def receive_json(self, content: Any, **kwargs: Any) -> None:
        if not isinstance(content, dict) or content.get("action") != "subscribe":
            await self.close(code=CLOSE_INVALID)
            return
        ref = content.get("ref")
        if not isinstance(ref, int | str) or isinstance(ref, bool) or len(str(ref)) > 64:
            await self.close(code=CLOSE_INVALID)
            return
        viewer = tokens.viewer(self.scope.get("user"), self.scope.get("session"))
        try:
            subject = tokens.verify(content.get("token"), viewer)
        except tokens.TokenRefused as refusal:
            await self.send_json({"type": "refused", "ref": ref, "reason": refusal.reason})
            return
        if sum(len(refs) for refs in self.following.values()) >= MAX_SUBSCRIPTIONS:
            await self.send_json({"type": "refused", "ref": ref, "reason": "too_many"})
            return
        may = await database_sync_to_async(allowed)(
            self.scope.get("user"),
            self.scope.get("session"),
            subject.actor_type,
            subject.actor_id,
            subject.observable,
        )
        if not may:
            await self.send_json({"type": "refused", "ref": ref, "reason": "forbidden"})
            return
        group = group_name(subject.actor_type, subject.actor_id)
        if group not in self.groups_joined:
            await self.channel_layer.group_add(group, self.channel_name)
            self.groups_joined.add(group)
        refs = self.following.setdefault((group, subject.observable), [])
        if ref not in refs:
            refs.append(ref)
        await self.send_json({"type": "subscribed", "ref": ref})

    async def solid_objects_broadcast(self, event: dict[str, Any]) -> None:
        """A row of the broadcast outbox (``type: "solid_objects.broadcast"``)."""
        group = group_name(str(event.get("actor_type")), str(event.get("actor_id")))
        refs = self.following.get((group, str(event.get("observable"))))
        if not refs:
            return
        value = event.get("value")
        invalidate = not carries_value(str(event.get("actor_type")), str(event.get("observable")))
        message: dict[str, Any] = {
            "type": "change",
            "refs": list(refs),
            "observable": event.get("observable"),
            "invalidate": invalidate,
            "instance_id": event.get("instance_id"),
            "state_revision": event.get("state_revision"),
        }
        if not invalidate:
            message["value"] = value
        await self.send_json(message)


def carries_value(actor_type: str, observable: str) -> bool:
    """Whether the observable broadcasts its value (``broadcast="value"``); the rows of an
    invalidation-only observable carry ``{}``."""
    spec = actor_types().get(actor_type)
    found = spec.observables.get(observable) if spec is not None else None
    return found is not None and found.broadcast == "value"
