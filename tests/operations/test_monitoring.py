"""The HTTP health check, the Prometheus ``/metrics`` view and the OpenTelemetry bridge,
on the real database (turns and effects really run; spans and metrics are read from the
OpenTelemetry SDK's in-memory exporters)."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.db import connections
from django.db.utils import load_backend
from django.test import Client, override_settings
from django.utils import timezone
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from solid_objects import MessageFailed, otel
from solid_objects.metrics import METRICS
from solid_objects.runtime import processes
from solid_objects.testing import drain
from tests.factories import (
    DeadLetterFactory,
    EffectFactory,
    MessageFactory,
    ProcessFactory,
    ReadyMessageFactory,
)
from tests.testapp.actors.broadcasts import Board
from tests.testapp.actors.core import Counter
from tests.testapp.actors.outbox import Alarm, Payer

pytestmark = pytest.mark.django_db(transaction=True)
UNREACHABLE = "unreachable"


# -- health -------------------------------------------------------------------------------------
def test_health_is_ok_when_the_database_answers():
    response = Client().get("/ops/health/")
    assert response.status_code == 200
    assert response.json()["checks"]["database"]["status"] == "ok"
    assert response["Cache-Control"].startswith("max-age=0")


def test_health_fails_when_a_required_role_is_not_live():
    response = Client().get("/ops/health/?roles=worker,effect")
    assert response.status_code == 503
    assert response.json()["checks"]["roles"] == {
        "status": "fail",
        "detail": "no live effect, worker process",
    }
    processes.register("worker", "default")
    processes.register("effect", "default")
    ProcessFactory(kind="reminder", last_heartbeat_at=timezone.now() - timedelta(hours=1))
    assert Client().get("/ops/health/?roles=worker,effect").status_code == 200
    assert Client().get("/ops/health/?roles=reminder").status_code == 503  # stale is not live
    assert Client().get("/ops/health/?roles=workers").status_code == 400


@pytest.fixture
def unreachable(tmp_path: Path) -> Iterator[str]:
    """An alias whose server does not answer: the test database's settings with a port
    nothing listens on (PostgreSQL, MariaDB), or a file in a missing folder (SQLite). Its
    connection is created here, outside ``DATABASES`` (Django lets a test use such a
    connection; it refuses the aliases of ``DATABASES`` the test did not ask for)."""
    config = dict(connections["default"].settings_dict)
    if connections["default"].vendor == "sqlite":
        config["NAME"] = str(tmp_path / "missing" / "db.sqlite3")
    else:
        with socket.socket() as probe:  # a port just freed: nothing listens there
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        config.update(HOST="127.0.0.1", PORT=str(port))
        config["OPTIONS"] = {**config.get("OPTIONS", {}), "connect_timeout": 5}
    connections[UNREACHABLE] = load_backend(config["ENGINE"]).DatabaseWrapper(config, UNREACHABLE)
    try:
        yield UNREACHABLE
    finally:
        connections[UNREACHABLE].close()
        del connections[UNREACHABLE]


def test_health_fails_when_the_database_does_not_answer(unreachable, solid_settings):
    solid_settings(DATABASE=unreachable)
    response = Client().get("/ops/health/")
    assert response.status_code == 503
    assert response.json() == {
        "status": "fail",
        "checks": {"database": {"status": "fail", "detail": "OperationalError"}},
    }
    # Nothing else is asked of a database that does not answer.
    assert set(Client().get("/ops/health/?roles=worker&backlog=1").json()["checks"]) == {"database"}


def test_health_with_backlog_fails_on_work_nobody_serves():
    EffectFactory(available_at=timezone.now() - timedelta(minutes=5))
    assert Client().get("/ops/health/").status_code == 200
    response = Client().get("/ops/health/?backlog=1")
    assert response.status_code == 503
    assert "no effect role running" in response.json()["checks"]["backlog"]["detail"]


# -- Prometheus ---------------------------------------------------------------------------------
def samples(text: str) -> dict[str, float]:
    return {
        line.rsplit(" ", 1)[0]: float(line.rsplit(" ", 1)[1])
        for line in text.splitlines()
        if line and not line.startswith("#")
    }


def test_metrics_show_depth_lag_throughput_failures_and_role_liveness():
    long_ago = timezone.now() - timedelta(seconds=40)
    ReadyMessageFactory(
        message=MessageFactory(actor_type="tests.counter", available_at=long_ago),
        available_at=long_ago,
    )
    for _ in range(3):
        MessageFactory(actor_type="tests.counter", completed_at=timezone.now())
    DeadLetterFactory(actor_type="tests.payer")
    EffectFactory(status="dead", name="tests.outbox.fatal")
    processes.register("worker", "default")

    response = Client().get("/ops/metrics/")
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/plain")
    text = response.content.decode()
    for name in METRICS:
        assert f"# HELP {name} " in text, name
    got = samples(text)
    assert got['solid_objects_mailbox_ready_messages{actor_type="tests.counter"}'] == 1
    assert got['solid_objects_mailbox_due_messages{actor_type="tests.counter"}'] == 1
    assert 35 <= got['solid_objects_mailbox_lag_seconds{actor_type="tests.counter"}'] < 300
    assert got['solid_objects_turns_completed_last_minute{actor_type="tests.counter"}'] == 3
    assert got['solid_objects_dead_letters{actor_type="tests.payer"}'] == 1
    assert got['solid_objects_dead_effects{name="tests.outbox.fatal"}'] == 1
    assert got['solid_objects_outbox_rows{outbox="effects",status="dead"}'] == 1
    assert got['solid_objects_role_up{kind="worker"}'] == 1
    assert got['solid_objects_role_up{kind="broadcast"}'] == 0
    assert got['solid_objects_processes{kind="worker",state="live"}'] == 1


# -- OpenTelemetry ------------------------------------------------------------------------------
@pytest.fixture
def telemetry() -> Iterator[dict[str, Any]]:
    spans = InMemorySpanExporter()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(spans))
    reader = InMemoryMetricReader()
    otel.uninstall()
    otel.install(tracer_provider=tracer_provider, meter_provider=MeterProvider([reader]))
    try:
        yield {"spans": spans, "metrics": reader}
    finally:
        otel.uninstall()


def metric_points(reader: InMemoryMetricReader) -> dict[str, list[Any]]:
    points: dict[str, list[Any]] = {}
    data = reader.get_metrics_data()
    for resource in data.resource_metrics if data else []:
        for scope in resource.scope_metrics:
            for metric in scope.metrics:
                points.setdefault(metric.name, []).extend(metric.data.data_points)
    return points


def test_turns_and_effects_become_spans_and_metrics_without_arguments(telemetry, tmp_path: Path):
    secret = "card-4111-1111"
    assert Counter.ref("otel-1").sync().add(5) == 5
    Payer.ref("otel-2").sync().pay("tests.outbox.sink", {"sink": str(tmp_path / secret)})
    drain()

    spans = telemetry["spans"].get_finished_spans()
    by_name: dict[str, list[Any]] = {}
    for span in spans:
        by_name.setdefault(span.name, []).append(span)
    turn = next(
        s
        for s in by_name["solid_objects.turn"]
        if s.attributes["solid_objects.actor_id"] == "otel-1"
    )
    assert turn.attributes["solid_objects.actor_type"] == "tests.counter"
    assert turn.attributes["solid_objects.outcome"] == "completed"
    assert turn.end_time >= turn.start_time
    (effect,) = by_name["solid_objects.effect"]
    assert effect.attributes["solid_objects.name"] == "tests.outbox.sink"
    assert effect.attributes["solid_objects.outcome"] == "delivered"
    for span in spans:  # identities only: no arguments, state or results
        assert secret not in repr(dict(span.attributes))
        assert not any("argument" in key or "result" in key for key in span.attributes)

    points = metric_points(telemetry["metrics"])
    turns = {
        (p.attributes["actor_type"], p.attributes["outcome"]): p.value
        for p in points["solid_objects.turns"]
    }
    assert turns[("tests.counter", "completed")] == 1
    assert turns[("tests.payer", "completed")] >= 2  # pay, then the success callback
    assert [p.value for p in points["solid_objects.effects"]] == [1]
    assert points["solid_objects.turn.duration"][0].count >= 1


def test_failing_turns_are_error_spans(telemetry, solid_settings):
    solid_settings(MAX_ATTEMPTS=1)
    with pytest.raises(MessageFailed):
        Counter.ref("otel-3").sync().boom(retryable=False)
    (span,) = spans_named(telemetry, "solid_objects.turn", actor_id="otel-3")
    assert span.attributes["solid_objects.outcome"] == "dead"
    assert span.status.is_ok is False


def spans_named(telemetry: dict[str, Any], name: str, **attributes: Any) -> list[Any]:
    return [
        span
        for span in telemetry["spans"].get_finished_spans()
        if span.name == name
        and all(span.attributes.get(f"solid_objects.{k}") == v for k, v in attributes.items())
    ]


def test_a_fenced_commit_is_a_span_and_a_duration(telemetry):
    assert Counter.ref("otel-commit").sync().add(2) == 2
    Counter.ref("otel-commit").enqueue().add(3)
    drain()
    commits = spans_named(telemetry, "solid_objects.commit", actor_id="otel-commit")
    assert [span.attributes["solid_objects.sequence"] for span in commits] == [1, 2]
    for span in commits:
        assert span.attributes["solid_objects.actor_type"] == "tests.counter"
        assert span.attributes["solid_objects.turns"] == 1
        assert span.end_time > span.start_time  # timed by the commit's own duration
        assert span.status.is_ok
    points = metric_points(telemetry["metrics"])
    (histogram,) = [
        p
        for p in points["solid_objects.commit.duration"]
        if p.attributes == {"actor_type": "tests.counter"}
    ]
    assert histogram.count == 2 and histogram.sum > 0
    (commits_counted,) = [
        p.value
        for p in points["solid_objects.commits"]
        if p.attributes == {"actor_type": "tests.counter"}
    ]
    assert commits_counted == 2


def test_a_delivered_broadcast_is_a_span_and_counted(telemetry):
    in_memory = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}
    with override_settings(CHANNEL_LAYERS=in_memory):
        Board.ref("otel-board").sync().add("secret-item")
        assert drain().broadcasts == 1
    (span,) = spans_named(telemetry, "solid_objects.broadcast", actor_id="otel-board")
    assert span.attributes["solid_objects.observable"] == "size"
    assert span.attributes["solid_objects.outcome"] == "delivered"
    assert span.status.is_ok
    assert "secret-item" not in repr(dict(span.attributes))
    points = metric_points(telemetry["metrics"])
    assert [(p.attributes, p.value) for p in points["solid_objects.broadcasts"]] == [
        ({"outcome": "delivered"}, 1)
    ]


def test_a_fired_reminder_is_a_span_and_counted(telemetry):
    Alarm.ref("otel-alarm").sync().set_alarm(delay=60, label="secret-label")
    assert drain(at=timezone.now() + timedelta(minutes=2)).reminders == 1
    (span,) = spans_named(telemetry, "solid_objects.reminder", actor_id="otel-alarm")
    assert span.attributes["solid_objects.actor_type"] == "tests.alarm"
    assert span.attributes["solid_objects.name"] == "ring"
    assert span.attributes["solid_objects.occurrence"] == 1
    assert "secret-label" not in repr(dict(span.attributes))
    points = metric_points(telemetry["metrics"])
    assert [(p.attributes, p.value) for p in points["solid_objects.reminders"]] == [
        ({"actor_type": "tests.alarm"}, 1)
    ]


def test_a_failure_handed_to_on_failure_is_handled_not_an_error(telemetry):
    Payer.ref("otel-handled").sync().pay("tests.outbox.fatal", {"card": "4242"})
    drain()  # the handler fails for good; the failure goes to the payer's on_failure
    (span,) = spans_named(telemetry, "solid_objects.effect", actor_id="otel-handled")
    assert span.attributes["solid_objects.outcome"] == "handled"
    assert span.attributes["solid_objects.error_class"] == "builtins.ValueError"
    assert span.status.is_ok  # the actor handles it: not an error to alert on
    points = metric_points(telemetry["metrics"])
    assert [(p.attributes, p.value) for p in points["solid_objects.effects"]] == [
        ({"name": "tests.outbox.fatal", "outcome": "handled"}, 1)
    ]
