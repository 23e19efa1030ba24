"""Connections of a worker process: each role's sessions named after it (PostgreSQL's
``application_name``, a MySQL/MariaDB session variable), the connection budget and the
checks that warn when the configured pool cannot hold it."""

from __future__ import annotations

import logging
import threading
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings
from django.db import connection, connections

from solid_objects.checks import check_pool_size
from solid_objects.runtime import connection_names
from solid_objects.runtime.connection_budget import connections_needed, pool_max_size
from solid_objects.runtime.launch import build_supervisor
from tests.support.processes import Commands
from tests.support.waiting import wait_until

pytestmark = pytest.mark.django_db(transaction=True)


def session_name_seen_by_the_server(cursor: Any) -> str | None:
    if connection.vendor == "postgresql":
        cursor.execute("SELECT current_setting('application_name')")
    elif connection.vendor == "mysql":
        cursor.execute("SELECT @solid_objects_role")
    else:
        return None
    return str(cursor.fetchone()[0])


def test_a_thread_names_the_sessions_it_opens_and_forgets_afterwards(vendor: str):
    seen: dict[str, Any] = {}

    def thread() -> None:
        try:
            connection_names.use("worker actors-7")
            with connections["default"].cursor() as cursor:
                seen["named"] = session_name_seen_by_the_server(cursor)
            connections["default"].close()
            with connections["default"].cursor() as cursor:  # a reconnect is named again
                seen["reconnected"] = session_name_seen_by_the_server(cursor)
            connection_names.forget()
            connections["default"].close()
            with connections["default"].cursor() as cursor:
                seen["forgotten"] = session_name_seen_by_the_server(cursor)
        finally:
            connections["default"].close()

    worker = threading.Thread(target=thread)
    worker.start()
    worker.join(30)
    if vendor == "sqlite":  # no server, nothing to name
        assert seen == {"named": None, "reconnected": None, "forgotten": None}
        return
    assert seen["named"] == seen["reconnected"] == "solid_objects worker actors-7"
    assert seen["forgotten"] in {"", "None", None}
    with connection.cursor() as cursor:  # the test's own thread was never named
        assert session_name_seen_by_the_server(cursor) in {"", "None", None}


@pytest.mark.db_vendor("postgresql")
@pytest.mark.slow
def test_pg_stat_activity_names_every_connection_of_a_worker(tmp_path: Path):
    commands = Commands(tmp_path)
    try:
        proc = commands.start("run_actor_worker", "--all-roles", "--threads", "2")
        commands.wait_registered(proc, {"worker", "effect", "reminder", "broadcast"})

        def names() -> set[str] | None:
            with connection.cursor() as cursor:
                cursor.execute(
                    "SELECT application_name FROM pg_stat_activity WHERE datname = "
                    "current_database() AND application_name LIKE 'solid_objects %%'"
                )
                found = {row[0] for row in cursor.fetchall()}
            return found if len(found) >= 5 else None

        def seen() -> str:
            with connection.cursor() as cursor:
                cursor.execute("SELECT datname, application_name, state FROM pg_stat_activity")
                return repr(cursor.fetchall()) + commands.logs()

        found = wait_until(names, what="every role's connection to be named", details=seen)
    finally:
        commands.kill_all()
    # (without a Channels layer in the test settings the broadcast role idles without a
    # connection; with one it is "solid_objects broadcast broadcasts-0")
    assert found - {"solid_objects broadcast broadcasts-0"} == {
        "solid_objects supervisor",
        "solid_objects worker actors-0",
        "solid_objects worker actors-1",
        "solid_objects effect effects-0",
        "solid_objects reminder reminders-0",
    }


def test_the_connection_budget_of_a_worker():
    assert connections_needed(1) == 2  # the actor thread and the supervisor
    assert connections_needed(2, all_roles=True) == 7  # + effects, reminders, broadcasts, retention
    assert pool_max_size({"OPTIONS": {}}) is None
    assert pool_max_size({"OPTIONS": {"pool": True}}) == 4
    assert pool_max_size({"OPTIONS": {"pool": {"min_size": 2, "max_size": 12}}}) == 12
    # The supervisor's own count agrees with the documented formula.
    supervisor = build_supervisor(actor_threads=2, all_roles=True)
    assert len(supervisor.slots()) + 1 + len(supervisor.periodic) == connections_needed(2, True)


def test_a_pool_too_small_for_a_worker_is_a_warning(monkeypatch, caplog):
    options = settings.DATABASES["default"].setdefault("OPTIONS", {})
    assert check_pool_size() == []
    monkeypatch.setitem(options, "pool", {"max_size": 4})  # no connection is opened meanwhile
    (warning,) = check_pool_size()
    assert warning.id == "solid_objects.W004"
    assert "--all-roles needs 6" in warning.msg and "N + 1" in warning.msg
    supervisor = build_supervisor(actor_threads=2, all_roles=True)
    with caplog.at_level(logging.WARNING, logger="solid_objects"):
        supervisor._warn_small_pool()
    assert "holds 4 connections but this worker keeps 7" in caplog.text
    monkeypatch.setitem(options, "pool", {"max_size": 6})
    assert check_pool_size() == []
