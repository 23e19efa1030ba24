"""``manage.py activity_status``: per projection, checkpoint, lag and open holes."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from tilttek_activity.status import projection_status

MAX_HOLES_SHOWN = 5


class Command(BaseCommand):
    help = "Show each projection's checkpoint, its lag and the holes in front of it."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--database", help="Database alias (default: the setting).")

    def handle(self, *args: Any, **options: Any) -> None:
        statuses = projection_status(using=options["database"])
        if not statuses:
            self.stdout.write("No projections.")
            return
        self.stdout.write(f"journal head: {statuses[0].head}")
        for status in statuses:
            where = "never ran" if status.position is None else f"checkpoint {status.position}"
            line = f"{status.name}: {where}, lag {status.lag}"
            if status.holes:
                shown = ", ".join(
                    str(a) if a == b else f"{a}..{b}" for a, b in status.holes[:MAX_HOLES_SHOWN]
                )
                more = len(status.holes) - MAX_HOLES_SHOWN
                line += f", open holes {shown}" + (f" (+{more} more)" if more > 0 else "")
            if not status.registered:
                line += " (not registered: no such projection in this code)"
            self.stdout.write(line)
