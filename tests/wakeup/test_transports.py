"""Wake-up transports: choice, NOTIFY in the enqueueing transaction, Redis after commit,
listeners that ring the doorbell, probes that fall back to polling."""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Iterator
from typing import Any

import pytest
import redis
from django.db import connection, transaction

from solid_objects.db.notify import CHANNEL as PG_CHANNEL
from solid_objects.db.vendors import dialect_for
from solid_objects.runtime.wakeup import doorbell
from solid_objects.runtime.wakeup import transports as wakeup_transports
from solid_objects.runtime.wakeup.hints import resolve_mode
from solid_objects.runtime.wakeup.postgresql import PostgreSQLListener
from solid_objects.runtime.wakeup.redis import RedisSubscriber, redis_channel
from tests.testapp.actors.broadcasts import Stamp

pytestmark = pytest.mark.django_db(transaction=True)

REDIS_URL = os.environ.get("SOLID_TEST_REDIS_URL", "redis://127.0.0.1:6379/0")
WAIT = 10.0


@pytest.fixture
def transports() -> Iterator[list[Any]]:
    started: list[Any] = []
    try:
        yield started
    finally:
        for transport in started:
            transport.stop()


def rings_after(action: Any, kind: str = "work", timeout: float = WAIT) -> bool:
    bell = doorbell(kind)
    seen = bell.generation
    action()
    return bell.wait(seen, timeout)


# -- which transport ------------------------------------------------------------------------------
def test_auto_picks_postgresql_on_postgresql_then_redis_then_in_process(vendor, solid_settings):
    solid_settings(WAKE_UP="auto", REDIS_URL=None)
    assert resolve_mode() == ("postgresql" if vendor == "postgresql" else "in_process")
    solid_settings(WAKE_UP="auto", REDIS_URL=REDIS_URL)
    assert resolve_mode() == ("postgresql" if vendor == "postgresql" else "redis")
    for explicit in ("in_process", "polling", "redis"):
        solid_settings(WAKE_UP=explicit)
        assert resolve_mode() == explicit


def test_no_transport_starts_for_in_process_or_polling(solid_settings):
    for mode in ("in_process", "polling"):
        solid_settings(WAKE_UP=mode)
        assert wakeup_transports.start() is None
        assert wakeup_transports.probe().ok


# -- PostgreSQL ------------------------------------------------------------------------------------
@pytest.fixture
def listening() -> Iterator[Any]:
    """A separate psycopg connection that LISTENs, like another process would."""
    import psycopg

    params = connection.get_connection_params()
    for key in ("cursor_factory", "context", "prepare_threshold"):
        params.pop(key, None)
    with psycopg.connect(autocommit=True, **params) as listener:
        listener.execute(f"LISTEN {PG_CHANNEL}")
        yield listener


def notified(listener: Any, timeout: float) -> list[str]:
    return [n.payload for n in listener.notifies(timeout=timeout, stop_after=1)]


@pytest.mark.db_vendor("postgresql")
def test_enqueue_notifies_inside_its_transaction(listening, solid_settings):
    solid_settings(WAKE_UP="auto")
    assert dialect_for(connection).notify is True
    with transaction.atomic():
        Stamp.ref("tx").enqueue().stamp()
        assert notified(listening, 0.3) == []  # not before the commit
    assert notified(listening, WAIT) == [""]


@pytest.mark.db_vendor("postgresql")
def test_a_rolled_back_enqueue_notifies_nobody(listening):
    with pytest.raises(RuntimeError), transaction.atomic():
        Stamp.ref("rollback").enqueue().stamp()
        raise RuntimeError("roll back")
    assert notified(listening, 0.5) == []


@pytest.mark.db_vendor("postgresql")
def test_notify_is_off_unless_listen_notify_is_the_transport(listening, solid_settings):
    solid_settings(WAKE_UP="polling")
    assert dialect_for(connection).notify is False
    Stamp.ref("quiet").enqueue().stamp()
    assert notified(listening, 0.5) == []


@pytest.mark.db_vendor("postgresql")
def test_the_postgresql_listener_rings_the_work_doorbell(transports, solid_settings):
    solid_settings(WAKE_UP="postgresql")
    transport = wakeup_transports.start()
    assert isinstance(transport, PostgreSQLListener)
    transports.append(transport)

    def notify(payload: str = "") -> None:
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_notify(%s, %s)", [PG_CHANNEL, payload])

    assert rings_after(notify)
    assert rings_after(lambda: notify("broadcast"), kind="broadcast")


