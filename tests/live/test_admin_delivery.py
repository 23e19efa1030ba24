"""The broadcasts admin says where a row went, or why it waits."""

from __future__ import annotations

import pytest
from django.contrib import admin
from django.test import Client, override_settings

from solid_objects.models import Broadcast
from tests.factories import BroadcastFactory, UserFactory

pytestmark = pytest.mark.django_db(transaction=True)
IN_MEMORY = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}
REDIS = {"default": {"BACKEND": "channels_redis.core.RedisChannelLayer"}}


def delivery(row: Broadcast) -> str:
    return str(admin.site._registry[Broadcast].delivery(row))


def test_pending_rows_say_who_would_send_them() -> None:
    row = BroadcastFactory()
    with override_settings(CHANNEL_LAYERS={}):
        assert "no Channels layer" in delivery(row)
    with override_settings(CHANNEL_LAYERS=IN_MEMORY):
        assert "web process" in delivery(row)
    with override_settings(CHANNEL_LAYERS=REDIS):
        assert "broadcast role" in delivery(row)
    row.status = "delivered"
    assert "Channels group" in delivery(row)


def test_the_change_list_shows_it() -> None:
    BroadcastFactory()
    client = Client()
    client.force_login(UserFactory(is_staff=True, is_superuser=True))
    with override_settings(CHANNEL_LAYERS=IN_MEMORY):
        page = client.get("/admin/solid_objects/broadcast/")
    assert page.status_code == 200 and b"waits for the web process" in page.content
