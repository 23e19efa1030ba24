"""``tests/manage.py`` commands in subprocesses, on the test database, with the environment
the suite uses; every process started is killed at the end of its test (:meth:`kill_all`,
run by the ``commands`` fixture of ``tests/conftest.py``).

Each process writes its output to a log file in the test's directory, so failures can show
what a process did: :meth:`Commands.log` and :meth:`Commands.logs`. A command that simply
runs to its end (``migrate``, ``shell -c``) is :func:`run`, its output captured.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from .waiting import PATIENCE, wait_until

REPO_ROOT = Path(__file__).resolve().parents[2]
MANAGE = "tests/manage.py"

Process = subprocess.Popen[bytes]


def environment(
    database_name: str,
    settings: Mapping[str, Any] | None = None,
    log_level: str | None = None,
    extra: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """The environment of a child of the suite: ``tests.settings`` on ``database_name`` with
    ``SOLID_OBJECTS`` overrides ``settings``, logging at ``log_level`` (``SOLID_LOG``, by
    default the caller's or INFO), unbuffered output; ``extra`` variables last."""
    env = dict(os.environ)
    env["SOLID_TEST_DATABASE_NAME"] = database_name
    env.setdefault("SOLID_TEST_SHARD_B_NAME", shard_b_database_name())
    env["SOLID_TEST_SETTINGS_JSON"] = json.dumps(dict(settings or {}))
    if log_level is None:
        env.setdefault("SOLID_LOG", "INFO")
    else:
        env["SOLID_LOG"] = log_level
    env["PYTHONUNBUFFERED"] = "1"
    env.setdefault("DJANGO_SETTINGS_MODULE", "tests.settings")
    env.update(extra or {})
    return env


def run(
    database_name: str,
    command: str,
    *args: str,
    settings: Mapping[str, Any] | None = None,
    timeout: float = 5 * PATIENCE,
) -> subprocess.CompletedProcess[str]:
    """Run ``tests/manage.py command *args`` on ``database_name`` to its end (with
    ``SOLID_OBJECTS`` overrides ``settings``) and return it, stdout and stderr captured
    apart; the caller checks ``returncode``."""
    return subprocess.run(
        [sys.executable, MANAGE, command, *args],
        cwd=REPO_ROOT,
        env=environment(database_name, settings),
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def shard_b_database_name() -> str:
    """The name of the second shard's database in this process (tests/settings.py)."""
    from django.db import connections

    return str(connections["shard_b"].settings_dict["NAME"])


def test_database_name() -> str:
    """The name of the database the tests of this process use."""
    from django.db import connection

    return str(connection.settings_dict["NAME"])


class Commands:
    """Starts ``tests/manage.py <command>`` subprocesses and keeps track of them.

    ``database_name`` is the database the children use (by default the test database of
    this process) and ``extra_environment`` adds variables (a private server's
    ``DATABASE_URL``, say).
    """

    def __init__(
        self,
        directory: Path,
        database_name: str | None = None,
        extra_environment: Mapping[str, str] | None = None,
    ) -> None:
        self.directory = directory
        self.database_name = database_name
        self.extra_environment = dict(extra_environment or {})
        self.procs: list[Process] = []
        self._logs: dict[int, Path] = {}

    # -- starting ------------------------------------------------------------------------------
    def environment(
        self, settings: Mapping[str, Any] | None = None, log_level: str | None = None
    ) -> dict[str, str]:
        return environment(
            self.database_name or test_database_name(), settings, log_level, self.extra_environment
        )

    def start(
        self,
        command: str,
        *args: str,
        settings: Mapping[str, Any] | None = None,
        log_level: str | None = None,
        prefix: Sequence[str] = (),
    ) -> Process:
        """Start ``tests/manage.py command *args`` with ``SOLID_OBJECTS`` overrides."""
        return self.start_program(
            [MANAGE, command, *args],
            name=command,
            settings=settings,
            log_level=log_level,
            prefix=prefix,
        )

    def start_program(
        self,
        argv: list[str],
        name: str,
        settings: Mapping[str, Any] | None = None,
        log_level: str | None = None,
        stdin: int | None = None,
        prefix: Sequence[str] = (),
    ) -> Process:
        """Start ``python *argv`` from the repository root in its own session (signals sent
        to the test run do not reach it), its output in ``<name>-<n>.log``. ``prefix`` runs
        it through a wrapper that ends by exec'ing it (``ip netns exec NAME``: the pid is
        the program's)."""
        log = self.directory / f"{name}-{len(self.procs)}.log"
        with log.open("wb") as out:
            proc = subprocess.Popen(
                [*prefix, sys.executable, *argv],
                cwd=REPO_ROOT,
                env=self.environment(settings, log_level),
                stdin=stdin,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        self._logs[proc.pid] = log
        self.procs.append(proc)
        return proc

    @contextmanager
    def running(
        self, command: str, *args: str, settings: Mapping[str, Any] | None = None
    ) -> Iterator[Process]:
        """:meth:`start` for the ``with`` block; killed when it ends, its log printed (shown
        by pytest) when the block raises."""
        proc = self.start(command, *args, settings=settings)
        try:
            yield proc
        except BaseException:
            self.kill(proc)
            print(f"--- output of {command} ---\n{self.log(proc)}")
            raise
        finally:
            self.kill(proc)

    # -- output ----------------------------------------------------------------------------------
    def log_path(self, proc: Process) -> Path:
        return self._logs[proc.pid]

    def log(self, proc: Process) -> str:
        """Everything ``proc`` wrote so far."""
        path = self.log_path(proc)
        return path.read_text(errors="replace") if path.exists() else ""

    def logs(self) -> str:
        return "\n".join(
            f"--- {self.log_path(p).stem} (pid {p.pid}) ---\n{self.log(p)}" for p in self.procs
        )

    # -- waiting and ending -----------------------------------------------------------------------
    def wait_registered(self, proc: Process, kinds: set[str]) -> list[Any]:
        """Wait until ``proc`` registered a running process row of every kind in ``kinds``
        (it starts its wake-up transport before registering, so it is then listening)."""
        from solid_objects.models import Process as ProcessRow

        def registered() -> list[ProcessRow] | None:
            if proc.poll() is not None:
                raise AssertionError(f"child exited with {proc.returncode}:\n{self.log(proc)}")
            rows = list(ProcessRow.objects.filter(pid=proc.pid, shutdown_state="running"))
            return rows if {row.kind for row in rows} >= kinds else None

        return wait_until(registered, what=f"child {proc.pid} to register {sorted(kinds)}")

    def wait_exit(self, proc: Process, timeout: float = PATIENCE) -> int:
        """Wait for ``proc`` to exit; its exit code (``-signal`` if a signal ended it)."""
        try:
            return proc.wait(timeout)
        except subprocess.TimeoutExpired:
            raise AssertionError(
                f"{proc.pid} did not exit within {timeout}s; log:\n{self.log(proc)}"
            ) from None

    def terminate(self, proc: Process, timeout: float = PATIENCE) -> int:
        """SIGTERM (a graceful stop) and wait for the exit code."""
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
        return self.wait_exit(proc, timeout)

    def kill(self, proc: Process) -> None:
        """SIGKILL, unless it already exited, and reap it."""
        if proc.poll() is None:
            proc.kill()
        proc.wait(30)

    def kill_all(self) -> None:
        for proc in self.procs:
            self.kill(proc)
