"""Effects emitted by turns: handlers, context, retries, dead effects, callbacks."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.db import OperationalError, connection
from django.utils import timezone

from solid_objects import MessageFailed, signals
from solid_objects.models import Effect, Instance, Message
from solid_objects.outbox import effects as effects_module
from solid_objects.outbox import retry_dead_effect, run_pending_effects
from solid_objects.outbox.effects import EffectRole, claim_due, execute, record
from solid_objects.runtime import processes
from solid_objects.runtime.supervisor import Supervisor
from tests.testapp.actors.outbox import Payer

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def captured() -> Any:
    """Signals sent during the test, by name."""
    seen: dict[str, list[dict[str, Any]]] = {"delivered": [], "failed": []}

    def delivered(sender: Any, **payload: Any) -> None:
        seen["delivered"].append(payload)

    def failed(sender: Any, **payload: Any) -> None:
        seen["failed"].append(payload)

    signals.effect_delivered.connect(delivered)
    signals.effect_failed.connect(failed)
    yield seen
    signals.effect_delivered.disconnect(delivered)
    signals.effect_failed.disconnect(failed)


def rewind(effect_id: str) -> None:
    """Let time pass for a backed-off effect: make it due now."""
    Effect.objects.filter(effect_id=effect_id).update(
        available_at=timezone.now() - timedelta(seconds=1)
    )


def test_handler_gets_arguments_and_context_outside_a_transaction(captured):
    payer = Payer.ref("alice")
    effect_id = payer.pay("tests.outbox.context", {"order": 7})
    row = Effect.objects.get(effect_id=effect_id)
    assert (row.status, row.attempt_count, row.name) == ("pending", 0, "tests.outbox.context")
    assert row.arguments == {"order": 7}

    assert run_pending_effects() == 1

    row.refresh_from_db()
    source = Message.objects.get(operation="pay", actor_id="alice")
    assert row.status == "completed" and row.completed_at is not None
    assert row.attempt_count == 1
    assert row.result == {
        "effect_id": effect_id,
        "name": "tests.outbox.context",
        "attempt": 1,
        "actor_type": "tests.payer",
        "actor_id": "alice",
        "message_id": source.id,
        "in_transaction": False,
    }
    assert [p["effect_id"] for p in captured["delivered"]] == [effect_id]
    assert "arguments" not in captured["delivered"][0]
    assert "result" not in captured["delivered"][0]


def test_success_callback_gets_the_original_arguments_once():
    payer = Payer.ref("bob")
    effect_id = payer.pay("tests.outbox.context", {"amount": 12, "currency": "EUR"})
    run_pending_effects()
    run_pending_effects()  # nothing left: no second callback

    summary = payer.summary()
    assert len(summary["successes"]) == 1
    success = summary["successes"][0]
    assert success["effect_id"] == effect_id
    assert success["arguments"] == {"amount": 12, "currency": "EUR"}
    assert success["result"]["effect_id"] == effect_id
    assert success["key"] == f"effect:{effect_id}:success"
    assert success["mode"] == "internal"
    assert summary["failures"] == []


def test_no_callback_when_none_was_asked_for():
    payer = Payer.ref("quiet")
    payer.pay("tests.outbox.context", {}, on_success=None, on_failure=None)
    before = Message.objects.count()
    assert run_pending_effects() == 1
    assert Message.objects.count() == before
    assert Effect.objects.get().status == "completed"


def test_failures_retry_with_backoff_until_success(captured, solid_settings):
    # The exponential ceiling itself (the default draws a random delay below it).
    solid_settings(RETRY_DELAY="solid_objects.conf.backoff_ceiling")
    payer = Payer.ref("carol")
    effect_id = payer.pay("tests.outbox.flaky", {"succeed_on": 3})

    for attempt, delay in ((1, 1.0), (2, 2.0)):
        started = timezone.now()
        assert run_pending_effects() == 1
        row = Effect.objects.get(effect_id=effect_id)
        assert (row.status, row.attempt_count) == ("pending", attempt)
        assert row.claimed_by_id is None
        assert row.error["class"] == "builtins.RuntimeError"
        assert f"attempt {attempt}" in row.error["message"]
        # retry_delay(attempt) later, on the database clock
        assert row.available_at >= started + timedelta(seconds=delay - 0.5)
        assert run_pending_effects() == 0  # not due yet
        rewind(effect_id)

    assert run_pending_effects() == 1
    row = Effect.objects.get(effect_id=effect_id)
    assert (row.status, row.attempt_count, row.result) == ("completed", 3, {"attempt": 3})
    assert [(p["attempt"], p["dead"]) for p in captured["failed"]] == [(1, False), (2, False)]
    assert [p["attempt"] for p in captured["delivered"]] == [3]
    summary = payer.summary()
    assert [s["result"] for s in summary["successes"]] == [{"attempt": 3}]
    assert summary["failures"] == []


def test_a_failure_delivered_to_its_callback_is_handled_not_dead(solid_settings, captured):
    solid_settings(MAX_ATTEMPTS=2)
    payer = Payer.ref("dave")
    effect_id = payer.pay("tests.outbox.flaky", {"succeed_on": 0, "amount": 5})

    run_pending_effects()
    rewind(effect_id)
    run_pending_effects()

    row = Effect.objects.get(effect_id=effect_id)
    # The actor's on_failure got it: an outcome the actor handled, not a dead effect.
    assert (row.status, row.attempt_count) == ("handled", 2)
    assert row.completed_at is not None
    assert "attempt 2" in row.error["message"]
    assert captured["failed"][-1]["dead"] is False
    assert captured["failed"][-1]["handled"] is True
    assert retry_dead_effect(effect_id) is False  # retrying would charge the card again
    summary = payer.summary()
    assert summary["successes"] == []
    assert summary["failures"] == [
        {
            "effect_id": effect_id,
            "arguments": {"succeed_on": 0, "amount": 5},
            "error": {"class": "builtins.RuntimeError", "message": "provider down (attempt 2)"},
            "key": f"effect:{effect_id}:failure",
        }
    ]
    rewind(effect_id)
    assert run_pending_effects() == 0  # dead effects are not claimed


def test_a_non_retryable_error_is_handled_at_once_by_on_failure():
    payer = Payer.ref("erin")
    effect_id = payer.pay("tests.outbox.fatal", {"card": "4242"})
    run_pending_effects()
    row = Effect.objects.get(effect_id=effect_id)
    assert (row.status, row.attempt_count) == ("handled", 1)  # delivered to on_failure
    failure = payer.summary()["failures"][0]
    assert failure["error"] == {"class": "builtins.ValueError", "message": "card declined"}
    assert failure["arguments"] == {"card": "4242"}


def test_a_non_retryable_error_without_on_failure_is_dead_at_once():
    payer = Payer.ref("erin-no-callback")
    effect_id = payer.pay("tests.outbox.fatal", {"card": "4242"}, on_failure=None)
    run_pending_effects()
    row = Effect.objects.get(effect_id=effect_id)
    assert (row.status, row.attempt_count) == ("dead", 1)  # nobody handled it
    assert row.error["class"] == "builtins.ValueError"
    assert payer.summary()["failures"] == []


def test_an_unknown_effect_name_is_handled_at_once_by_on_failure():
    payer = Payer.ref("frank")
    effect_id = payer.pay("tests.outbox.not_registered", {})
    run_pending_effects()
    row = Effect.objects.get(effect_id=effect_id)
    assert (row.status, row.attempt_count) == ("handled", 1)  # delivered to on_failure
    assert row.error["class"].endswith("UnknownEffect")
    assert "tests.outbox.not_registered" in row.error["message"]
    assert len(payer.summary()["failures"]) == 1


def test_retry_of_a_dead_effect(solid_settings, tmp_path: Path):
    solid_settings(MAX_ATTEMPTS=1)
    gate = tmp_path / "gate"
    payer = Payer.ref("gina")
    # No on_failure callback: nobody handled the failure, so the effect is dead.
    effect_id = payer.pay("tests.outbox.gated", {"gate": str(gate)}, on_failure=None)
    run_pending_effects()
    assert Effect.objects.get(effect_id=effect_id).status == "dead"
    assert retry_dead_effect("no-such-effect") is False

    gate.write_text("open")
    assert retry_dead_effect(effect_id) is True
    assert retry_dead_effect(effect_id) is False  # it is pending now, not dead
    row = Effect.objects.get(effect_id=effect_id)
    assert (row.status, row.attempt_count, row.claimed_by_id) == ("pending", 0, None)

    assert run_pending_effects() == 1
    row.refresh_from_db()
    assert (row.status, row.attempt_count, row.result) == ("completed", 1, "passed")
    summary = payer.summary()
    assert summary["failures"] == []
    assert [s["effect_id"] for s in summary["successes"]] == [effect_id]


def test_a_turn_that_fails_after_emitting_leaves_no_effect():
    payer = Payer.ref("hank")
    with pytest.raises(MessageFailed):
        payer.pay_then_fail("tests.outbox.context", {})
    assert not Effect.objects.exists()
    assert run_pending_effects() == 0


def test_no_callback_to_an_actor_destroyed_while_its_effect_ran():
    payer = Payer.ref("ivy")
    payer.pay("tests.outbox.destroy_source", {})
    assert run_pending_effects() == 1
    # The callback would have recreated the actor: it must not exist.
    assert not Instance.objects.filter(actor_type="tests.payer", actor_id="ivy").exists()
    assert not Effect.objects.exists()  # cascaded with its instance
    assert not Message.objects.filter(actor_id="ivy").exists()


def test_an_outcome_is_recorded_only_under_its_own_claim():
    """A claim handed back (its process presumed dead) cannot record a second outcome."""
    payer = Payer.ref("jack")
    effect_id = payer.pay("tests.outbox.context", {})
    alias = connection.alias
    process_id = processes.register("effect", alias)
    [row] = claim_due(alias, process_id)
    attempt = execute(row, alias)
    # Dead-process cleanup hands the effect back to pending meanwhile.
    Effect.objects.filter(effect_id=effect_id).update(
        status="pending", claimed_by=None, claimed_at=None
    )
    assert record(alias, process_id, attempt) == "lost"
    assert Effect.objects.get(effect_id=effect_id).status == "pending"

    assert run_pending_effects() == 1  # redelivered, attempt 2
    row = Effect.objects.get(effect_id=effect_id)
    assert (row.status, row.attempt_count) == ("completed", 2)
    assert len(payer.summary()["successes"]) == 1


def test_the_role_keeps_an_outcome_it_could_not_record(monkeypatch, tmp_path: Path):
    """A database error while recording never runs the handler again."""
    sink = tmp_path / "sink.jsonl"
    payer = Payer.ref("kate")
    effect_id = payer.pay("tests.outbox.sink", {"sink": str(sink)})
    supervisor = Supervisor(roles=[], install_signal_handlers=False)
    role = EffectRole(supervisor)
    role.process_id = processes.register("effect", connection.alias)

    real_record = effects_module.record
    calls = {"n": 0}

    def flaky_record(*args: Any, **kwargs: Any) -> str:
        calls["n"] += 1
        if calls["n"] == 1:
            raise OperationalError("connection lost")
        return real_record(*args, **kwargs)

    monkeypatch.setattr(effects_module, "record", flaky_record)
    with pytest.raises(OperationalError):
        role.run_once()
    assert Effect.objects.get(effect_id=effect_id).status == "processing"
    assert role.run_once() is False  # recorded the kept outcome; nothing else due
    assert Effect.objects.get(effect_id=effect_id).status == "completed"
    assert len(sink.read_text().splitlines()) == 1
    assert len(payer.summary()["successes"]) == 1


@pytest.mark.db_vendor("postgresql", "mysql")
def test_claims_skip_rows_another_worker_has_locked():
    import threading

    from django.db import connections, transaction

    payer = Payer.ref("liam")
    payer.pay("tests.outbox.context", {})
    process_id = processes.register("effect", connection.alias)
    result: dict[str, Any] = {}

    def claim_elsewhere() -> None:
        try:
            result["rows"] = claim_due(connection.alias, process_id)
        except Exception as exc:  # surfaced by the assertion below
            result["error"] = exc
        finally:
            connections.close_all()

    with transaction.atomic():
        list(Effect.objects.select_for_update().all())
        thread = threading.Thread(target=claim_elsewhere)
        thread.start()
        thread.join(20)
    assert not thread.is_alive()
    assert result == {"rows": []}
    assert len(claim_due(connection.alias, process_id)) == 1


def test_the_upgrade_query_in_docs_marks_delivered_failures_handled():
    """docs/effects.md, "Upgrading a pre-release install": a failure its on_failure received
    was recorded ``dead`` before the ``handled`` status existed; the documented query finds
    it by its callback message and leaves every other dead effect alone."""
    from django.db.models import Exists, OuterRef, Value
    from django.db.models.functions import Concat

    payer = Payer.ref("upgraded")
    delivered = payer.pay("tests.outbox.fatal", {"card": "4242"})
    nobody = payer.pay("tests.outbox.fatal", {"card": "4000"}, on_failure=None)
    run_pending_effects()
    lost = payer.pay("tests.outbox.fatal", {"card": "4111"})
    run_pending_effects()
    # As an older release recorded them, and a callback that never made it to the mailbox.
    Effect.objects.filter(effect_id__in=[delivered, lost]).update(status="dead")
    Message.objects.filter(idempotency_key=f"effect:{lost}:failure").delete()

    # The query of the docs, as written there:
    callback = Message.objects.filter(
        instance_id=OuterRef("instance_id"),
        idempotency_key=Concat(Value("effect:"), OuterRef("effect_id"), Value(":failure")),
    )
    changed = (
        Effect.objects.filter(status="dead", failure_operation__isnull=False)
        .filter(Exists(callback))
        .update(status="handled")
    )

    assert changed == 1
    statuses = dict(Effect.objects.values_list("effect_id", "status"))
    assert statuses == {delivered: "handled", nobody: "dead", lost: "dead"}
