"""Idle cost (FIGURES.md: at most about one query a second per role once backed off): an
``--all-roles`` supervisor with nothing to do, measured statement by statement."""

from __future__ import annotations

import threading
import time
from collections import Counter

import pytest
from django.db import connection
from django.db.backends.base.base import BaseDatabaseWrapper

from solid_objects.runtime.launch import build_supervisor
from tests.operations.support import running
from tests.support.statements import counting_statements

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

WARM_UP = 2.6  # polls at +0, 0.1, 0.3, 0.7, 1.5, 2.5 s: backed off to 1 s by then
WINDOW = 6.0


def test_an_idle_all_roles_worker_costs_about_one_statement_a_second_per_role(
    solid_settings, monkeypatch, settings
):
    settings.CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}
    solid_settings(  # the production defaults, not the fast ones of the test settings
        PROCESS_HEARTBEAT_INTERVAL=15.0, PROCESS_ALIVE_THRESHOLD=60.0, LEASE_RENEWAL_INTERVAL=10.0
    )
    commits = Counter[str]()
    original_commit = BaseDatabaseWrapper.commit

    def counted_commit(self: BaseDatabaseWrapper) -> None:
        commits[threading.current_thread().name] += 1
        original_commit(self)

    supervisor = build_supervisor(all_roles=True, alias=connection.alias)
    supervisor.install_signal_handlers = False
    roles = sum(count for _, count in supervisor.roles)
    with running(supervisor):
        time.sleep(WARM_UP)
        monkeypatch.setattr(BaseDatabaseWrapper, "commit", counted_commit)
        with counting_statements() as counter:
            time.sleep(WINDOW)
        monkeypatch.undo()
    per_thread = Counter(name for name, _ in counter.statements)
    total = counter.count + sum(commits.values())
    rate = total / WINDOW / roles
    print(  # the figure this test exists to show
        f"\nidle --all-roles on {connection.vendor}: {total} statements+commits in {WINDOW:.0f}s "
        f"= {rate:.2f}/s per role ({roles} roles); by thread: {dict(per_thread)}, "
        f"commits: {dict(commits)}"
    )
    assert rate <= 1.25, counter.statements
