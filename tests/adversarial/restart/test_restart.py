"""Database restarts under load (issue 9): a private PostgreSQL / MariaDB server, started by
the test, is restarted fast and immediate, three times each, while two ``run_actor_worker``
processes (one with two actor threads) run enqueued messages and a load process makes sync
calls and enqueues (see :mod:`.harness`).

What must hold:

- the workers reconnect by themselves: the same processes, never restarted, under the same
  registry rows, keep completing messages after every restart and exit 0 on SIGTERM;
- nothing is lost or doubled: each actor's state lists each of its numbers exactly once and
  in order, each message is completed, ``state_revision`` is the last sequence, and no
  ready, claimed or dead-lettered row is left;
- calls during an outage fail with a typed error (``DatabaseUnavailable``, or
  ``SyncTimeout``), never a raw driver error, and the same process's calls work right after
  the server is back, without anyone calling ``close_old_connections()``.

The figures are printed and merged into ``SOLID_RESTART_REPORT`` when it is set.
"""

from __future__ import annotations

import pytest

from .harness import Run, figures, merge_report, summary, violations

pytestmark = pytest.mark.restart


def check_restarts(run: Run, vendor: str, capsys: pytest.CaptureFixture[str]) -> None:
    run.execute()
    rows_before = run.worker_rows
    run.stop_load()
    run.drain()
    assert all(proc.poll() is None for proc in run.workers), run.logs()
    assert run.running_worker_rows() == rows_before, "a worker was re-registered or stopped"
    claims = run.claims_since_last_restart()
    assert all(claims.values()), f"a worker claimed nothing after the last restart: {claims}"
    found = violations(run)
    result = figures(run, vendor)
    merge_report(result)
    with capsys.disabled():
        print(f"\n{summary(result)}")
    assert run.stop_workers() == [0, 0], run.logs()
    assert not found, "\n".join(found)
    assert result["typed_failures_overlapping_an_outage"] > 0, "no call met an outage"
    assert result["raw_errors"] == 0


@pytest.mark.db_vendor("postgresql")
def test_postgresql_restarts_under_load(postgres_run: Run, capsys: pytest.CaptureFixture[str]):
    check_restarts(postgres_run, "postgresql", capsys)


@pytest.mark.db_vendor("mysql")
def test_mariadb_restarts_under_load(mariadb_run: Run, capsys: pytest.CaptureFixture[str]):
    check_restarts(mariadb_run, "mariadb", capsys)
