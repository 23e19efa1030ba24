"""Connections of a worker process: each role's sessions named after it (PostgreSQL's
``application_name``, a MySQL/MariaDB session variable) and their server ids recorded in
the process rows (the MariaDB processlist shows no names), the connection budget and the
checks that warn when the configured pool cannot hold it."""

from __future__ import annotations

import logging
import re
import threading
from io import StringIO
from pathlib import Path
from typing import Any, ClassVar

import pytest
from django.conf import settings
from django.core.management import call_command
from django.db import connection, connections

from solid_objects.checks import check_pool_size
from solid_objects.models import Process
from solid_objects.runtime import connection_names, processes
from solid_objects.runtime.connection_budget import connections_needed, pool_max_size
from solid_objects.runtime.launch import build_supervisor
from solid_objects.runtime.roles import Role
from solid_objects.runtime.supervisor import Supervisor
from solid_objects.status import collect
from tests.operations.support import running
from tests.support.processes import REPO_ROOT, Commands
from tests.support.statements import counting_statements
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
            return found if len(found) >= 6 else None

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
        "solid_objects listener",  # the LISTEN connection, outside Django's
        "solid_objects worker actors-0",
        "solid_objects worker actors-1",
        "solid_objects effect effects-0",
        "solid_objects reminder reminders-0",
    }


#: docs/operations.md, "Connections": which process and role holds each session.
PROCESSLIST_QUERY = {
    "mysql": """
SELECT DISTINCT pl.ID, s.name AS role, p.hostname, p.pid, pl.COMMAND, pl.TIME, pl.STATE
FROM solid_objects_processes p
CROSS JOIN JSON_TABLE(p.metadata, '$.sessions[*]'
  COLUMNS (name VARCHAR(64) PATH '$.name', id BIGINT PATH '$.id')) s
JOIN information_schema.PROCESSLIST pl ON pl.ID = s.id
WHERE p.shutdown_state <> 'stopped';
""",
    "postgresql": """
SELECT DISTINCT a.pid, s.name AS role, p.hostname, p.pid, a.state, a.query_start
FROM solid_objects_processes p
CROSS JOIN jsonb_to_recordset(p.metadata -> 'sessions') AS s(name text, id int)
JOIN pg_stat_activity a ON a.pid = s.id
WHERE p.shutdown_state <> 'stopped';
""",
}
OWN_SESSION_ID = {"mysql": "SELECT CONNECTION_ID()", "postgresql": "SELECT pg_backend_pid()"}


class SessionProbe(Role):
    """Asks the server, from its own thread, for the id of its session."""

    name = "probe"
    kind = "worker"
    seen: ClassVar[dict[str, int]] = {}

    def run_once(self) -> bool:
        if "id" not in self.seen:
            with connections[self.alias].cursor() as cursor:
                cursor.execute(OWN_SESSION_ID[connections[self.alias].vendor])
                self.seen["id"] = int(cursor.fetchone()[0])
        return False


def one_line(sql: str) -> str:
    return re.sub(r"\s+", " ", sql).strip()


