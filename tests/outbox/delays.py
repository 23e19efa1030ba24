"""``RETRY_DELAY`` policies the outbox tests name in a worker's settings (dotted paths)."""

from __future__ import annotations


def half_a_second(attempt: int) -> float:
    return 0.5
