"""``manage.py solid_objects_doctor``: is this deployment able to run actors?

Checks, in order (each ``ok``, ``warn`` or ``fail``; any ``fail`` makes the command exit
non-zero):

1. **configuration**: the ``solid_objects`` system checks (settings) pass;
2. **database**: vendor and version are supported (PostgreSQL 14+, MariaDB 10.6+, SQLite
   3.35+, tested in CI; MySQL 8.0+ expected to work, not tested in CI);
3. **schema**: the eleven tables exist with the configured ``TABLE_PREFIX`` and no
   ``solid_objects`` migration is unapplied;
4. **wake-ups**: the configured transport answers its probe (a failure with ``"auto"`` only
   warns: workers fall back to polling);
5. **copies**: no alias but ``DATABASE`` and the shards holds a copy of the tables
   (``migrate`` without :class:`~solid_objects.routers.SolidObjectsRouter` creates them on
   every alias; a copy misleads whoever reads it): a copy fails;
6. **roles**: live processes per role kind; a stale one (heartbeat older than
   ``PROCESS_ALIVE_THRESHOLD``) warns, a missing role kind warns (an idle caller, a web
   process that made sync calls, is not a role and never warns); a kind the deployment
   requires (``required_roles``: ``solid_objects_doctor --roles worker,effect``) with no
   live process fails;
7. **backlog**: work overdue by more than ``PROCESS_ALIVE_THRESHOLD`` (due mailbox
   messages, effects, broadcasts, reminders): overdue work nobody serves (its role is not
   running) fails, and so do pending broadcasts with no broadcast role to deliver them;
   overdue work with its role running warns (the role is behind);
8. **round trip**: a real synchronous call to the internal diagnostic actor
   ``solid_objects.diagnostic`` (caller-assisted: it runs in this process through the
   normal enqueue, lease, fenced commit path), whose instance is destroyed afterwards.

With shards (``SOLID_OBJECTS["DATABASES"]``) every check but configuration and copies runs
once per alias holding the tables, and each finding names its ``database``: a worker
registers its process rows on each shard it serves, so the roles and the backlog of a shard
are that shard's own (a shard no worker serves fails its backlog check), and the round trip
calls an actor that lives on that shard. ``--database ALIAS`` checks one alias only.
"""

from __future__ import annotations

import os
import socket
import time
import uuid
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, replace
from functools import partial
from itertools import count
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
    "rate_limits",
    "shard_agreement",
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
    #: The alias checked, for a check run once per shard (``None``: the whole deployment).
    database: str | None = None

    def as_dict(self) -> dict[str, str]:
        found = {"check": self.check, "status": self.status, "detail": self.detail}
        if self.database is not None:
            found["database"] = self.database
        return found


def run_checks(
    using: str | None = None,
    *,
    round_trip: bool = True,
    required_roles: Collection[str] = (),
) -> list[Finding]:
    """Every check, in order; a check that raises is reported as failed.

    ``using`` checks one alias; ``None`` checks ``DATABASE`` and, with shards, every alias
    of ``DATABASES`` (an alias holding no tables raises
    :class:`~solid_objects.errors.UnknownDatabase` before any check runs).
    ``required_roles``: role kinds (:data:`ROLE_KINDS`) whose absence fails the roles check
    instead of warning.
    """
    unknown = sorted(set(required_roles) - set(ROLE_KINDS))
    if unknown:
        raise ValueError(f"unknown role kind(s): {', '.join(unknown)}")
    from .routers import actor_aliases, require_actor_alias
    from .shards import databases

    aliases = (require_actor_alias(using),) if using is not None else actor_aliases()
    shards = set(databases())
    sharded = len(aliases) > 1

    def each(
        name: str, check: Callable[[str], Finding], over: Sequence[str] = aliases
    ) -> list[_Step]:
        return [_Step(name, check, alias, alias if sharded else None) for alias in over]

    head = [
        _Step("configuration", check_configuration, aliases[0]),
        *each("database", check_database),
        *each("schema", check_schema),
    ]
    tail = [
        *each("wake-ups", check_wake_ups),
        _Step("copies", check_copies, aliases[0]),
        *each("roles", partial(check_roles, required=frozenset(required_roles))),
        *each("backlog", check_backlog),
    ]
    if round_trip:  # an actor of each shard answers (a DATABASE that is no shard has none)
        tail.extend(each("round trip", check_round_trip, [a for a in aliases if a in shards]))
    findings = _run(head)
    if any(f.check == "schema" and f.status == FAIL for f in findings):
        return findings  # nothing below works without the tables
    return findings + _run(tail)


