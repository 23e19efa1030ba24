"""The Redis transport (redis-py): publishing after a commit, and the subscriber thread.

The channel is ``solid_objects:<vendor>:<host>:<port>:<database name>:<table prefix>``, so
deployments sharing a Redis server do not wake each other, even with equal database names.

Publishers name the channel of the home alias ``SOLID_OBJECTS["DATABASE"]`` whichever shard
the commit was on, so the subscriber of a shard's supervisor listens to its own channel
and to the home alias's (one channel when they are the same).
"""

from __future__ import annotations

import logging
import os
import threading
import time
import uuid
from typing import Any

from django.db import connections

from ...conf import get_settings, table_prefix
from .doorbells import doorbell
from .listener import LISTEN_TICK, PROBE_PREFIX, PROBE_TIMEOUT, ListenerThread, ProbeResult, ring

logger = logging.getLogger("solid_objects")

#: After a failed publish, publishing pauses this long (seconds).
PUBLISH_PAUSE = 5.0


def redis_channel(alias: str | None = None) -> str:
    """The channel of database ``alias`` (default: the configured one)."""
    connection = connections[alias or get_settings().DATABASE]
    settings_dict = connection.settings_dict
    where = ":".join(str(settings_dict.get(key) or "") for key in ("HOST", "PORT", "NAME"))
    return f"solid_objects:{connection.vendor}:{where}:{table_prefix()}"


class RedisPublisher:
    """One lazily created client per process; a failure pauses publishing briefly so an
    unreachable Redis never slows enqueues down for long."""

    def __init__(self) -> None:
        self._client: Any = None
        self._key: tuple[int, str] | None = None
        self._paused_until = 0.0
        self._lock = threading.Lock()

    def publish(self, kind: str) -> None:
        if time.monotonic() < self._paused_until:
            return
        url = get_settings().REDIS_URL
        if not url:
            return
        try:
            client = self._client_for(url)
            client.publish(redis_channel(), kind)
        except Exception as exc:
            self._paused_until = time.monotonic() + PUBLISH_PAUSE
            with self._lock:
                self._client = None
            logger.warning(
                "wake-up publish to Redis failed (pausing %.0fs): %s", PUBLISH_PAUSE, exc
            )

    def _client_for(self, url: str) -> Any:
        key = (os.getpid(), url)
        with self._lock:
            if self._client is None or self._key != key:
                import redis

                self._client = redis.Redis.from_url(
                    url, socket_timeout=0.5, socket_connect_timeout=0.5
                )
                self._key = key
            return self._client


#: This process's publisher.
publisher = RedisPublisher()


class RedisSubscriber(ListenerThread):
    """Subscribes to :func:`redis_channel` of its alias (and of the home alias, where hints
    are published); the probe publishes to itself."""

    mode = "redis"

    def __init__(self, alias: str) -> None:
        super().__init__(alias)
        self._client: Any = None
        self._pubsub: Any = None
        self.channel = redis_channel(alias)
        self.channels = list(dict.fromkeys((self.channel, redis_channel())))

    def _connect(self) -> Any:
        import redis

        url = get_settings().REDIS_URL
        if not url:
            raise RuntimeError('SOLID_OBJECTS["REDIS_URL"] is not set')
        self._client = redis.Redis.from_url(url, socket_connect_timeout=2.0)
        pubsub = self._client.pubsub(ignore_subscribe_messages=True)
        pubsub.subscribe(*self.channels)
        self._pubsub = pubsub
        return pubsub

    def probe(self) -> ProbeResult:
        started = time.monotonic()
        try:
            pubsub = self._pubsub or self._connect()
            token = f"{PROBE_PREFIX}{uuid.uuid4()}"
            sent_at = time.monotonic()
            self._client.publish(self.channel, token)
            deadline = sent_at + PROBE_TIMEOUT
            while time.monotonic() < deadline:
                message = pubsub.get_message(timeout=max(deadline - time.monotonic(), 0.01))
                if message and _text(message.get("data")) == token:
                    return ProbeResult(
                        True,
                        self.mode,
                        "Redis publish/subscribe round trip",
                        time.monotonic() - sent_at,
                    )
            return ProbeResult(False, self.mode, f"no message within {PROBE_TIMEOUT:.0f}s")
        except Exception as exc:
            self._close()
            return ProbeResult(
                False, self.mode, f"{type(exc).__name__}: {exc}", time.monotonic() - started
            )

    def _listen(self) -> None:
        pubsub = self._pubsub
        if pubsub is None:
            pubsub = self._connect()
            doorbell("work").ring()
        message = pubsub.get_message(timeout=LISTEN_TICK)
        if message and message.get("type") == "message":
            ring(_text(message.get("data")))

    def _close(self) -> None:
        pubsub, self._pubsub = self._pubsub, None
        client, self._client = self._client, None
        for closable in (pubsub, client):
            if closable is not None:
                try:
                    closable.close()
                except Exception:
                    logger.debug("closing the Redis subscription failed", exc_info=True)


def _text(data: Any) -> str:
    return data.decode() if isinstance(data, bytes) else str(data or "")
