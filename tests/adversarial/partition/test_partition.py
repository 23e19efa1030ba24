"""A network partition mid-turn (PRODUCT §A6, §A8): two ``run_actor_worker`` processes, each
in a network namespace of its own, on a private PostgreSQL / MariaDB server; host A's link is
cut while it holds actors mid-turn (see :mod:`.harness` for the steps).

What must hold:

- host B takes every actor A held over once A's lease has run out (the takeover time is
  measured and printed), and runs everything enqueued during the cut;
- when the link returns, A's late commits of those turns are refused by the fence
  (``LostActivation``): A commits nothing stale, then registers afresh and, once B has
  stopped, runs all the work that follows;
- every message is applied exactly once and in order (each actor's state lists each number
  once, the result of each message matches it, ``state_revision`` is the last sequence),
  each turn has exactly one effect row, every effect is delivered, and no ready, claimed or
  dead-lettered row is left; both workers exit 0 on SIGTERM.

SQLite has no network: the test runs on PostgreSQL and MariaDB only. The figures are printed
and merged into ``SOLID_PARTITION_REPORT`` when it is set.
"""

from __future__ import annotations

import pytest

from .harness import TAKEOVER_BOUND, Partition, figures, merge_report, summary, violations

pytestmark = pytest.mark.partition


def check_partition(run: Partition, vendor: str, capsys: pytest.CaptureFixture[str]) -> None:
    run.execute()
    found = violations(run)
    result = figures(run, vendor)
    merge_report(result)
    with capsys.disabled():
        print(f"\n{summary(result)}")
    assert run.exit_codes == {"hostA": 0, "hostB": 0}, run.logs()
    assert not found, "\n".join(found)
    assert result["a_claims_after_restore"] > 0, "host A took no work after the link returned"
    slow = {actor: t for actor, t in run.takeovers.items() if t > TAKEOVER_BOUND}
    assert not slow, f"takeovers slower than {TAKEOVER_BOUND} s: {slow}"


@pytest.mark.db_vendor("postgresql")
def test_postgresql_partition_mid_turn(
    postgres_partition: Partition, capsys: pytest.CaptureFixture[str]
):
    check_partition(postgres_partition, "postgresql", capsys)


@pytest.mark.db_vendor("mysql")
def test_mariadb_partition_mid_turn(
    mariadb_partition: Partition, capsys: pytest.CaptureFixture[str]
):
    check_partition(mariadb_partition, "mariadb", capsys)