@dataclass(frozen=True)
class _Step:
    """One check to run on ``alias``; its finding names ``database`` when set (sharded)."""

    name: str
    check: Callable[[Any], Finding]
    alias: str | None
    database: str | None = None

    def run(self) -> Finding:
        try:
            finding = self.check(self.alias)
        except Exception as exc:
            finding = Finding(self.name, FAIL, f"{type(exc).__name__}: {exc}")
        return finding if self.database is None else replace(finding, database=self.database)


def _run(steps: list[_Step]) -> list[Finding]:
    return [step.run() for step in steps]


def check_configuration(alias: str) -> Finding:
    from django.core.checks import ERROR, WARNING, run_checks

    from .checks import TAG

    messages = [m for m in run_checks(tags=[TAG]) if not m.is_silenced()]
    errors = [m for m in messages if m.level >= ERROR]
    if errors:
        return Finding("configuration", FAIL, "; ".join(str(m.msg) for m in errors))
    warnings = [m for m in messages if m.level >= WARNING]
    if warnings:
        return Finding("configuration", WARN, "; ".join(str(m.msg) for m in warnings))
    notes = [m for m in messages if m.level < WARNING]  # infos: facts, not problems
    detail = "; ".join(["SOLID_OBJECTS settings are valid", *(str(m.msg) for m in notes)])
    return Finding("configuration", OK, detail)


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


#: The role kinds and what each serves (the ``processes.kind`` of their rows).
ROLE_KINDS = {
    "worker": "actor turns (run_actor_worker)",
    "effect": "effects and actor-to-actor messages (run_effect_worker)",
    "reminder": "reminders (run_reminder_scheduler)",
    "broadcast": "broadcasts (run_broadcast_worker)",
}


def check_copies(alias: str) -> Finding:
    """Aliases other than ``alias``, ``DATABASE`` and the shards holding a copy of the
    tables (introspection only)."""
    from django.conf import settings
    from django.db import connections

    from .conf import table
    from .routers import actor_aliases

    ours = {table(name) for name in TABLES}
    used = [alias, *(other for other in actor_aliases() if other != alias)]
    copies, unreachable = [], []
    for other in settings.DATABASES:
        if other in used:
            continue
        connection = connections[other]
        if connection.settings_dict.get("TEST", {}).get("MIRROR"):
            continue  # a test mirror is the same database under another name
        try:
            present = ours & set(connection.introspection.table_names())
        except Exception as exc:  # an alias that is down is not our problem here
            unreachable.append(f"{other} ({type(exc).__name__})")
            continue
        if present:
            copies.append(f"{other!r} ({len(present)} tables)")
    shown = ", ".join(repr(name) for name in used)
    if copies:
        return Finding(
            "copies",
            FAIL,
            f"the solid_objects tables also exist on {', '.join(copies)}; only {shown} "
            f"{'is' if len(used) == 1 else 'are'} used: add "
            "solid_objects.routers.SolidObjectsRouter to DATABASE_ROUTERS and drop the copies "
            "(manage.py migrate solid_objects zero --database ALIAS)",
        )
    suffix = f" (not reachable: {', '.join(unreachable)})" if unreachable else ""
    return Finding("copies", OK, f"tables only on {shown}{suffix}")


def _live_kinds(report: dict[str, Any]) -> tuple[dict[str, int], list[str]]:
    kinds: dict[str, int] = {}
    stale = []
    for process in report["processes"]["live"]:
        if process["kind"] == "caller":
            continue  # callers heartbeat only while they call: idle is normal
        if process["stale"]:
            stale.append(f"{process['kind']} {process['hostname']}:{process['pid']}")
        else:
            kinds[process["kind"]] = kinds.get(process["kind"], 0) + 1
    return kinds, stale


