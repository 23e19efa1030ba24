"""Cross-process wake-ups reach a worker that serves one shard only (Redis: hints are
published on the home alias's channel whichever shard committed)."""

from __future__ import annotations

import os

import pytest

from solid_objects.runtime.wakeup import doorbell
from solid_objects.runtime.wakeup import transports as wakeup_transports
from solid_objects.runtime.wakeup.redis import RedisSubscriber, publisher, redis_channel

SHARDS = ["default", "shard_b"]
REDIS_URL = os.environ.get("SOLID_TEST_REDIS_URL", "redis://127.0.0.1:6379/0")
pytestmark = pytest.mark.django_db(transaction=True, databases=SHARDS)


def test_a_shard_s_redis_subscriber_hears_hints_published_for_any_shard(solid_settings):
    solid_settings(DATABASES=SHARDS, WAKE_UP="redis", REDIS_URL=REDIS_URL)
    transport = wakeup_transports.start("shard_b")
    assert isinstance(transport, RedisSubscriber)
    try:
        assert redis_channel("shard_b") != redis_channel()
        assert transport.channels == [redis_channel("shard_b"), redis_channel()]
        bell = doorbell("work")
        seen = bell.generation
        publisher.publish("work")  # what an enqueue on any shard sends once it committed
        assert bell.wait(seen, 10.0)
    finally:
        transport.stop()
