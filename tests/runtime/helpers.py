"""Helpers of the runtime tests: retry policies named in settings, raw row inspection,
threads that clean up their connections, and worker subprocesses."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from django.db import close_old_connections, connection, connections

from solid_objects.models import (
    ClaimedMessage,
    DeadLetter,
    Instance,
    Message,
    ReadyMessage,
)

REPO_ROOT = Path(__file__).resolve().parents[2]
#: Upper bound of any wait in these tests (the machine is shared and slow).
PATIENCE = 60.0


# -- RETRY_DELAY policies (dotted paths in settings) ------------------------------------------
def no_delay(attempt: int) -> float:
    return 0.0


def long_delay(attempt: int) -> float:
    return 3600.0


# -- waiting -----------------------------------------------------------------------------------
def wait_until(
    predicate: Callable[[], Any], timeout: float = PATIENCE, interval: float = 0.05, what: str = ""
) -> Any:
    """Poll ``predicate`` (usually a database read) until it is truthy; fail after ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what or predicate}")
        threading.Event().wait(interval)


# -- rows ---------------------------------------------------------------------------------------
def instance_of(actor_type: str, actor_id: str) -> Instance | None:
    return Instance.objects.filter(actor_type=actor_type, actor_id=actor_id).first()


def messages_of(instance_id: int) -> list[Message]:
    return list(Message.objects.filter(instance_id=instance_id).order_by("sequence"))


def membership(message_id: int) -> str:
    """Which table the message is in: ready, claimed, dead or done."""
    if ReadyMessage.objects.filter(message_id=message_id).exists():
        return "ready"
    if ClaimedMessage.objects.filter(message_id=message_id).exists():
        return "claimed"
    if DeadLetter.objects.filter(message_id=message_id).exists():
        return "dead"
    return "done"


def snapshot_rows(instance_id: int) -> dict[str, Any]:
    """Everything a commit could change for one instance, for before/after comparisons."""
    instance = Instance.objects.filter(id=instance_id).values().first()
    return {
        "instance": instance,
        "messages": list(Message.objects.filter(instance_id=instance_id).order_by("id").values()),
        "ready": list(ReadyMessage.objects.filter(instance_id=instance_id).values()),
        "claimed": list(ClaimedMessage.objects.filter(instance_id=instance_id).values()),
        "dead": list(DeadLetter.objects.filter(instance_id=instance_id).values()),
    }


# -- threads -------------------------------------------------------------------------------------
class Worker(threading.Thread):
    """A thread running ``target``; keeps its result or exception and closes its connections."""

    def __init__(self, target: Callable[[], Any], name: str = "test-worker") -> None:
        super().__init__(name=name, daemon=True)
        self._target_fn = target
        self.result: Any = None
        self.error: BaseException | None = None
        self.done = threading.Event()

    def run(self) -> None:
        try:
            self.result = self._target_fn()
        except BaseException as exc:  # reported to the test
            self.error = exc
        finally:
            for alias in connections:
                connections[alias].close()
            close_old_connections()
            self.done.set()

    def outcome(self, timeout: float = PATIENCE) -> Any:
        """Join; return the result or re-raise the thread's exception."""
        self.join(timeout)
        if self.is_alive():
            raise AssertionError(f"thread {self.name} did not finish within {timeout}s")
        if self.error is not None:
            raise self.error
        return self.result


def start_thread(target: Callable[[], Any], name: str = "test-worker") -> Worker:
    worker = Worker(target, name)
    worker.start()
    return worker


# -- worker subprocesses ---------------------------------------------------------------------------
class WorkerProcesses:
    """Starts ``manage.py run_actor_worker`` subprocesses on the test database and always
    kills what is left of them (:meth:`kill_all`, called by the fixture's finalizer)."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.procs: list[subprocess.Popen[bytes]] = []

    def start(self, *args: str, settings: dict[str, Any] | None = None) -> subprocess.Popen[bytes]:
        env = dict(os.environ)
        env["SOLID_TEST_DATABASE_NAME"] = str(connection.settings_dict["NAME"])
        env["SOLID_TEST_SETTINGS_JSON"] = json.dumps(settings or {})
        env.setdefault("SOLID_LOG", "INFO")
        env["PYTHONUNBUFFERED"] = "1"
        index = len(self.procs)
        out = open(self.directory / f"worker-{index}.log", "wb")  # noqa: SIM115
        proc = subprocess.Popen(
            [sys.executable, "tests/manage.py", "run_actor_worker", *args],
            cwd=REPO_ROOT,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        out.close()
        proc.log_path = self.directory / f"worker-{index}.log"  # type: ignore[attr-defined]
        self.procs.append(proc)
        return proc

    @staticmethod
    def log(proc: subprocess.Popen[bytes]) -> str:
        path: Path = proc.log_path  # type: ignore[attr-defined]
        return path.read_text(errors="replace") if path.exists() else ""

    def wait_exit(self, proc: subprocess.Popen[bytes], timeout: float = PATIENCE) -> int:
        try:
            return proc.wait(timeout)
        except subprocess.TimeoutExpired:
            raise AssertionError(
                f"worker {proc.pid} did not exit within {timeout}s; log:\n{self.log(proc)}"
            ) from None

    def kill_all(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait(10)

    def logs(self) -> str:
        return "\n".join(f"--- worker {p.pid} ---\n{self.log(p)}" for p in self.procs)


# -- driving activations in-process, like a worker ---------------------------------------------
def alias() -> str:
    from solid_objects.conf import get_settings

    return get_settings().DATABASE


def run_once(instance_id: int, owner: str, **options: Any) -> Any:
    """Lease the instance as ``owner`` and run one activation pass; ``None`` if it could not
    be leased (taken, paused, or nothing due)."""
    from solid_objects.activation import acquire, run_pass

    activation = acquire(alias(), owner, [instance_id])
    if activation is None:
        return None
    return run_pass(activation, **options)


def drain(instance_id: int, owner: str, passes: int = 50) -> int:
    """Run passes until nothing is due for the instance; return how many turns ran."""
    processed = 0
    for _ in range(passes):
        result = run_once(instance_id, owner)
        if result is None:
            return processed
        processed += result.processed
    raise AssertionError(f"instance {instance_id} still has due work after {passes} passes")
