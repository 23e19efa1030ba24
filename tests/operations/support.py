"""Helpers shared by the broadcast, wake-up and operations tests: waiting, an in-process
supervisor in a thread, worker subprocesses that are always killed, statement counting."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from django.db import connection, connections
from django.db.backends import utils as backend_utils

from solid_objects.conf import get_settings
from solid_objects.models import Process
from solid_objects.runtime import processes
from solid_objects.runtime.supervisor import Supervisor
from solid_objects.sync import caller_cache
from tests.runtime.helpers import wait_until

REPO_ROOT = Path(__file__).resolve().parents[2]
#: Upper bound of any wait (the machine is shared and slow); events end waits early.
PATIENCE = 60.0


def reset_runtime() -> None:
    """Flushed tables make cached caller registrations and warm activations point at rows
    that no longer exist: forget them."""
    caller_cache.clear()
    processes.callers.forget(get_settings().DATABASE)


def release_restrictive_references() -> None:
    """Clear leases and claimed turns (RESTRICT references to processes) before a flush."""
    from solid_objects.models import ClaimedMessage, Instance

    ClaimedMessage.objects.all().delete()
    Instance.objects.exclude(activation_owner=None).update(
        activation_owner=None, activation_token=None, activation_expires_at=None
    )


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


# -- worker subprocesses ---------------------------------------------------------------------
class Children:
    """``tests/manage.py <command>`` subprocesses on the test database; :meth:`kill_all`
    (run by the fixture's finalizer) kills whatever is left."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.procs: list[subprocess.Popen[bytes]] = []

    def start(
        self, command: str, *args: str, settings: dict[str, Any] | None = None
    ) -> subprocess.Popen[bytes]:
        env = dict(os.environ)
        env["SOLID_TEST_DATABASE_NAME"] = str(connection.settings_dict["NAME"])
        env["SOLID_TEST_SETTINGS_JSON"] = json.dumps(settings or {})
        env.setdefault("SOLID_LOG", "INFO")
        env["PYTHONUNBUFFERED"] = "1"
        log = self.directory / f"child-{len(self.procs)}.log"
        with log.open("wb") as out:
            proc = subprocess.Popen(
                [sys.executable, "tests/manage.py", command, *args],
                cwd=REPO_ROOT,
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        proc.log_path = log  # type: ignore[attr-defined]
        self.procs.append(proc)
        return proc

    @staticmethod
    def log(proc: subprocess.Popen[bytes]) -> str:
        path: Path = proc.log_path  # type: ignore[attr-defined]
        return path.read_text(errors="replace") if path.exists() else ""

    def wait_registered(self, proc: subprocess.Popen[bytes], kinds: set[str]) -> list[Process]:
        """Wait until the child registered a running process row of every kind in ``kinds``
        (it starts its wake-up transport before registering, so it is then listening)."""

        def registered() -> list[Process] | None:
            if proc.poll() is not None:
                raise AssertionError(f"child exited with {proc.returncode}:\n{self.log(proc)}")
            rows = list(Process.objects.filter(pid=proc.pid, shutdown_state="running"))
            return rows if {row.kind for row in rows} >= kinds else None

        return wait_until(registered, what=f"child {proc.pid} to register {sorted(kinds)}")

    def terminate(self, proc: subprocess.Popen[bytes], timeout: float = PATIENCE) -> int:
        proc.send_signal(signal.SIGTERM)
        try:
            return proc.wait(timeout)
        except subprocess.TimeoutExpired:
            raise AssertionError(
                f"child {proc.pid} did not exit within {timeout}s:\n{self.log(proc)}"
            ) from None

    def kill_all(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait(10)


# -- counting statements across threads ----------------------------------------------------------
class StatementCounter:
    """Counts every statement sent through Django's cursors, from any thread."""

    def __init__(self) -> None:
        self.count = 0
        self.statements: list[tuple[str, str]] = []
        self._lock = threading.Lock()

    def record(self, sql: str) -> None:
        with self._lock:
            self.count += 1
            self.statements.append((threading.current_thread().name, sql))


@contextmanager
def counting_statements() -> Iterator[StatementCounter]:
    counter = StatementCounter()
    original_execute = backend_utils.CursorWrapper.execute
    original_executemany = backend_utils.CursorWrapper.executemany

    def execute(self: Any, sql: str, params: Any = None) -> Any:
        counter.record(sql)
        return original_execute(self, sql, params)

    def executemany(self: Any, sql: str, param_list: Any) -> Any:
        counter.record(sql)
        return original_executemany(self, sql, param_list)

    backend_utils.CursorWrapper.execute = execute  # type: ignore[method-assign]
    backend_utils.CursorWrapper.executemany = executemany  # type: ignore[method-assign]
    try:
        yield counter
    finally:
        backend_utils.CursorWrapper.execute = original_execute  # type: ignore[method-assign]
        backend_utils.CursorWrapper.executemany = original_executemany  # type: ignore[method-assign]


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(fraction * (len(ordered) - 1))))
    return ordered[index]
