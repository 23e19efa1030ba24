"""Effects with a database-held rate limit (``@effect(name, rate=...)``)."""

from __future__ import annotations

import threading
import time
from typing import Any

import solid_objects

#: When each attempt of ``tests.rate.paced`` started (this process's monotonic clock).
starts: list[float] = []
_lock = threading.Lock()


@solid_objects.effect("tests.rate.paced", rate="2/s")
def paced(arguments: dict[str, Any], context: Any) -> int:
    with _lock:
        starts.append(time.monotonic())
    return context.attempt


@solid_objects.effect("tests.rate.hourly", rate="1/h")
def hourly(arguments: dict[str, Any], context: Any) -> int:
    return context.attempt


@solid_objects.effect("tests.rate.paced_clock", rate="2/s")
def paced_clock(arguments: dict[str, Any], context: Any) -> float:
    """Returns when it started (the wall clock: every worker process of a test shares it)."""
    return time.time()