@pytest.mark.db_vendor("postgresql", "mysql")
def test_the_process_row_maps_each_role_to_its_database_session(vendor: str, solid_settings):
    solid_settings(PROCESS_HEARTBEAT_INTERVAL=0.2)
    SessionProbe.seen.clear()
    supervisor = Supervisor(roles=[(SessionProbe, 1)], install_signal_handlers=False)
    with running(supervisor):
        process_id = supervisor.process_ids["worker"]

        def recorded() -> dict[str, int] | None:
            metadata = Process.objects.get(pk=process_id).metadata
            found = {entry["name"]: entry["id"] for entry in metadata.get("sessions", [])}
            return found if "worker probe-0" in found and SessionProbe.seen else None

        sessions = wait_until(recorded, what="the role's session recorded in its process row")
        assert sessions["worker probe-0"] == SessionProbe.seen["id"]  # the role's own session
        assert "supervisor" in sessions
        if vendor == "postgresql":
            assert "listener" in sessions  # the LISTEN connection, outside Django's
        # The documented query finds each session in the server's list, with its role.
        with connection.cursor() as cursor:
            cursor.execute(PROCESSLIST_QUERY[vendor])
            listed = {(row[0], row[1]) for row in cursor.fetchall()}
            assert (SessionProbe.seen["id"], "worker probe-0") in listed
            assert {(session, name) for name, session in sessions.items()} <= listed
            if vendor == "postgresql":
                cursor.execute(
                    "SELECT application_name FROM pg_stat_activity WHERE pid = %s",
                    [SessionProbe.seen["id"]],
                )
                assert cursor.fetchone()[0] == "solid_objects worker probe-0"
            else:
                cursor.execute(
                    "SELECT ID FROM information_schema.PROCESSLIST WHERE ID = %s",
                    [sessions["worker probe-0"]],
                )
                assert cursor.fetchone() is not None
        # solid_objects_status shows them, in its table and in --json.
        (live,) = [p for p in collect()["processes"]["live"] if p["id"] == process_id]
        assert {"name": "worker probe-0", "id": SessionProbe.seen["id"]} in live["sessions"]
        out = StringIO()
        call_command("solid_objects_status", stdout=out)
        assert f"worker probe-0 {SessionProbe.seen['id']}" in out.getvalue()
        assert f"sessions of {live['hostname']}:{live['pid']}: " in out.getvalue()
    docs = one_line((REPO_ROOT / "docs" / "operations.md").read_text())
    assert one_line(PROCESSLIST_QUERY[vendor]) in docs  # the copy-paste query works


def test_the_recorder_writes_the_sessions_only_when_they_change():
    """``metadata["sessions"]`` joins the row's other keys; an unchanged list costs nothing."""
    rows = [processes.register(kind, "default") for kind in ("worker", "effect")]
    recorder = connection_names.SessionRecorder("default")
    assert recorder.update(rows) is False  # nothing recorded yet: nothing written
    connection_names.record("default", "worker actors-0", 4711)
    try:
        assert recorder.update(rows) is True
        for row in Process.objects.filter(pk__in=rows):
            assert row.metadata["sessions"] == [{"name": "worker actors-0", "id": 4711}]
            assert "library" in row.metadata  # the registration's keys are kept
        with counting_statements() as counter:
            assert recorder.update(rows) is False
        assert counter.count == 0
    finally:
        connection_names.drop("default", "worker actors-0")
    assert recorder.update(rows) is True  # the session closed: the list is emptied
    assert all(row.metadata["sessions"] == [] for row in Process.objects.filter(pk__in=rows))


def test_the_connection_budget_of_a_worker():
    assert connections_needed(1) == 3  # the actor thread, the supervisor, the watchdog
    assert connections_needed(0) == 1  # no actor threads: no batches, no watchdog
    # + effects, reminders, broadcasts, retention
    assert connections_needed(2, all_roles=True) == 8
    assert pool_max_size({"OPTIONS": {}}) is None
    assert pool_max_size({"OPTIONS": {"pool": True}}) == 4
    assert pool_max_size({"OPTIONS": {"pool": {"min_size": 2, "max_size": 12}}}) == 12
    # The supervisor's own count agrees with the documented formula.
    supervisor = build_supervisor(actor_threads=2, all_roles=True)
    watchdog = 1  # the actor threads' batches are watched
    assert len(supervisor.slots()) + 1 + len(supervisor.periodic) + watchdog == (
        connections_needed(2, True)
    )


def test_a_pool_too_small_for_a_worker_is_a_warning(monkeypatch, caplog):
    options = settings.DATABASES["default"].setdefault("OPTIONS", {})
    assert check_pool_size() == []
    monkeypatch.setitem(options, "pool", {"max_size": 4})  # no connection is opened meanwhile
    (warning,) = check_pool_size()
    assert warning.id == "solid_objects.W004"
    assert "--all-roles needs 7" in warning.msg and "N + 2" in warning.msg
    supervisor = build_supervisor(actor_threads=2, all_roles=True)
    with caplog.at_level(logging.WARNING, logger="solid_objects"):
        supervisor._warn_small_pool()
    assert "holds 4 connections but this worker keeps 8" in caplog.text
    monkeypatch.setitem(options, "pool", {"max_size": 7})
    assert check_pool_size() == []
