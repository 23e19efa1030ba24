"""Cross-process wake-up transports: PostgreSQL ``LISTEN/NOTIFY`` and Redis pub/sub.

Rows are the truth; a wake-up only shortens a worker's wait. ``SOLID_OBJECTS["WAKE_UP"]``:

- ``"auto"`` (default): PostgreSQL when the database is PostgreSQL, else Redis when
  ``REDIS_URL`` is set, else in-process only;
- ``"postgresql"``: every enqueue runs ``pg_notify('solid_objects', '')`` inside its own
  statement, so the notification is sent exactly when (and only if) the enqueue commits. Each
  worker process keeps one dedicated ``psycopg`` connection, outside Django's connection
  handling, that ``LISTEN``\\s and rings the process's ``work`` doorbell;
- ``"redis"``: after an enqueue commits, the enqueuing process publishes on a channel named
  after the table prefix and database; each worker process subscribes (redis-py);
- ``"in_process"``: doorbells only reach waiters of the same process;
- ``"polling"``: no cross-process hints; workers find work by polling.

A worker starts its transport with a probe (PostgreSQL: ``LISTEN``, a ``NOTIFY`` sent through
the application's own connection, and ``pg_listening_channels()`` on the listener; Redis:
subscribe and publish to itself). A failed probe (e.g. a transaction-pooling proxy in front
of PostgreSQL, which cannot keep a ``LISTEN`` session) logs a warning and the worker relies
on adaptive polling. A transport that breaks later reconnects with backoff and rings the
doorbell after reconnecting, since it may have missed hints.

A hint's payload names the doorbell it rings (``""`` and ``"work"``: new actor work; any
other name of :data:`solid_objects.runtime.wakeup.KINDS`), so other outboxes can send hints
the same way with :func:`notify_sql` / :func:`publish`.
"""

from __future__ import annotations

import logging
import os
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..conf import get_settings, table_prefix
from .wakeup import KINDS, doorbell

logger = logging.getLogger("solid_objects")

#: The PostgreSQL ``LISTEN`` channel (kept equal to the dialect's ``NOTIFY_CHANNEL``).
PG_CHANNEL = "solid_objects"
#: Seconds a startup probe waits for its own hint.
PROBE_TIMEOUT = 2.0
#: How long a listener thread blocks before looking at its stop flag (seconds).
LISTEN_TICK = 0.5
#: After a failed Redis publish, publishing pauses this long (seconds).
PUBLISH_PAUSE = 5.0
_PROBE_PREFIX = "probe:"

_publishers: list[Callable[[], None]] = []


def add_publisher(publisher: Callable[[], None]) -> None:
    """Call ``publisher()`` after every enqueue commits (in the enqueuing process)."""
    _publishers.append(publisher)


# -- which transport -------------------------------------------------------------------------
def resolve_mode(alias: str | None = None) -> str:
    """``"postgresql"``, ``"redis"``, ``"in_process"`` or ``"polling"`` for this settings."""
    settings = get_settings()
    mode = settings.WAKE_UP
    if mode != "auto":
        return mode
    from django.db import connections

    if connections[alias or settings.DATABASE].vendor == "postgresql":
        return "postgresql"
    if settings.REDIS_URL:
        return "redis"
    return "in_process"


_mode_cache: tuple[object, str] | None = None
_notify_override: bool | None = None


def _cached_mode() -> str:
    global _mode_cache
    settings = get_settings()
    cached = _mode_cache
    if cached is None or cached[0] is not settings:
        cached = (settings, resolve_mode())
        _mode_cache = cached
    return cached[1]


def hint_mode() -> str:
    """The cross-process hint mode in force for this process's settings (cached)."""
    return _cached_mode()


def notify_enabled() -> bool:
    """Whether PostgreSQL enqueues send ``NOTIFY`` (read by ``PostgreSQLDialect.notify``)."""
    if _notify_override is not None:
        return _notify_override
    return _cached_mode() == "postgresql"


def set_notify(enabled: bool | None) -> None:
    """Force NOTIFY on or off in this process (``None``: back to what the settings say)."""
    global _notify_override
    _notify_override = enabled


def notify_sql(kind: str = "work") -> tuple[str, list[Any]]:
    """SQL and parameters of a hint to send inside a PostgreSQL transaction."""
    return "SELECT pg_notify(%s, %s)", [PG_CHANNEL, "" if kind == "work" else kind]


# -- publishing (enqueuing processes) ----------------------------------------------------------
def publish_work() -> None:
    """After an enqueue committed: run the publish hooks and send the Redis hint."""
    publish("work")


