"""The HTTP health check, the Prometheus ``/metrics`` view and the OpenTelemetry bridge,
on the real database (turns and effects really run; spans and metrics are read from the
OpenTelemetry SDK's in-memory exporters)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.test import Client
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
from tests.testapp.actors.core import Counter
from tests.testapp.actors.outbox import Payer

pytestmark = pytest.mark.django_db(transaction=True)


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
    (span,) = [
        s
        for s in telemetry["spans"].get_finished_spans()
        if s.attributes.get("solid_objects.actor_id") == "otel-3"
    ]
    assert span.attributes["solid_objects.outcome"] == "dead"
    assert span.status.is_ok is False
