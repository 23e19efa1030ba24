"""Actors, effect handlers and commit actions for the outbox and reminder tests."""

from __future__ import annotations

import json
import os
import threading
from datetime import datetime
from pathlib import Path
from typing import Any

import solid_objects
from solid_objects import Actor, attribute, query

# -- effect handlers --------------------------------------------------------------------------


@solid_objects.effect("tests.outbox.sink")
def sink(arguments: dict[str, Any], context: Any) -> dict[str, Any]:
    """Append one line per delivery to ``arguments["sink"]``; then, with ``wait_for``, block
    until that file exists (so a test can kill the worker before it records the outcome)."""
    line = {"effect_id": context.effect_id, "attempt": context.attempt, "pid": os.getpid()}
    with Path(arguments["sink"]).open("a") as handle:
        handle.write(json.dumps(line) + "\n")
    flag = arguments.get("wait_for")
    if flag:
        for _ in range(3000):
            if Path(flag).exists():
                break
            threading.Event().wait(0.01)
    return {"delivered": context.effect_id, "pid": os.getpid()}


@solid_objects.effect("tests.outbox.flaky")
def flaky(arguments: dict[str, Any], context: Any) -> dict[str, Any]:
    """Fails until attempt ``succeed_on`` (never, when it is 0)."""
    succeed_on = arguments.get("succeed_on", 0)
    if not succeed_on or context.attempt < succeed_on:
        raise RuntimeError(f"provider down (attempt {context.attempt})")
    return {"attempt": context.attempt}


@solid_objects.effect("tests.outbox.fatal")
def fatal(arguments: dict[str, Any], context: Any) -> None:
    error = ValueError("card declined")
    error.retryable = False  # type: ignore[attr-defined]
    raise error


@solid_objects.effect("tests.outbox.gated")
def gated(arguments: dict[str, Any], context: Any) -> str:
    """Fails (retryably) until the file ``arguments["gate"]`` exists."""
    if not Path(arguments["gate"]).exists():
        raise RuntimeError("the gate is closed")
    return "passed"


@solid_objects.effect("tests.outbox.context")
def describe_context(arguments: dict[str, Any], context: Any) -> dict[str, Any]:
    from django.db import connections

    return {
        "effect_id": context.effect_id,
        "name": context.name,
        "attempt": context.attempt,
        "actor_type": context.actor_type,
        "actor_id": context.actor_id,
        "message_id": context.message_id,
        "in_transaction": connections[context.using].in_atomic_block,
    }


@solid_objects.effect("tests.outbox.destroy_source")
def destroy_source(arguments: dict[str, Any], context: Any) -> str:
    """Destroys the emitting actor while the effect is in flight."""
    solid_objects.ref(context.actor_type, context.actor_id).destroy()
    return "destroyed"


# -- commit actions ---------------------------------------------------------------------------


@solid_objects.commit_action("tests.outbox.create_group")
def create_group(arguments: dict[str, Any], context: Any) -> None:
    from django.contrib.auth.models import Group

    Group.objects.using(context.using).create(name=arguments["group"])


# -- actors -----------------------------------------------------------------------------------


class Payer(Actor):
    """Emits effects and keeps what its callbacks told it."""

    actor_type = "tests.payer"

    emitted = attribute(default=list)
    successes = attribute(default=list)
    failures = attribute(default=list)

    def pay(
        self,
        effect: str,
        arguments: dict[str, Any],
        on_success: str | None = "paid",
        on_failure: str | None = "declined",
    ) -> str:
        handle = self.emit(effect, on_success=on_success, on_failure=on_failure, **arguments)
        self.emitted = [*self.emitted, handle.effect_id]
        return handle.effect_id

    def pay_then_fail(self, effect: str, arguments: dict[str, Any]) -> None:
        self.emit(effect, on_success="paid", **arguments)
        error = RuntimeError("the turn failed after emitting")
        error.retryable = False  # type: ignore[attr-defined]
        raise error

    def paid(self, effect_id: str, arguments: dict[str, Any], result: Any) -> None:
        self.successes = [
            *self.successes,
            {
                "effect_id": effect_id,
                "arguments": arguments,
                "result": result,
                "key": self.message.idempotency_key,
                "mode": self.message.delivery_mode,
            },
        ]

    def declined(self, effect_id: str, arguments: dict[str, Any], error: dict[str, Any]) -> None:
        self.failures = [
            *self.failures,
            {
                "effect_id": effect_id,
                "arguments": arguments,
                "error": error,
                "key": self.message.idempotency_key,
            },
        ]

    @query
    def summary(self) -> dict[str, Any]:
        return {"emitted": self.emitted, "successes": self.successes, "failures": self.failures}


class Messenger(Actor):
    """Sends messages to other messengers with ``send_to``."""

    actor_type = "tests.messenger"

    inbox = attribute(default=list)

    def tell(
        self,
        target: str,
        text: str,
        key: str | None = None,
        at: str | None = None,
        fail: bool = False,
    ) -> None:
        available_at = datetime.fromisoformat(at) if at else None
        self.send_to(Messenger.ref(target), available_at=available_at, idempotency_key=key).hear(
            text=text
        )
        if fail:
            error = RuntimeError("the sender failed after send_to")
            error.retryable = False  # type: ignore[attr-defined]
            raise error

    def hear(self, text: str) -> int:
        self.inbox = [
            *self.inbox,
            {
                "text": text,
                "key": self.message.idempotency_key,
                "mode": self.message.delivery_mode,
            },
        ]
        return len(self.inbox)

    @query
    def heard(self) -> list[dict[str, Any]]:
        return self.inbox


class Grouper(Actor):
    """Creates a django.contrib.auth Group through a commit action."""

    actor_type = "tests.grouper"

    created = attribute(default=list)

    def create(self, name: str) -> None:
        self.commit_action("tests.outbox.create_group", group=name)
        self.created = [*self.created, name]


class Alarm(Actor):
    """Schedules reminders of ``ring``."""

    actor_type = "tests.alarm"

    rings = attribute(default=list)

    def set_alarm(
        self,
        delay: float | None = None,
        at: str | None = None,
        every: float | None = None,
        missed: str = "latest",
        key: str | None = None,
        label: str = "ring",
        cron: str | None = None,
        tz: str | None = None,
    ) -> None:
        self.schedule(
            delay=delay,
            at=datetime.fromisoformat(at) if at else None,
            every=every,
            missed=missed,
            key=key,
            cron=cron,
            tz=tz,
        ).ring(label=label)

    def cancel(self, key: str | None = None) -> None:
        self.unschedule("ring", key=key)

    def pay_later(self, sink: str) -> None:
        """Leaves a pending effect and a reminder behind (for destroy)."""
        self.emit("tests.outbox.sink", sink=sink)
        self.schedule(delay=3600).ring(label="later")

    def ring(self, label: str) -> int:
        self.rings = [*self.rings, {"label": label, "key": self.message.idempotency_key}]
        return len(self.rings)

    @query
    def rang(self) -> list[dict[str, Any]]:
        return self.rings