def publish(kind: str = "work") -> None:
    for publisher in _publishers:
        try:
            publisher()
        except Exception:
            logger.debug("wake-up publish hook failed", exc_info=True)
    if _cached_mode() == "redis":
        _redis_publisher.publish(kind)


class _RedisPublisher:
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


_redis_publisher = _RedisPublisher()


def redis_channel(alias: str | None = None) -> str:
    """``solid_objects:<vendor>:<host>:<port>:<database name>:<table prefix>``: deployments
    sharing a Redis server do not wake each other, even with equal database names."""
    from django.db import connections

    connection = connections[alias or get_settings().DATABASE]
    settings_dict = connection.settings_dict
    where = ":".join(str(settings_dict.get(key) or "") for key in ("HOST", "PORT", "NAME"))
    return f"solid_objects:{connection.vendor}:{where}:{table_prefix()}"


# -- listening (worker processes) --------------------------------------------------------------
def _ring(payload: str) -> None:
    if payload.startswith(_PROBE_PREFIX):
        return
    kind = payload or "work"
    doorbell(kind if kind in KINDS else "work").ring()


@dataclass
class ProbeResult:
    ok: bool
    mode: str
    detail: str
    seconds: float | None = None


class Transport:
    """A listener thread that rings doorbells; :meth:`probe` before :meth:`start`."""

    mode = "none"

    def __init__(self, alias: str) -> None:
        self.alias = alias
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def probe(self) -> ProbeResult:
        raise NotImplementedError

    def start(self) -> None:
        self._thread = threading.Thread(
            target=self._run, name=f"solid-objects-wakeup-{self.mode}", daemon=True
        )
        self._thread.start()

    @property
    def alive(self) -> bool:
        return self._thread is not None and self._thread.is_alive() and not self._stop.is_set()

    def stop(self, timeout: float = 2.0) -> None:
        self._stop.set()
        with _listeners_lock:
            for key, transport in list(_listeners.items()):
                if transport is self:
                    del _listeners[key]
        if self._thread is not None:
            self._thread.join(timeout)
        self._close()

    def _run(self) -> None:
        backoff = 0.5
        while not self._stop.is_set():
            try:
                self._listen()
                backoff = 0.5
            except Exception as exc:
                if self._stop.is_set():
                    break
                logger.warning(
                    "wake-up %s listener failed, retrying in %.1fs: %s", self.mode, backoff, exc
                )
                self._close()
                self._stop.wait(backoff)
                backoff = min(backoff * 2, 30.0)
                doorbell("work").ring()  # hints may have been missed meanwhile

    def _listen(self) -> None:
        raise NotImplementedError

    def _close(self) -> None:
        raise NotImplementedError


class PostgreSQLListener(Transport):
    """``LISTEN solid_objects`` on a dedicated psycopg connection built from the alias's
    ``DATABASES`` entry (outside Django's connection handling and any pool)."""

    mode = "postgresql"

    def __init__(self, alias: str) -> None:
        super().__init__(alias)
        self._connection: Any = None

    def _connect(self) -> Any:
        import psycopg
        from django.db import connections

        params = connections[self.alias].get_connection_params()
        for key in ("cursor_factory", "context", "prepare_threshold"):
            params.pop(key, None)
        connection = psycopg.connect(autocommit=True, **params)
        connection.execute(f"LISTEN {PG_CHANNEL}")
        self._connection = connection
        return connection

    def probe(self) -> ProbeResult:
        from django.db import connections

        started = time.monotonic()
        try:
            connection = self._connection or self._connect()
            channels = [row[0] for row in connection.execute("SELECT pg_listening_channels()")]
            if PG_CHANNEL not in channels:
                return ProbeResult(False, self.mode, "LISTEN did not stick (pooling proxy?)")
            token = f"{_PROBE_PREFIX}{uuid.uuid4()}"
            sent_at = time.monotonic()
            with connections[self.alias].cursor() as cursor:  # autocommit: sent at once
                cursor.execute(notify_sql()[0], [PG_CHANNEL, token])
            for notify in connection.notifies(timeout=PROBE_TIMEOUT):
                if notify.payload == token:
                    return ProbeResult(
                        True, self.mode, "LISTEN/NOTIFY round trip", time.monotonic() - sent_at
                    )
            return ProbeResult(
                False,
                self.mode,
                f"no NOTIFY arrived within {PROBE_TIMEOUT:.0f}s (transaction-pooling proxy?)",
            )
        except Exception as exc:
            self._close()
            return ProbeResult(
                False, self.mode, f"{type(exc).__name__}: {exc}", time.monotonic() - started
            )

    def _listen(self) -> None:
        connection = self._connection
        if connection is None:
            connection = self._connect()
            doorbell("work").ring()
        for notify in connection.notifies(timeout=LISTEN_TICK):
            _ring(notify.payload)
            if self._stop.is_set():
                break

    def _close(self) -> None:
        connection, self._connection = self._connection, None
        if connection is not None:
            try:
                connection.close()
            except Exception:
                logger.debug("closing the LISTEN connection failed", exc_info=True)


