"""OpenTelemetry bridge (the ``otel`` extra: ``opentelemetry-api``): the runtime's signals
become spans and metrics. Call :func:`install` once, e.g. in your ``AppConfig.ready()``::

    from solid_objects import otel
    otel.install()   # uses the global tracer and meter providers your SDK set up

Spans (ended when the signal is sent, started ``duration`` seconds earlier):

- ``solid_objects.turn``: one per committed turn outcome (completed, retried, rejected,
  dead-lettered); the turn ran in the fenced group commit, so a span means it committed;
- ``solid_objects.commit``: the fenced commit that wrote a group of an actor's turns
  (``solid_objects.turns`` of them; a batch commit of several actors: one span per actor);
- ``solid_objects.effect``: an effect handler run: ``delivered``, ``retried``, ``dead``, or
  ``handled`` (it failed for good and its ``on_failure`` callback was enqueued: an outcome
  the actor handles, so not an error span);
- ``solid_objects.broadcast``: a broadcast delivered to the channel layer (or failed);
- ``solid_objects.reminder``: a reminder fired (its message enqueued; no duration).

Metrics: counters ``solid_objects.turns``, ``solid_objects.commits``,
``solid_objects.effects``, ``solid_objects.broadcasts``, ``solid_objects.reminders``
(attribute ``outcome`` where there is one) and the histograms
``solid_objects.turn.duration``, ``solid_objects.commit.duration``,
``solid_objects.effect.duration`` (seconds).

Attributes carry identities, sequence and attempt only (``solid_objects.actor_type``,
``solid_objects.actor_id``, ``solid_objects.message_id``, ...); never arguments, state or
results, which the signals do not carry either. Metric attributes are low-cardinality:
actor type, effect name and outcome, never actor ids.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from opentelemetry import metrics, trace
from opentelemetry.trace import Status, StatusCode

from . import signals

SCOPE = "solid_objects"
#: Signal payload keys copied to span attributes (as ``solid_objects.<key>``).
SPAN_KEYS = (
    "actor_type",
    "actor_id",
    "message_id",
    "sequence",
    "attempt",
    "effect_id",
    "name",
    "reminder_id",
    "occurrence",
    "observable",
    "turns",
    "code",
    "error_class",
    "dead",
)
TURN_OUTCOMES = {
    signals.message_completed: "completed",
    signals.message_retried: "retried",
    signals.message_rejected: "rejected",
    signals.message_dead_lettered: "dead",
}


@dataclass
class Bridge:
    """The receivers :func:`install` connected (:meth:`uninstall` disconnects them)."""

    tracer: Any
    meter: Any
    instruments: dict[str, Any] = field(default_factory=dict)
    receivers: list[tuple[Any, Callable[..., None]]] = field(default_factory=list)

    def uninstall(self) -> None:
        for signal, receiver in self.receivers:
            signal.disconnect(receiver)
        self.receivers.clear()


_installed: Bridge | None = None


def _attributes(payload: dict[str, Any]) -> dict[str, Any]:
    attributes = {}
    for key in SPAN_KEYS:
        value = payload.get(key)
        if isinstance(value, bool | int | float | str):
            attributes[f"solid_objects.{key}"] = value
    return attributes


def _span(bridge: Bridge, name: str, payload: dict[str, Any], failed: bool, **extra: Any) -> None:
    end = time.time_ns()
    duration = payload.get("duration")
    seconds = float(duration) if isinstance(duration, int | float) else 0.0
    span = bridge.tracer.start_span(
        name,
        start_time=end - int(seconds * 1e9),
        attributes={**_attributes(payload), **extra},
    )
    if failed:
        span.set_status(Status(StatusCode.ERROR, str(payload.get("error_class") or "failed")))
    span.end(end_time=end)


def install(tracer_provider: Any = None, meter_provider: Any = None) -> Bridge:
    """Connect the signal receivers (once; a second call returns the same bridge)."""
    global _installed
    if _installed is not None:
        return _installed
    from importlib.metadata import PackageNotFoundError, version

    try:
        library_version = version("django-solid-objects")
    except PackageNotFoundError:  # pragma: no cover - running from a checkout
        library_version = ""
    bridge = Bridge(
        tracer=trace.get_tracer(SCOPE, library_version, tracer_provider=tracer_provider),
        meter=metrics.get_meter(SCOPE, library_version, meter_provider=meter_provider),
    )
    meter = bridge.meter
    counters = {
        kind: meter.create_counter(f"solid_objects.{kind}", unit="1", description=text)
        for kind, text in (
            ("turns", "Turn outcomes committed"),
            ("commits", "Fenced commits of an actor's turns"),
            ("effects", "Effect handler runs"),
            ("broadcasts", "Broadcast deliveries"),
            ("reminders", "Reminders fired"),
        )
    }
    turn_seconds = meter.create_histogram(
        "solid_objects.turn.duration", unit="s", description="Turn duration"
    )
    commit_seconds = meter.create_histogram(
        "solid_objects.commit.duration", unit="s", description="Fenced commit duration"
    )
    effect_seconds = meter.create_histogram(
        "solid_objects.effect.duration", unit="s", description="Effect handler duration"
    )
    bridge.instruments = {
        **counters,
        "turn.duration": turn_seconds,
        "commit.duration": commit_seconds,
        "effect.duration": effect_seconds,
    }

    def connect(signal: Any, receiver: Callable[..., None]) -> None:
        signal.connect(receiver, weak=False)
        bridge.receivers.append((signal, receiver))

    for signal, outcome in TURN_OUTCOMES.items():

        def on_turn(sender: Any, _outcome: str = outcome, **payload: Any) -> None:
            labels = {"actor_type": str(payload.get("actor_type", "")), "outcome": _outcome}
            _span(
                bridge,
                "solid_objects.turn",
                payload,
                _outcome in {"retried", "dead"},
                **{"solid_objects.outcome": _outcome},
            )
            counters["turns"].add(1, labels)
            if isinstance(payload.get("duration"), int | float):
                turn_seconds.record(float(payload["duration"]), labels)

        connect(signal, on_turn)

    def on_commit(sender: Any, **payload: Any) -> None:
        labels = {"actor_type": str(payload.get("actor_type", ""))}
        _span(bridge, "solid_objects.commit", payload, False)
        counters["commits"].add(1, labels)
        if isinstance(payload.get("duration"), int | float):
            commit_seconds.record(float(payload["duration"]), labels)

    connect(signals.turns_committed, on_commit)

    for signal, outcome in ((signals.effect_delivered, "delivered"), (signals.effect_failed, "")):

        def on_effect(sender: Any, _outcome: str = outcome, **payload: Any) -> None:
            result = _outcome or (
                "dead"
                if payload.get("dead")
                else "handled"
                if payload.get("handled")
                else "retried"
            )
            labels = {"name": str(payload.get("name", "")), "outcome": result}
            _span(
                bridge,
                "solid_objects.effect",
                payload,
                result in {"retried", "dead"},
                **{"solid_objects.outcome": result},
            )
            counters["effects"].add(1, labels)
            if isinstance(payload.get("duration"), int | float):
                effect_seconds.record(float(payload["duration"]), labels)

        connect(signal, on_effect)

    for signal, outcome in (
        (signals.broadcast_delivered, "delivered"),
        (signals.broadcast_failed, "failed"),
    ):

        def on_broadcast(sender: Any, _outcome: str = outcome, **payload: Any) -> None:
            _span(
                bridge,
                "solid_objects.broadcast",
                payload,
                _outcome == "failed",
                **{"solid_objects.outcome": _outcome},
            )
            counters["broadcasts"].add(1, {"outcome": _outcome})

        connect(signal, on_broadcast)

    def on_reminder(sender: Any, **payload: Any) -> None:
        _span(bridge, "solid_objects.reminder", payload, False)
        counters["reminders"].add(1, {"actor_type": str(payload.get("actor_type", ""))})

    connect(signals.reminder_fired, on_reminder)
    _installed = bridge
    return bridge


def uninstall() -> None:
    """Disconnect the bridge (tests; an application normally keeps it for its lifetime)."""
    global _installed
    if _installed is not None:
        _installed.uninstall()
        _installed = None
