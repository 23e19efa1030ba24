"""``run_actor_worker --reload``: a changed Python file stops the worker gracefully and
starts a fresh one; SIGTERM to the command stops everything with exit code 0."""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from pathlib import Path

import pytest

from solid_objects.models import Process
from solid_objects.runtime import reloading
from tests.support.processes import REPO_ROOT, Commands
from tests.support.waiting import wait_until

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]
WATCHED = REPO_ROOT / "tests" / "testapp" / "__init__.py"  # imported by every worker


def running_workers() -> list[Process]:
    return list(Process.objects.filter(kind="worker", shutdown_state="running"))


def test_a_changed_module_reloads_the_worker_gracefully(tmp_path: Path):
    commands = Commands(tmp_path)
    try:
        proc = commands.start("run_actor_worker", "--reload")
        (first,) = wait_until(running_workers, what="the first worker to register")
        assert first.pid != proc.pid  # the worker runs in a child of the command
        stat = WATCHED.stat()
        os.utime(WATCHED, (stat.st_atime, time.time() + 5))
        try:
            (second,) = wait_until(
                lambda: [p for p in running_workers() if p.pid != first.pid] or None,
                what="a fresh worker after the change",
                details=lambda: commands.log(proc),
            )
            first.refresh_from_db()
            assert first.shutdown_state == "stopped"  # marked stopped by its own shutdown
            assert commands.terminate(proc) == 0
        finally:
            # Put back only once the fresh worker is gone: its watcher would take the
            # restored time for one more change.
            os.utime(WATCHED, (stat.st_atime, stat.st_mtime))
        second.refresh_from_db()
        assert second.shutdown_state == "stopped"
        log = commands.log(proc)
    finally:
        commands.kill_all()
    assert "changed: reloading the worker" in log
    assert log.count("solid_objects worker started") == 2
    assert log.count("solid_objects worker stopped") == 2


def test_without_debug_there_is_no_reloader(tmp_path: Path):
    commands = Commands(tmp_path)
    try:
        proc = commands.start("run_actor_worker")
        (worker,) = wait_until(running_workers, what="the worker to register")
        assert worker.pid == proc.pid  # no parent/child pair
        assert commands.terminate(proc) == 0
    finally:
        commands.kill_all()


def debug_commands(tmp_path: Path) -> Commands:
    """Children with ``DEBUG = True`` (tests/settings.py reads ``SOLID_TEST_DEBUG``)."""
    return Commands(tmp_path, extra_environment={"SOLID_TEST_DEBUG": "1"})


def test_with_debug_the_reloader_is_on_by_default(tmp_path: Path):
    commands = debug_commands(tmp_path)
    try:
        proc = commands.start("run_actor_worker")
        (worker,) = wait_until(
            running_workers, what="the worker to register", details=lambda: commands.log(proc)
        )
        assert worker.pid != proc.pid  # the command is the reloader's parent
        assert commands.terminate(proc) == 0
        worker.refresh_from_db()
        assert worker.shutdown_state == "stopped"  # SIGTERM reached the child
    finally:
        commands.kill_all()


def test_with_debug_noreload_turns_the_reloader_off(tmp_path: Path):
    commands = debug_commands(tmp_path)
    try:
        proc = commands.start("run_actor_worker", "--noreload")
        (worker,) = wait_until(
            running_workers, what="the worker to register", details=lambda: commands.log(proc)
        )
        assert worker.pid == proc.pid  # no parent/child pair
        assert commands.terminate(proc) == 0
    finally:
        commands.kill_all()


CHILD_ASKING_FOR_A_RELOAD_ON_SIGTERM = """
import pathlib, signal, sys, time
signal.signal(signal.SIGTERM, lambda *_: sys.exit(3))  # 3: the reload code
with open(sys.argv[1], "a") as starts:
    starts.write("started\\n")
time.sleep(10)
"""


def test_a_signal_ends_the_parent_even_if_the_child_then_asks_for_a_reload(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    """A change seen while SIGTERM stops the child makes it exit with the reload code;
    the parent must still stop instead of starting a fresh worker nobody asked for."""
    starts = tmp_path / "starts"
    monkeypatch.setattr(
        reloading.autoreload,
        "get_child_arguments",
        lambda: [sys.executable, "-c", CHILD_ASKING_FOR_A_RELOAD_ON_SIGTERM, str(starts)],
    )

    def terminate_once_started() -> None:
        wait_until(starts.exists, what="the child to start")
        os.kill(os.getpid(), signal.SIGTERM)  # to the parent: this test's process

    sender = threading.Thread(target=terminate_once_started)
    sender.start()
    try:
        assert reloading.run_parent() == 0
    finally:
        sender.join()
    assert starts.read_text().splitlines() == ["started"]
