"""``manage.py solid_objects_doctor``: is this deployment able to run actors?

Checks, in order (each ``ok``, ``warn`` or ``fail``; any ``fail`` makes the command exit
non-zero):

1. **configuration**: the ``solid_objects`` system checks (settings) pass;
2. **database**: vendor and version are supported (PostgreSQL 14+, MySQL 8.0+, MariaDB
   10.6+, SQLite 3.35+);
3. **schema**: the nine tables exist with the configured ``TABLE_PREFIX`` and no
   ``solid_objects`` migration is unapplied;
4. **wake-ups**: the configured transport answers its probe (a failure with ``"auto"`` only
   warns: workers fall back to polling);
5. **roles**: live processes per role kind; a stale one (heartbeat older than
   ``PROCESS_ALIVE_THRESHOLD``) warns, no live actor worker warns;
6. **round trip**: a real synchronous call to the internal diagnostic actor
   ``solid_objects.diagnostic`` (caller-assisted: it runs in this process through the
   normal enqueue, lease, fenced commit path), whose instance is destroyed afterwards.
"""

from __future__ import annotations

import os
import socket
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .actor import Actor, attribute
from .registry import register

OK, WARN, FAIL = "ok", "warn", "fail"
DIAGNOSTIC_TYPE = "solid_objects.diagnostic"
MINIMUM_VERSIONS = {
    "postgresql": (14,),
    "mysql": (8, 0),
    "mariadb": (10, 6),
    "sqlite": (3, 35),
}
TABLES = (
    "processes",
    "instances",
    "messages",
    "ready_messages",
    "claimed_messages",
    "reminders",
    "effects",
    "broadcasts",
    "dead_letters",
)


class DiagnosticActor(Actor):
    """Answers the doctor's ping; one short-lived instance per doctor run."""

    actor_type = DIAGNOSTIC_TYPE

    pings = attribute(default=0)

    def ping(self, nonce: str) -> dict[str, Any]:
        self.pings = self.pings + 1
        return {"nonce": nonce, "pings": self.pings}


register(DiagnosticActor)


@dataclass
class Finding:
    check: str
    status: str
    detail: str

    def as_dict(self) -> dict[str, str]:
        return {"check": self.check, "status": self.status, "detail": self.detail}


def run_checks(using: str | None = None, *, round_trip: bool = True) -> list[Finding]:
    """Every check, in order; a check that raises is reported as failed."""
    from .conf import get_settings

    alias = using or get_settings().DATABASE
    checks: list[tuple[str, Callable[[str], Finding]]] = [
        ("configuration", check_configuration),
        ("database", check_database),
        ("schema", check_schema),
        ("wake-ups", check_wake_ups),
        ("roles", check_roles),
    ]
    if round_trip:
        checks.append(("round trip", check_round_trip))
    findings = []
    for name, check in checks:
        try:
            findings.append(check(alias))
        except Exception as exc:
            findings.append(Finding(name, FAIL, f"{type(exc).__name__}: {exc}"))
        if name == "schema" and findings[-1].status == FAIL:
            break  # nothing below works without the tables
    return findings


def check_configuration(alias: str) -> Finding:
    from django.core.checks import ERROR, run_checks

    from .checks import TAG

    messages = run_checks(tags=[TAG])
    errors = [m for m in messages if m.level >= ERROR]
    if errors:
        return Finding("configuration", FAIL, "; ".join(str(m.msg) for m in errors))
    if messages:
        return Finding("configuration", WARN, "; ".join(str(m.msg) for m in messages))
    return Finding("configuration", OK, "SOLID_OBJECTS settings are valid")


def check_database(alias: str) -> Finding:
    from django.db import connections

    from .db.versions import database_version

    flavour, version = database_version(connections[alias])
    minimum = MINIMUM_VERSIONS.get(flavour)
    shown = ".".join(str(part) for part in version)
    if minimum is None:
        return Finding("database", FAIL, f"{flavour} is not supported")
    if version[: len(minimum)] < minimum:
        needed = ".".join(str(part) for part in minimum)
        return Finding("database", FAIL, f"{flavour} {shown} is too old (needs {needed}+)")
    return Finding("database", OK, f"{flavour} {shown} (alias {alias!r})")


def check_schema(alias: str) -> Finding:
    from django.db import connections
    from django.db.migrations.executor import MigrationExecutor

    from .conf import table

    connection = connections[alias]
    present = set(connection.introspection.table_names())
    missing = [table(name) for name in TABLES if table(name) not in present]
    if missing:
        return Finding(
            "schema", FAIL, f"missing tables {', '.join(missing)}: run manage.py migrate"
        )
    executor = MigrationExecutor(connection)
    plan = executor.migration_plan(executor.loader.graph.leaf_nodes())
    pending = [migration.name for migration, _ in plan if migration.app_label == "solid_objects"]
    if pending:
        return Finding("schema", FAIL, f"unapplied migrations: {', '.join(pending)}")
    return Finding("schema", OK, f"{len(TABLES)} tables with prefix {table('')!r}")


def check_wake_ups(alias: str) -> Finding:
    from .conf import get_settings
    from .runtime.wakeup.transports import probe

    result = probe(alias)
    if result.ok:
        took = "" if result.seconds is None else f" in {result.seconds * 1000:.1f} ms"
        return Finding("wake-ups", OK, f"{result.mode}: {result.detail}{took}")
    explicit = get_settings().WAKE_UP != "auto"
    return Finding(
        "wake-ups",
        FAIL if explicit else WARN,
        f"{result.mode} probe failed ({result.detail}); workers fall back to polling",
    )


def check_roles(alias: str) -> Finding:
    from .status import collect

    live = collect(alias)["processes"]["live"]
    kinds: dict[str, int] = {}
    stale = []
    for process in live:
        if process["stale"]:
            stale.append(f"{process['kind']} {process['hostname']}:{process['pid']}")
        elif process["kind"] != "caller":
            kinds[process["kind"]] = kinds.get(process["kind"], 0) + 1
    summary = ", ".join(f"{count} {kind}" for kind, count in sorted(kinds.items())) or "none"
    if stale:
        return Finding("roles", WARN, f"live: {summary}; stale: {', '.join(stale)}")
    if "worker" not in kinds:
        return Finding(
            "roles", WARN, f"live: {summary}; no actor worker is running (async messages wait)"
        )
    return Finding("roles", OK, f"live: {summary}")


def _forget_caller(alias: str) -> None:
    """Stop the caller registration the sync call made, so this short-lived command leaves
    no process row that later looks stale."""
    from .runtime import processes
    from .sync import caller_cache

    caller_cache.clear()
    process_id = processes.callers.process_id(alias)
    processes.callers.forget(alias)
    processes.deregister(process_id, alias)


def check_round_trip(alias: str) -> Finding:
    from .references import ActorReference

    actor_id = f"doctor-{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    reference: ActorReference[DiagnosticActor] = ActorReference(DiagnosticActor._spec, actor_id)
    nonce = uuid.uuid4().hex
    started = time.monotonic()
    try:
        result = reference.sync(timeout=10.0).ping(nonce)
        took = time.monotonic() - started
    finally:
        reference.destroy(using=alias)
        _forget_caller(alias)
    if result != {"nonce": nonce, "pings": 1}:
        return Finding("round trip", FAIL, f"unexpected result {result!r}")
    return Finding("round trip", OK, f"sync call committed and answered in {took * 1000:.1f} ms")
