from __future__ import annotations

import json
from typing import Any

from django.core.management.base import BaseCommand, CommandParser


def _seconds(value: float | None) -> str:
    if value is None:
        return "-"
    if value < 120:
        return f"{value:.1f}s"
    if value < 7200:
        return f"{value / 60:.0f}m"
    return f"{value / 3600:.1f}h"


class Command(BaseCommand):
    help = "Processes, mailbox depth and lag, outbox backlog, reminders and dead letters."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--json", action="store_true", help="machine-readable output")
        parser.add_argument("--database", default=None, help="database alias")

    def handle(self, *args: Any, json: bool, database: str | None, **options: Any) -> None:
        from solid_objects.status import collect

        report = collect(database)
        if json:
            self.stdout.write(_dumps(report))
            return
        self._processes(report["processes"])
        self._mailbox(report["mailbox"])
        self._outbox(report["outbox"], report["reminders"])
        self._dead_letters(report["dead_letters"])

    def _processes(self, processes: dict[str, Any]) -> None:
        self.stdout.write(
            f"Processes ({len(processes['live'])} live, {processes['stopped']} stopped)"
        )
        if not processes["live"]:
            self.stdout.write("  none running")
        for p in processes["live"]:
            flag = "  STALE" if p["stale"] else "  idle caller" if p.get("idle") else ""
            self.stdout.write(
                f"  {p['kind']:<10} {p['hostname'] + ':' + str(p['pid']):<32.32} "
                f"{p['shutdown_state']:<9} heartbeat {_seconds(p['heartbeat_age'])} ago"
                f"{flag}  {p['id']}"
            )

    def _mailbox(self, mailbox: dict[str, Any]) -> None:
        self.stdout.write(
            f"Mailboxes: {mailbox['ready']} ready ({mailbox['due']} due), "
            f"{mailbox['claimed']} in flight, lag {_seconds(mailbox['lag_seconds'])}"
        )
        for row in mailbox["by_actor_type"]:
            self.stdout.write(
                f"  {row['actor_type']:<40.40} ready {row['ready']:>7} due {row['due']:>7} "
                f"claimed {row.get('claimed', 0):>4} lag {_seconds(row['lag_seconds'])}"
            )

    def _outbox(self, outbox: dict[str, Any], reminders: dict[str, Any]) -> None:
        self.stdout.write("Outboxes:")
        for name, row in outbox.items():
            self.stdout.write(
                f"  {name:<11} pending {row['pending']:>7} (due {row['due']}, "
                f"lag {_seconds(row['lag_seconds'])})  processing {row['processing']:>5}  "
                f"dead {row['dead']:>5}"
            )
        self.stdout.write(
            f"  {'reminders':<11} scheduled {reminders['scheduled']:>5} (due {reminders['due']}, "
            f"lag {_seconds(reminders['lag_seconds'])})"
        )

    def _dead_letters(self, dead: dict[str, Any]) -> None:
        self.stdout.write(f"Dead letters: {dead['unretried']} not retried ({dead['total']} total)")
        for row in dead["latest"]:
            self.stdout.write(
                f"  #{row['id']:<6} {row['actor_type'] + '/' + row['actor_id']:<40.40} "
                f"{row['operation']:<20.20} {row['exception_class']:<30.30} "
                f"{row['last_failed_at']}"
            )
        if dead["unretried"]:
            self.stdout.write("  (manage.py solid_objects_dead_letters --retry ID)")


def _dumps(report: dict[str, Any]) -> str:
    return json.dumps(report, indent=2, sort_keys=True, default=str)
