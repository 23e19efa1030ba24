from __future__ import annotations

import json
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

MARKS = {"ok": "ok  ", "warn": "WARN", "fail": "FAIL"}


class Command(BaseCommand):
    help = (
        "Check configuration, schema, database version, wake-ups, table copies, live roles, "
        "overdue work and a real sync round trip; exits non-zero when something is broken. "
        "A role kind with no live process is a warning, unless --roles requires it."
    )
    requires_system_checks: list[str] = []  # configuration is one of the checks reported

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--json", action="store_true", help="machine-readable output")
        parser.add_argument(
            "--no-round-trip", action="store_true", help="skip the sync call (writes rows)"
        )
        parser.add_argument(
            "--database", default=None, help="one database alias (default: every shard)"
        )
        parser.add_argument(
            "--roles",
            default="",
            metavar="KINDS",
            help=(
                "comma-separated role kinds this deployment runs (worker, effect, reminder, "
                "broadcast): fail, instead of warning, when one has no live process"
            ),
        )

    def handle(
        self,
        *args: Any,
        json: bool,
        no_round_trip: bool,
        database: str | None,
        roles: str,
        **options: Any,
    ) -> None:
        from solid_objects.diagnostics import FAIL, run_checks
        from solid_objects.errors import UnknownDatabase
        from solid_objects.health import parse_roles

        try:
            required = parse_roles(roles)
        except ValueError as exc:
            raise CommandError(f"--roles: {exc}") from exc
        try:
            findings = run_checks(database, round_trip=not no_round_trip, required_roles=required)
        except UnknownDatabase as exc:
            raise CommandError(str(exc)) from exc
        if json:
            self.stdout.write(_dumps([f.as_dict() for f in findings]))
        else:
            width = max((len(f.database or "") for f in findings), default=0)
            for finding in findings:
                shard = f"{finding.database or '':<{width}}  " if width else ""
                line = f"{MARKS.get(finding.status, finding.status)}  {shard}{finding.check:<14} "
                line += finding.detail
                style = {"ok": self.style.SUCCESS, "warn": self.style.WARNING}.get(
                    finding.status, self.style.ERROR
                )
                self.stdout.write(style(line))
        failed = [f for f in findings if f.status == FAIL]
        if failed:
            if not json:
                self.stderr.write(f"{len(failed)} check(s) failed")
            raise SystemExit(1)


def _dumps(value: Any) -> str:
    return json.dumps(value, indent=2)
