"""Instrumentation (§A12): the signals fire with identities, sequence, attempt and durations,
never arguments, state or results; a raising receiver never fails a committed turn."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

import pytest
from django.db import connection
from django.dispatch import Signal

from solid_objects import LostActivation, Rejected, signals
from solid_objects.lease import acquire
from solid_objects.models import Instance, Message, Process
from solid_objects.passes import run_pass
from solid_objects.runtime import processes
from tests.testapp.actors.broadcasts import Probe

pytestmark = pytest.mark.django_db(transaction=True)

SECRET = "s3cr3t-payload"
NO_DELAY = "tests.operations.test_signals.no_delay"
ALL_SIGNALS = {name: value for name, value in vars(signals).items() if isinstance(value, Signal)}


def no_delay(attempt: int) -> float:
    return 0.0


class Recorder:
    def __init__(self) -> None:
        self.events: list[tuple[str, dict[str, Any]]] = []

    def receiver(self, name: str) -> Any:
        def receive(sender: Any, signal: Any = None, **payload: Any) -> None:
            self.events.append((name, payload))

        return receive

    def names(self) -> list[str]:
        return [name for name, _ in self.events]

    def of(self, name: str) -> list[dict[str, Any]]:
        return [payload for event, payload in self.events if event == name]


@pytest.fixture
def recorded() -> Iterator[Recorder]:
    recorder = Recorder()
    receivers = {name: recorder.receiver(name) for name in ALL_SIGNALS}
    for name, signal in ALL_SIGNALS.items():
        signal.connect(receivers[name], weak=False)
    try:
        yield recorder
    finally:
        for name, signal in ALL_SIGNALS.items():
            signal.disconnect(receivers[name])
        assert SECRET not in repr(recorder.events), "a signal payload leaked a payload"


@pytest.fixture
def owner() -> str:
    return processes.register("worker", connection.alias)


def run(instance_id: int, owner: str) -> Any:
    activation = acquire(connection.alias, owner, [instance_id])
    assert activation is not None
    return run_pass(activation)


def test_a_sync_call_sends_enqueued_claimed_started_completed_released(recorded):
    assert Probe.ref("ok").keep(SECRET) == f"result:{SECRET}"
    names = recorded.names()
    for expected in (
        "message_enqueued",
        "activation_claimed",
        "message_started",
        "message_completed",
        "activation_released",
    ):
        assert expected in names, names
    assert names.index("message_started") < names.index("message_completed")
    (completed,) = recorded.of("message_completed")
    assert completed["actor_type"] == "tests.signal_probe" and completed["actor_id"] == "ok"
    assert completed["sequence"] == 1 and completed["attempt"] == 1
    assert completed["duration"] >= 0
    (enqueued,) = recorded.of("message_enqueued")
    assert set(enqueued) >= {"actor_type", "actor_id", "message_id", "sequence"}


def test_retried_then_dead_lettered(recorded, owner, solid_settings):
    solid_settings(RETRY_DELAY=NO_DELAY, MAX_ATTEMPTS=2)
    message = Probe.ref("failing").enqueue().fail(SECRET)
    run(message.instance_id, owner)
    run(message.instance_id, owner)
    (retried,) = recorded.of("message_retried")
    assert retried["message_id"] == message.id and retried["attempt"] == 1
    (dead,) = recorded.of("message_dead_lettered")
    assert dead["message_id"] == message.id and dead["attempt"] == 2


def test_rejected(recorded):
    with pytest.raises(Rejected):
        Probe.ref("refusing").refuse(SECRET)
    (rejected,) = recorded.of("message_rejected")
    assert rejected["code"] == "refused"


def test_lost_activation(recorded, owner):
    message = Probe.ref("lost").enqueue().keep(SECRET)
    activation = acquire(connection.alias, owner, [message.instance_id])
    assert activation is not None
    Instance.objects.filter(id=message.instance_id).update(
        activation_token="00000000-0000-0000-0000-000000000000"
    )
    with pytest.raises(LostActivation):
        run_pass(activation)
    (lost,) = recorded.of("activation_lost")
    assert lost["actor_id"] == "lost" and lost["instance_id"] == message.instance_id


def test_state_too_large(recorded, solid_settings):
    solid_settings(WARN_STATE_BYTES=100)
    Probe.ref("big").grow(500)
    (warning,) = recorded.of("state_too_large")
    assert warning["size"] > 100 and warning["limit"] == 100


def test_process_started_stopped_and_pruned(recorded):
    process_id = processes.register("worker", connection.alias)
    processes.deregister(process_id, connection.alias)
    dead_id = processes.register("effect", connection.alias)
    Process.objects.filter(id=dead_id).update(last_heartbeat_at="2000-01-01T00:00:00Z")
    processes.cleanup_dead(connection.alias)
    started = [p["process_id"] for p in recorded.of("process_started")]
    assert started == [process_id, dead_id]
    assert [p["process_id"] for p in recorded.of("process_stopped")] == [process_id]
    assert recorded.of("process_pruned") == [{"process_id": dead_id, "reason": "dead"}]


def test_signals_are_logged_on_the_solid_objects_logger(caplog, owner, solid_settings):
    solid_settings(RETRY_DELAY=NO_DELAY)
    message = Probe.ref("logged").enqueue().fail(SECRET)
    with caplog.at_level(logging.DEBUG, logger="solid_objects"):
        run(message.instance_id, owner)
    retried = [r for r in caplog.records if r.getMessage().startswith("message_retried")]
    assert retried and retried[0].levelno == logging.WARNING
    assert retried[0].solid_objects["message_id"] == message.id  # type: ignore[attr-defined]
    assert SECRET not in caplog.text


def test_a_raising_receiver_never_fails_a_committed_turn(caplog):
    def explode(sender: Any, **payload: Any) -> None:
        raise RuntimeError("receiver bug")

    hooked = [
        signals.message_enqueued,
        signals.activation_claimed,
        signals.message_started,
        signals.message_completed,
        signals.activation_released,
    ]
    for signal in hooked:
        signal.connect(explode, weak=False)
    try:
        assert Probe.ref("robust").keep("fine") == "result:fine"
    finally:
        for signal in hooked:
            signal.disconnect(explode)
    message = Message.objects.get(actor_id="robust")
    assert message.completed_at is not None and message.result == "result:fine"
    assert Instance.objects.get(actor_id="robust").state == {"kept": "fine"}
    assert "signal receiver" in caplog.text and "receiver bug" in caplog.text
