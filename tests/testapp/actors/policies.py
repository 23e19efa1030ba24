"""Actors and effects with their own retry policy (``@retry``, ``@effect(max_attempts=...)``)."""

from __future__ import annotations

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
