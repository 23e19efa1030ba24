"""The progress bars of the long commands, on a real terminal (a pseudo-terminal) and off
one: drawn in place on the real stderr (not one red line per refresh through Django's
``OutputWrapper``), with log lines written above the bar, and nothing at ``--verbosity 0``
or on a pipe. (``activity_rebuild``: tests/activity/test_rebuild_progress.py.)"""

from __future__ import annotations

import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import pytest
from django.utils import timezone

from tests.factories import MessageFactory
from tests.support.processes import REPO_ROOT, environment
from tests.support.processes import test_database_name as database_name
from tests.support.terminal import RED, run_on_terminal, screen

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]


def old_messages(count: int) -> None:
    long_ago = timezone.now() - timedelta(days=90)
    MessageFactory.create_batch(count, completed_at=long_ago)


def test_prune_draws_one_bar_in_place_and_logs_above_it():
    old_messages(30)
    code, output = run_on_terminal(
        "prune_solid_objects", "--messages", "--execute", "--batch-size", "5"
    )
    assert code == 0, output
    assert RED not in output  # not written through the stderr OutputWrapper
    lines = screen(output)
    bars = [line for line in lines if line.startswith("messages:") and "rows" in line]
    assert len(bars) == 1 and "100%" in bars[0] and "30/30" in bars[0], lines
    log = lines.index("retention pruned 30 messages, 0 instances, 0 processes")
    assert lines.index(bars[0]) == log + 1, lines  # the log line above the bar, whole
    assert output.replace("\r\n", "\n").count("\r") > 3  # refreshed in place
    assert "messages: 30 deleted" in output


def test_a_project_logging_through_the_root_logger_does_not_cut_the_bar(monkeypatch):
    """Only the root logger has a (console) handler: its lines go above the bar too, once."""
    monkeypatch.setenv("SOLID_TEST_ROOT_LOGGING", "1")  # tests/settings.py
    old_messages(30)
    code, output = run_on_terminal(
        "prune_solid_objects", "--messages", "--execute", "--batch-size", "5"
    )
    assert code == 0, output
    lines = screen(output)
    logged = "retention pruned 30 messages, 0 instances, 0 processes"
    assert lines.count(logged) == 1, lines  # whole, and not printed twice
    bars = [line for line in lines if line.startswith("messages:") and "rows" in line]
    assert len(bars) == 1 and "30/30" in bars[0], lines
    assert lines.index(bars[0]) == lines.index(logged) + 1, lines  # the log line above the bar


def test_no_bar_at_verbosity_0_or_on_a_pipe(tmp_path: Path):
    old_messages(3)
    code, output = run_on_terminal(
        "prune_solid_objects", "--messages", "--execute", "--verbosity", "0"
    )
    assert code == 0, output
    assert "\r" not in output.replace("\r\n", "\n") and "rows" not in output, output
    old_messages(3)
    piped = subprocess.run(
        [sys.executable, "tests/manage.py", "prune_solid_objects", "--messages", "--execute"],
        cwd=REPO_ROOT,
        env=environment(database_name()),
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert "\r" not in piped.stderr and "messages: 3 deleted" in piped.stdout
