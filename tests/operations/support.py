"""Helpers shared by the broadcast, wake-up and operations tests: an in-process supervisor
in a thread, and percentiles of latencies.

Processes, waiting, statement counting and per-test reset are in :mod:`tests.support`."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

from django.db import connections

from solid_objects.runtime.supervisor import Supervisor
from tests.support.waiting import PATIENCE


# -- an in-process supervisor ---------------------------------------------------------------------
class SupervisorThread:
    """``Supervisor.run()`` in a thread (no signal handlers); :meth:`stop` drains it."""

    def __init__(self, supervisor: Supervisor) -> None:
        self.supervisor = supervisor
        self.code: int | None = None
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, name="test-supervisor", daemon=True)

    def _run(self) -> None:
        try:
            self.code = self.supervisor.run()
        except BaseException as exc:
            self.error = exc
        finally:
            for alias in connections:
                connections[alias].close()

    def start(self) -> SupervisorThread:
        self.thread.start()
        deadline = time.monotonic() + PATIENCE
        while not self.supervisor.started.wait(0.05):
            if not self.thread.is_alive() or time.monotonic() > deadline:
                raise AssertionError(f"the supervisor did not start: {self.error!r}")
        return self

    def stop(self, timeout: float = PATIENCE) -> int | None:
        self.supervisor.request_stop()
        self.thread.join(timeout)
        if self.thread.is_alive():
            raise AssertionError("the supervisor did not stop")
        if self.error is not None:
            raise self.error
        return self.code


@contextmanager
def running(supervisor: Supervisor) -> Iterator[SupervisorThread]:
    runner = SupervisorThread(supervisor).start()
    try:
        yield runner
    finally:
        if runner.thread.is_alive():
            runner.stop()


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(fraction * (len(ordered) - 1))))
    return ordered[index]