def check_roles(alias: str | None, required: Collection[str] = ()) -> Finding:
    """Live roles on ``alias`` (``None``: over every alias holding actors). A missing kind
    warns, unless it is ``required`` (stale processes do not count): then it fails."""
    from .status import report

    kinds, stale = _live_kinds(report(alias))
    summary = ", ".join(f"{count} {kind}" for kind, count in sorted(kinds.items())) or "none"
    problems = []
    if stale:
        problems.append(f"stale: {', '.join(stale)}")
    absent = [kind for kind in ROLE_KINDS if kind not in kinds]
    missing = [kind for kind in absent if kind in required]
    if missing:
        problems.append(
            "required but not running: "
            + "; ".join(f"{kind} ({ROLE_KINDS[kind]})" for kind in missing)
        )
    optional = [kind for kind in absent if kind not in required]
    if optional:
        problems.append(
            "not running: "
            + "; ".join(f"{kind} ({ROLE_KINDS[kind]})" for kind in optional)
            + " (run_actor_worker --all-roles runs every role)"
        )
    if problems:
        status = FAIL if missing else WARN
        return Finding("roles", status, f"live: {summary}; {'; '.join(problems)}")
    return Finding("roles", OK, f"live: {summary}")


def _shown(seconds: float) -> str:
    return f"{seconds:.0f}s" if seconds < 120 else f"{seconds / 60:.0f}m"


def check_backlog(alias: str | None) -> Finding:
    """Overdue work on ``alias`` (``None``: the totals over every alias holding actors)."""
    from .conf import get_settings
    from .status import report as status_report

    report = status_report(alias)
    kinds, _ = _live_kinds(report)
    threshold = get_settings().PROCESS_ALIVE_THRESHOLD
    mailbox, outbox, reminders = report["mailbox"], report["outbox"], report["reminders"]
    work = [
        ("worker", "mailbox messages", mailbox["due"], mailbox["lag_seconds"]),
        ("effect", "effects", outbox["effects"]["due"], outbox["effects"]["lag_seconds"]),
        (
            "broadcast",
            "broadcasts",
            outbox["broadcasts"]["due"],
            outbox["broadcasts"]["lag_seconds"],
        ),
        ("reminder", "reminders", reminders["due"], reminders["lag_seconds"]),
    ]
    unserved, behind = [], []
    for kind, what, due, lag in work:
        overdue = bool(due) and lag is not None and lag > threshold
        if kind == "broadcast" and outbox["broadcasts"]["pending"] and kind not in kinds:
            unserved.append(
                f"{outbox['broadcasts']['pending']} broadcasts pending and no broadcast role "
                "delivers them"
            )
        elif overdue and kind not in kinds:
            unserved.append(f"{due} {what} overdue by {_shown(lag)} and no {kind} role running")
        elif overdue:
            behind.append(f"{due} {what} overdue by {_shown(lag)}")
    if unserved:
        return Finding("backlog", FAIL, "; ".join(unserved + behind))
    if behind:
        return Finding("backlog", WARN, "; ".join(behind) + " (the roles are behind)")
    return Finding("backlog", OK, f"nothing overdue by more than {_shown(threshold)}")


def _forget_caller(alias: str) -> None:
    """Stop the caller registration the sync call made, so this short-lived command leaves
    no process row that later looks stale."""
    from .runtime import processes
    from .sync import caller_cache

    caller_cache.clear()
    process_id = processes.callers.process_id(alias)
    processes.callers.forget(alias)
    processes.deregister(process_id, alias)


def _actor_id_on(alias: str) -> str:
    """A fresh diagnostic actor id that lives on ``alias`` (any id when ``alias`` is not a
    shard: the call then goes to whichever shard the id hashes to)."""
    from .shards import database_for, databases

    base = f"doctor-{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    if alias not in databases() or len(databases()) == 1:
        return base
    return next(
        candidate
        for candidate in (base if n == 0 else f"{base}-{n}" for n in count())
        if database_for(DIAGNOSTIC_TYPE, candidate) == alias
    )


def check_round_trip(alias: str) -> Finding:
    from .references import ActorReference

    actor_id = _actor_id_on(alias)
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
