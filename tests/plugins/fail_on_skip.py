"""Make skipped tests fail the run when ``SOLID_FAIL_ON_SKIP=1`` (CI sets it).

The product promises every behaviour on SQLite, PostgreSQL and MySQL/MariaDB, so in CI a test
that skips (a missing database driver, an unreachable server, a forgotten ``skipif``) hides a gap
in that promise. Loaded by ``make test`` with ``-p tests.plugins.fail_on_skip``; without the
environment variable (or ``--fail-on-skip``) it only adds the ``db_vendor`` marker.

What counts as a skip: a test whose setup or call reported skipped (``pytest.skip``,
``skipif``, ``importorskip``) and a module or class skipped at collection. ``xfail`` is not a
skip. When any is seen the exit status becomes 1 (``TESTS_FAILED``) unless it is already a
failure, and a section lists each skip with its reason.

Tests that only make sense on some databases should not skip elsewhere; mark them instead::

    @pytest.mark.db_vendor("postgresql", "mysql")   # Django vendor names: sqlite, postgresql, mysql
    def test_skip_locked_claims(): ...

They are *deselected* on other databases (shown as "deselected" in pytest's summary), which is
an honest "does not apply here" rather than a skip.
"""

from __future__ import annotations

import os

import pytest

ENV_VAR = "SOLID_FAIL_ON_SKIP"
VENDORS = ("sqlite", "postgresql", "mysql")


def _env_enabled() -> bool:
    return os.environ.get(ENV_VAR, "").strip().lower() not in ("", "0", "false", "no", "off")


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--fail-on-skip",
        action="store_true",
        default=False,
        help=f"treat skipped tests as failures (also enabled by {ENV_VAR}=1)",
    )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "db_vendor(*vendors): run only on these Django database vendors "
        "(sqlite, postgresql, mysql); deselected elsewhere instead of skipped",
    )
    if config.getoption("--fail-on-skip") or _env_enabled():
        # Skip reasons must show up in the short summary: add "s" unless "a"/"A" covers it.
        chars = config.option.reportchars or ""
        if not any(c in chars for c in "saA"):
            config.option.reportchars = chars + "s"
        config.pluginmanager.register(SkipGuard(), "solid-fail-on-skip")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    marked = [item for item in items if item.get_closest_marker("db_vendor")]
    if not marked:
        return
    from django.db import connections

    vendor = connections["default"].vendor
    deselected = []
    for item in marked:
        wanted = {v for m in item.iter_markers("db_vendor") for v in m.args}
        unknown = wanted - set(VENDORS)
        if unknown:
            raise pytest.UsageError(
                f"{item.nodeid}: unknown db_vendor {sorted(unknown)}; use {', '.join(VENDORS)}"
            )
        if vendor not in wanted:
            deselected.append(item)
    if deselected:
        chosen = set(map(id, deselected))
        items[:] = [item for item in items if id(item) not in chosen]
        config.hook.pytest_deselected(items=deselected)


class SkipGuard:
    """Collects skips and turns them into a failed exit status."""

    def __init__(self) -> None:
        self.skips: list[tuple[str, str]] = []

    def _record(self, report: pytest.CollectReport | pytest.TestReport) -> None:
        if not report.skipped or hasattr(report, "wasxfail"):
            return
        reason = ""
        if isinstance(report.longrepr, tuple) and len(report.longrepr) == 3:
            reason = str(report.longrepr[2])
        elif report.longrepr is not None:
            reason = str(report.longrepr).strip().splitlines()[-1]
        self.skips.append((report.nodeid, reason))

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        self._record(report)

    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        self._record(report)

    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        if not self.skips:
            return
        terminalreporter.section(f"skipped tests fail this run ({ENV_VAR}=1)", red=True)
        for nodeid, reason in self.skips:
            terminalreporter.line(f"SKIP IS FAILURE {nodeid}: {reason}", red=True)
        terminalreporter.line(
            "Every behaviour must be tested on every database: fix the cause, or mark a "
            "database-specific test with @pytest.mark.db_vendor(...) instead of skipping it."
        )

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        if self.skips and session.exitstatus == pytest.ExitCode.OK:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED
