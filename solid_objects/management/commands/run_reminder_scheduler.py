from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandParser


class Command(BaseCommand):
    help = "Run the reminder scheduler: due reminders become mailbox messages."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--database", default=None, help="database alias")

    def handle(self, *args: Any, database: str | None, **options: Any) -> None:
        from solid_objects.conf import get_settings
        from solid_objects.reminders import ReminderRole
        from solid_objects.runtime.supervisor import Supervisor

        alias = database or get_settings().DATABASE
        code = Supervisor(roles=[(ReminderRole, 1)], alias=alias).run()
        if code:
            raise SystemExit(code)
