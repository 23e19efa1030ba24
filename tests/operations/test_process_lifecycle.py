"""A worker says once that it started and once that it stopped, whether or not the project
configured logging; a quiet sync caller is not reported like a crashed worker."""

from __future__ import annotations

import logging
from datetime import timedelta
from pathlib import Path

import pytest
from django.utils import timezone

from solid_objects.runtime import processes
from tests.factories import ProcessFactory
from tests.support.processes import Commands

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]


@pytest.mark.parametrize("plain", [True, False], ids=["no-logging-configured", "logging-info"])
def test_a_worker_logs_one_start_line_and_one_stop_line(tmp_path: Path, plain: bool):
    extra = {"SOLID_TEST_PLAIN_LOGGING": "1"} if plain else {}
    commands = Commands(tmp_path, extra_environment=extra)
    try:
        proc = commands.start("run_actor_worker", "--threads", "2", "--all-roles")
        commands.wait_registered(proc, {"worker", "effect", "reminder", "broadcast"})
        assert commands.terminate(proc) == 0
        log = commands.log(proc)
    finally:
        commands.kill_all()
    (start,) = [line for line in log.splitlines() if "solid_objects worker started" in line]
    (stop,) = [line for line in log.splitlines() if "solid_objects worker stopped" in line]
    assert f"pid {proc.pid}" in start and f"pid {proc.pid}" in stop
    assert "roles actors x2, effects, reminders, broadcasts" in start
    assert "database 'default'" in start


def test_cleanup_reports_a_quiet_caller_as_idle_and_a_silent_worker_as_dead(caplog, solid_settings):
    solid_settings(PROCESS_ALIVE_THRESHOLD=5.0)
    long_ago = timezone.now() - timedelta(minutes=5)
    caller = ProcessFactory(kind="caller", last_heartbeat_at=long_ago)
    worker = ProcessFactory(kind="worker", last_heartbeat_at=long_ago)
    with caplog.at_level(logging.INFO, logger="solid_objects"):
        assert sorted(processes.cleanup_dead("default")) == sorted([caller.id, worker.id])
    by_level = {(r.levelno, r.getMessage()) for r in caplog.records if r.name == "solid_objects"}
    assert (
        logging.INFO,
        f"sync caller {caller.id} has been idle; its registration was closed",
    ) in by_level
    assert (
        logging.WARNING,
        f"worker process {worker.id} stopped heartbeating; its work was released",
    ) in by_level
    assert not any(caller.id in message for level, message in by_level if level >= logging.WARNING)
