"""Polling with a deadline: the one way the suite waits for rows, files or logs to change."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")

#: Upper bound of any wait in the suite (the machine is shared and slow); waits end as soon
#: as their condition holds.
PATIENCE = 60.0


def wait_until(
    predicate: Callable[[], T],
    timeout: float = PATIENCE,
    interval: float = 0.05,
    what: str = "",
    details: Callable[[], str] | None = None,
) -> T:
    """Poll ``predicate`` until it returns something truthy and return that value.

    Fails with an :class:`AssertionError` naming ``what`` (and the text ``details()``
    returns, e.g. the logs of the processes involved) once ``timeout`` seconds have passed.
    """
    deadline = time.monotonic() + timeout
    pause = threading.Event()
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            message = f"timed out after {timeout:.0f}s waiting for {what or predicate}"
            if details is not None:
                message = f"{message}:\n{details()}"
            raise AssertionError(message)
        pause.wait(interval)