class RedisSubscriber(Transport):
    """Subscribes to :func:`redis_channel` with redis-py."""

    mode = "redis"

    def __init__(self, alias: str) -> None:
        super().__init__(alias)
        self._client: Any = None
        self._pubsub: Any = None
        self.channel = redis_channel(alias)

    def _connect(self) -> Any:
        import redis

        url = get_settings().REDIS_URL
        if not url:
            raise RuntimeError('SOLID_OBJECTS["REDIS_URL"] is not set')
        self._client = redis.Redis.from_url(url, socket_connect_timeout=2.0)
        pubsub = self._client.pubsub(ignore_subscribe_messages=True)
        pubsub.subscribe(self.channel)
        self._pubsub = pubsub
        return pubsub

    def probe(self) -> ProbeResult:
        started = time.monotonic()
        try:
            pubsub = self._pubsub or self._connect()
            token = f"{_PROBE_PREFIX}{uuid.uuid4()}"
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
            _ring(_text(message.get("data")))

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


TRANSPORTS: dict[str, type[Transport]] = {
    "postgresql": PostgreSQLListener,
    "redis": RedisSubscriber,
}


def probe(alias: str | None = None) -> ProbeResult:
    """Check the configured transport without keeping it (``solid_objects_doctor``)."""
    alias = alias or get_settings().DATABASE
    mode = resolve_mode(alias)
    transport_class = TRANSPORTS.get(mode)
    if transport_class is None:
        return ProbeResult(True, mode, "no cross-process transport; workers poll")
    transport = transport_class(alias)
    try:
        return transport.probe()
    finally:
        transport.stop()


# -- result hints: sync callers waiting for a message another process runs ---------------------
#: This process's listener per alias (``None``: none could be started, or it is starting).
_listeners: dict[tuple[int, str], Transport | None] = {}
_listeners_lock = threading.Lock()


def publish_result(alias: str) -> None:
    """After a commit that finished sync calls of other processes: ring their ``result``
    doorbells (a ``NOTIFY`` in autocommit, or a Redis message), so a waiting caller reads
    its outcome at once instead of at its next poll."""
    mode = _cached_mode()
    if mode == "postgresql":
        from django.db import connections

        connection = connections[alias]
        if connection.in_atomic_block:
            return  # only ever called after the commit; never delay a caller's transaction
        with connection.cursor() as cursor:
            cursor.execute(*notify_sql("result"))
    elif mode == "redis":
        _redis_publisher.publish("result")


def ensure_listener(alias: str) -> None:
    """Make sure this process hears cross-process hints (a sync caller is about to wait for
    a message another process is running). Worker processes already listen; elsewhere the
    listener starts once per process, in the background, so this wait still polls."""
    key = (os.getpid(), alias)
    if key in _listeners:
        return
    with _listeners_lock:
        if key in _listeners:
            return
        _listeners[key] = None
    if resolve_mode(alias) not in TRANSPORTS:
        return

    def start_in_background() -> None:
        try:
            start(alias)
        except Exception:
            logger.warning("wake-ups: the result listener did not start", exc_info=True)

    threading.Thread(
        target=start_in_background, name="solid-objects-wakeup-start", daemon=True
    ).start()


def start(alias: str | None = None) -> Transport | None:
    """Probe and start this process's listener; ``None`` when workers only poll."""
    alias = alias or get_settings().DATABASE
    mode = resolve_mode(alias)
    transport_class = TRANSPORTS.get(mode)
    if transport_class is None:
        logger.info("wake-ups: %s (no cross-process transport)", mode)
        return None
    key = (os.getpid(), alias)
    with _listeners_lock:
        running = _listeners.get(key)
    if running is not None and running.mode == mode and running.alive:
        return running  # a caller's listener already runs in this process: share it
    transport = transport_class(alias)
    result = transport.probe()
    if not result.ok:
        transport.stop()
        logger.warning(
            "wake-ups: the %s probe failed (%s); falling back to polling", mode, result.detail
        )
        return None
    logger.info("wake-ups: %s (probe %.1f ms)", mode, (result.seconds or 0.0) * 1000)
    transport.start()
    with _listeners_lock:
        _listeners[key] = transport
    return transport
