from __future__ import annotations

import json
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser


def _seconds(value: float | None) -> str:
    if value is None:
        return "-"
    if value < 120:
        return f"{value:.1f}s"
    if value < 7200:
        return f"{value / 60:.0f}m"
    return f"{value / 3600:.1f}h"


class Command(BaseCommand):
    help = (
        "Processes, mailbox depth and lag, outbox backlog, reminders and dead letters: the "
        "totals over every shard with each shard's figures, or one database (--database)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--json", action="store_true", help="machine-readable output")
        parser.add_argument(
            "--database", default=None, help="one database alias (default: every shard)"
        )

    def handle(self, *args: Any, json: bool, database: str | None, **options: Any) -> None:
        from solid_objects.errors import UnknownDatabase
        from solid_objects.status import report as status_report

        try:
            report = status_report(database)
        except UnknownDatabase as exc:
            raise CommandError(str(exc)) from exc
        if json:
            self.stdout.write(_dumps(report))
            return
        if "shards" in report:
            self._shards(report["shards"])
        self._processes(report["processes"])
        self._mailbox(report["mailbox"])
        self._outbox(report["outbox"], report["reminders"])
        self._dead_letters(report["dead_letters"], sharded="shards" in report)

    def _shards(self, shards: dict[str, Any]) -> None:
        self.stdout.write(f"Shards ({len(shards)}; the figures below are totals over all)")
        for alias, part in shards.items():
            mailbox, outbox = part["mailbox"], part["outbox"]
            self.stdout.write(
                f"  {alias:<16.16} {part['database']['vendor']:<10} "
                f"ready {mailbox['ready']:>7} due {mailbox['due']:>7} "
                f"claimed {mailbox['claimed']:>4} lag {_seconds(mailbox['lag_seconds']):>6}  "
                f"effects {outbox['effects']['pending']:>5} "
                f"broadcasts {outbox['broadcasts']['pending']:>5} "
                f"reminders {part['reminders']['scheduled']:>5}  "
                f"dead letters {part['dead_letters']['unretried']:>4}"
            )

    def _processes(self, processes: dict[str, Any]) -> None:
        self.stdout.write(
            f"Processes ({len(processes['live'])} live, {processes['stopped']} stopped)"
        )
        if not processes["live"]:
            self.stdout.write("  none running")
        for p in processes["live"]:
            flag = "  STALE" if p["stale"] else "  idle caller" if p.get("idle") else ""
            where = f"  on {', '.join(p['databases'])}" if "databases" in p else ""
            self.stdout.write(
                f"  {p['kind']:<10} {p['hostname'] + ':' + str(p['pid']):<32.32} "
                f"{p['shutdown_state']:<9} heartbeat {_seconds(p['heartbeat_age'])} ago"
                f"{flag}  {p['id']}{where}"
            )
        # Each OS process's database sessions (server ids: pg_stat_activity.pid, the
        # MariaDB/MySQL processlist's ID), once per process (its role rows share them).
        shown: set[str] = set()
        for p in processes["live"]:
            host = f"{p['hostname']}:{p['pid']}"
            if p.get("sessions") and host not in shown:
                shown.add(host)
                named = ", ".join(f"{s['name']} {s['id']}" for s in p["sessions"])
                self.stdout.write(f"  sessions of {host}: {named}")

    def _mailbox(self, mailbox: dict[str, Any]) -> None:
        from solid_objects.tasks.naming import TASK_ACTOR_TYPE

        self.stdout.write(
            f"Mailboxes: {mailbox['ready']} ready ({mailbox['due']} due), "
            f"{mailbox['claimed']} in flight, lag {_seconds(mailbox['lag_seconds'])}"
        )
        for row in mailbox["by_actor_type"]:
            name = row["actor_type"]
            if name == TASK_ACTOR_TYPE:
                name = f"{name} (django.tasks)"
            self.stdout.write(
                f"  {name:<40.40} ready {row['ready']:>7} due {row['due']:>7} "
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

    def _dead_letters(self, dead: dict[str, Any], sharded: bool) -> None:
        self.stdout.write(f"Dead letters: {dead['unretried']} not retried ({dead['total']} total)")
        for row in dead["latest"]:
            where = f" on {row['database']}" if sharded else ""
            label = row.get("label", row["operation"])
            if label != row["operation"]:
                # A django.tasks task: its name and queue say more than its internal actor
                # (``solid_objects.task/task:<queue>:<uuid>``, operation ``run``), never cut.
                what = f"{label:<61}"
            else:
                what = f"{row['actor_type'] + '/' + row['actor_id']:<40.40} {label:<20.20}"
            self.stdout.write(
                f"  #{row['id']:<6} {what} {row['exception_class']:<30.30} "
                f"{row['last_failed_at']}{where}"
            )
        if dead["unretried"]:
            hint = " --database ALIAS" if sharded else ""
            self.stdout.write(f"  (manage.py solid_objects_dead_letters --retry ID{hint})")


def _dumps(report: dict[str, Any]) -> str:
    return json.dumps(report, indent=2, sort_keys=True, default=str)
