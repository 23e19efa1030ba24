"""Shared by the outbox and reminder tests: fresh caller state, polling with a deadline and
worker subprocesses that are always killed."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

import pytest
from django.db import connection

REPO = Path(__file__).resolve().parents[2]
T = TypeVar("T")


@pytest.fixture(autouse=True)
def fresh_caller_state() -> Iterator[None]:
    """Tests flush the tables: forget the caller's cached process row and warm actors."""
    from solid_objects.runtime.processes import callers
    from solid_objects.sync import caller_cache

    callers.forget(connection.alias)
    caller_cache.clear()
    yield
    callers.forget(connection.alias)
    caller_cache.clear()


def wait_until(predicate: Callable[[], T], timeout: float = 30.0, what: str = "condition") -> T:
    """Poll ``predicate`` (database rows, files) until it returns something truthy."""
    deadline = time.monotonic() + timeout
    pause = threading.Event()
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        pause.wait(0.05)


class Worker:
    """A ``tests/manage.py`` command in a subprocess, its output in a log file."""

    def __init__(self, process: subprocess.Popen[bytes], log: Path) -> None:
        self.process = process
        self.log = log

    @property
    def pid(self) -> int:
        return self.process.pid

    def output(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
        self.process.wait(30)

    def stop(self, timeout: float = 30.0) -> int:
        """SIGTERM (graceful) and wait; returns the exit code."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        return self.process.wait(timeout)


@contextmanager
def worker(command: str, *args: str, settings: dict[str, Any] | None = None) -> Iterator[Worker]:
    """Start ``manage.py <command>`` on the test database; always killed on exit."""
    env = {
        **os.environ,
        "SOLID_TEST_DATABASE_NAME": str(connection.settings_dict["NAME"]),
        "PYTHONUNBUFFERED": "1",
    }
    if settings:
        env["SOLID_TEST_SETTINGS_JSON"] = json.dumps(settings)
    handle, name = tempfile.mkstemp(prefix=f"{command}-", suffix=".log")
    log = Path(name)
    with os.fdopen(handle, "wb") as out:
        process = subprocess.Popen(
            [sys.executable, "tests/manage.py", command, *args],
            cwd=REPO,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    running = Worker(process, log)
    try:
        yield running
    except BaseException:
        running.kill()
        print(f"--- output of {command} ---\n{running.output()}")  # shown when the test fails
        raise
    finally:
        running.kill()
        log.unlink(missing_ok=True)
