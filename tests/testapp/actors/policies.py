"""Actors and effects with their own retry policy (``@retry``, ``@effect(max_attempts=...)``)."""

from __future__ import annotations

import threading
from typing import Any

import solid_objects
from solid_objects import Actor, retry


@solid_objects.effect("tests.policy.flaky", max_attempts=2, retry_delay=3600)
def policy_flaky(arguments: dict[str, Any], context: Any) -> None:
    raise RuntimeError("provider down")


class Policied(Actor):
    actor_type = "tests.policied"

    @retry(max_attempts=2, retry_delay=3600)
    def patient(self) -> None:
        raise RuntimeError("boom")

    @retry(max_attempts=2, retry_delay=0)
    def twice(self) -> None:
        raise RuntimeError("boom")

    def plain(self) -> None:
        raise RuntimeError("boom")

    def emit_flaky(self) -> None:
        self.emit("tests.policy.flaky")


#: Set by a test to let a hung handler finish.
released = threading.Event()
#: Set by the hung handler once it runs.
hung = threading.Event()


@solid_objects.effect("tests.policy.hang", timeout=0.3)
def hang(arguments: dict[str, Any], context: Any) -> str:
    """Blocks until the test releases it, far past its timeout."""
    hung.set()
    released.wait(30)
    return "late"


@solid_objects.effect("tests.policy.quick", timeout=5)
def quick(arguments: dict[str, Any], context: Any) -> dict[str, Any]:
    return {"attempt": context.attempt}


class Hanger(Actor):
    actor_type = "tests.hanger"

    outcomes = solid_objects.attribute(default=list)

    def start(self, effect: str) -> None:
        self.emit(effect, on_success="done", on_failure="failed")

    def done(self, effect_id: str, arguments: dict[str, Any], result: Any) -> None:
        self.outcomes = [*self.outcomes, ["done", result]]

    def failed(self, effect_id: str, arguments: dict[str, Any], error: Any) -> None:
        self.outcomes = [*self.outcomes, ["failed", error["class"]]]