@pytest.mark.db_vendor("postgresql")
def test_the_listener_reconnects_after_losing_its_connection(transports, solid_settings):
    solid_settings(WAKE_UP="postgresql")
    transport = wakeup_transports.start()
    assert transport is not None
    transports.append(transport)
    listener_pid = transport._connection.info.backend_pid

    def kill_listener() -> None:
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_terminate_backend(%s)", [listener_pid])

    assert rings_after(kill_listener)  # rings after reconnecting: hints may have been lost
    deadline = time.monotonic() + WAIT
    while transport._connection is None and time.monotonic() < deadline:
        time.sleep(0.01)

    def notify() -> None:
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_notify(%s, '')", [PG_CHANNEL])

    assert rings_after(notify)
    assert transport._connection.info.backend_pid != listener_pid


@pytest.mark.db_vendor("postgresql")
def test_a_probe_that_cannot_listen_falls_back_to_polling(monkeypatch, solid_settings, caplog):
    """Behind a transaction-pooling proxy the LISTEN does not stay on the session."""
    solid_settings(WAKE_UP="postgresql")
    original = PostgreSQLListener._connect

    def connect_without_listening(self: PostgreSQLListener) -> Any:
        connection_ = original(self)
        connection_.execute(f"UNLISTEN {PG_CHANNEL}")
        return connection_

    monkeypatch.setattr(PostgreSQLListener, "_connect", connect_without_listening)
    with caplog.at_level(logging.WARNING, logger="solid_objects"):
        assert wakeup_transports.start() is None
    assert "falling back to polling" in caplog.text
    assert not wakeup_transports.probe().ok


@pytest.mark.db_vendor("postgresql")
def test_the_postgresql_probe_succeeds_quickly(solid_settings):
    solid_settings(WAKE_UP="auto")
    result = wakeup_transports.probe()
    assert result.ok, result.detail
    assert result.mode == "postgresql"
    assert result.seconds is not None and result.seconds < 2.0


# -- Redis ----------------------------------------------------------------------------------------
@pytest.fixture
def subscribed() -> Iterator[Any]:
    client = redis.Redis.from_url(REDIS_URL)
    pubsub = client.pubsub(ignore_subscribe_messages=True)
    pubsub.subscribe(redis_channel())
    try:
        yield pubsub
    finally:
        pubsub.close()
        client.close()


def published(pubsub: Any, timeout: float) -> list[bytes]:
    deadline = time.monotonic() + timeout
    messages = []
    while time.monotonic() < deadline:
        message = pubsub.get_message(timeout=max(deadline - time.monotonic(), 0.01))
        if message and message["type"] == "message":
            messages.append(message["data"])
            break
    return messages


def test_redis_publishes_after_commit_only(subscribed, solid_settings):
    solid_settings(WAKE_UP="redis", REDIS_URL=REDIS_URL)
    with pytest.raises(RuntimeError), transaction.atomic():
        Stamp.ref("rolled-back").enqueue().stamp()
        raise RuntimeError("roll back")
    assert published(subscribed, 0.3) == []
    with transaction.atomic():
        Stamp.ref("committed").enqueue().stamp()
        assert published(subscribed, 0.3) == []
    assert published(subscribed, WAIT) == [b"work"]


def test_the_redis_subscriber_rings_the_doorbell(transports, solid_settings):
    solid_settings(WAKE_UP="redis", REDIS_URL=REDIS_URL)
    transport = wakeup_transports.start()
    assert isinstance(transport, RedisSubscriber)
    transports.append(transport)
    client = redis.Redis.from_url(REDIS_URL)
    try:
        assert rings_after(lambda: client.publish(redis_channel(), "work"))
        assert rings_after(lambda: client.publish(redis_channel(), "effect"), kind="effect")
    finally:
        client.close()


def test_an_unreachable_redis_falls_back_to_polling_and_never_fails_an_enqueue(
    solid_settings, caplog
):
    solid_settings(WAKE_UP="redis", REDIS_URL="redis://127.0.0.1:1/0")
    with caplog.at_level(logging.WARNING, logger="solid_objects"):
        assert wakeup_transports.start() is None
        started = time.monotonic()
        Stamp.ref("no-redis").enqueue().stamp()  # the publish fails and is only logged
        Stamp.ref("no-redis").enqueue().stamp()  # publishing is paused: no second wait
        assert time.monotonic() - started < 2.0
    assert "falling back to polling" in caplog.text
    assert "publish to Redis failed" in caplog.text


# -- the supervisor owns the transport ----------------------------------------------------------
@pytest.mark.db_vendor("postgresql")
def test_the_supervisor_starts_the_listener_first_and_stops_it_last(solid_settings):
    from solid_objects.runtime.roles import ActorRole
    from solid_objects.runtime.supervisor import Supervisor
    from tests.operations.support import running

    solid_settings(WAKE_UP="auto")
    supervisor = Supervisor(roles=[(ActorRole, 1)], install_signal_handlers=False)
    with running(supervisor) as runner:
        transport = supervisor.transport
        assert isinstance(transport, PostgreSQLListener)
        listener = transport._connection
        assert listener is not None and not listener.closed
        runner.stop()
    assert supervisor.transport is None
    assert listener.closed
