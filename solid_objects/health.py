"""An HTTP health check for load balancers and orchestrators.

``GET <prefix>/health/`` answers ``200`` with ``{"status": "ok", ...}`` when the actors'
database answers (one ``SELECT`` of its clock), ``503`` with ``"status": "fail"``
otherwise. Two optional query parameters make it a deployment check:

- ``?roles=worker,effect``: also fail unless a live (heartbeating) process of each role
  kind is registered (kinds: ``worker``, ``effect``, ``reminder``, ``broadcast``);
- ``?backlog=1``: also fail on work overdue with nobody serving it (the doctor's backlog
  check).

With shards (``SOLID_OBJECTS["DATABASES"]``) every alias holding the tables must answer, and
the roles and backlog are checked on each shard (a worker registers on each shard it
serves): a shard without a live process of a wanted role fails.

The answer names checks, statuses and database aliases only: no identities, arguments or
state.
"""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest, JsonResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET

OK, FAIL = "ok", "fail"
ROLE_KINDS = frozenset({"worker", "effect", "reminder", "broadcast"})


def parse_roles(text: str) -> set[str]:
    """The role kinds of a comma-separated list (``"worker,effect"``; blanks ignored), as
    ``?roles=`` and ``solid_objects_doctor --roles`` take them; :class:`ValueError` naming
    the unknown ones."""
    wanted = {kind.strip() for kind in text.split(",") if kind.strip()}
    unknown = sorted(wanted - ROLE_KINDS)
    if unknown:
        raise ValueError(
            f"unknown role kind(s): {', '.join(unknown)} (kinds: {', '.join(sorted(ROLE_KINDS))})"
        )
    return wanted


def _database(alias: str) -> str:
    from django.db import connections

    from .db.vendors import dialect_for

    connection = connections[alias]
    with connection.cursor() as cursor:
        dialect_for(connection).database_now(cursor)
    return str(connection.vendor)


def _databases(aliases: tuple[str, ...]) -> tuple[str, str]:
    """Every alias answers one ``SELECT`` of its clock (each is asked, even after one fails)."""
    if len(aliases) == 1:
        return OK, f"{_database(aliases[0])} answers"
    answered, failed = [], []
    for alias in aliases:
        try:
            answered.append((alias, _database(alias)))
        except Exception as exc:
            failed.append(f"{alias} ({type(exc).__name__})")
    if failed:
        return FAIL, f"no answer from {', '.join(failed)}"
    return OK, "answering: " + ", ".join(f"{alias} ({vendor})" for alias, vendor in answered)


def _roles(aliases: tuple[str, ...], wanted: set[str]) -> tuple[str, str]:
    from .status import collect

    problems = []
    for alias in aliases:
        live = {
            process["kind"]
            for process in collect(alias, dead_letter_limit=0)["processes"]["live"]
            if not process["stale"] and not process["idle"]
        }
        missing = sorted(wanted - live)
        if missing:
            where = f" on {alias}" if len(aliases) > 1 else ""
            problems.append(f"no live {', '.join(missing)} process{where}")
    if problems:
        return FAIL, "; ".join(problems)
    return OK, f"live: {', '.join(sorted(wanted))}"


def _backlog(aliases: tuple[str, ...]) -> tuple[str, str]:
    from .diagnostics import check_backlog

    failed, details = False, []
    for alias in aliases:
        finding = check_backlog(alias)
        failed = failed or finding.status == "fail"
        details.append(f"{alias}: {finding.detail}" if len(aliases) > 1 else finding.detail)
    return (FAIL if failed else OK), "; ".join(details)


def health_report(
    using: str | None = None, roles: set[str] | None = None, backlog: bool = False
) -> dict[str, Any]:
    """``{"status": "ok"|"fail", "checks": {name: {"status", "detail"}}}`` of ``using``,
    or (``None``) of every alias holding actors."""
    from .routers import actor_aliases, require_actor_alias

    aliases = (require_actor_alias(using),) if using is not None else actor_aliases()
    checks: dict[str, dict[str, str]] = {}
    steps: list[tuple[str, Any]] = [("database", lambda: _databases(aliases))]
    if roles:
        steps.append(("roles", lambda: _roles(aliases, roles)))
    if backlog:
        steps.append(("backlog", lambda: _backlog(aliases)))
    for name, step in steps:
        try:
            status, detail = step()
        except Exception as exc:
            status, detail = FAIL, type(exc).__name__
        checks[name] = {"status": status, "detail": detail}
        if name == "database" and status == FAIL:
            break
    failed = any(check["status"] == FAIL for check in checks.values())
    return {"status": FAIL if failed else OK, "checks": checks}


@never_cache
@require_GET
def health_view(request: HttpRequest) -> JsonResponse:
    try:
        wanted = parse_roles(request.GET.get("roles", ""))
    except ValueError as exc:
        return JsonResponse({"status": FAIL, "error": str(exc)}, status=400)
    report = health_report(roles=wanted, backlog=request.GET.get("backlog") in {"1", "true"})
    return JsonResponse(report, status=200 if report["status"] == OK else 503)
