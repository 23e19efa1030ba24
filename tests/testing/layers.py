"""A Channels layer the tests of this package read broadcasts from."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from asgiref.sync import async_to_sync

from solid_objects.channels_groups import group_name

IN_MEMORY = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}


def subscribe(layer: Any, actor_type: str, actor_id: str) -> str:
    """A new channel in the actor's group (what the live-page consumer joins)."""
    channel: str = async_to_sync(layer.new_channel)()
    async_to_sync(layer.group_add)(group_name(actor_type, actor_id), channel)
    return channel


def received(layer: Any, channel: str, count: int) -> list[dict[str, Any]]:
    """The next ``count`` messages of ``channel``, and then nothing more."""

    async def take() -> list[dict[str, Any]]:
        messages = [await asyncio.wait_for(layer.receive(channel), 5) for _ in range(count)]
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(layer.receive(channel), 0.2)
        return messages

    return async_to_sync(take)()
