"""``manage.py activity_rebuild NAME [--since ISO] [--until ISO]``."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.utils.dateparse import parse_date, parse_datetime

from tilttek_activity.errors import ActivityError
from tilttek_activity.progress import progress_bars
from tilttek_activity.rebuilding import rebuild


class Command(BaseCommand):
    help = "Recompute a projection for a period (since inclusive, until exclusive)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("name", help="Projection name.")
        parser.add_argument("--since", type=_moment, help="ISO date or datetime (UTC if naive).")
        parser.add_argument("--until", type=_moment, help="ISO date or datetime (UTC if naive).")
        parser.add_argument("--database", help="Database alias (default: the setting).")

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            with progress_bars(self.stderr, options["verbosity"]) as bars:
                bar = bars.new(desc=options["name"], unit="entries")

                def progress(done: int, total: int) -> None:
                    bar.total = total
                    bar.update(done - bar.n)

                count = rebuild(
                    options["name"],
                    options["since"],
                    options["until"],
                    using=options["database"],
                    progress=progress,
                )
        except (ActivityError, NotImplementedError) as exc:
            raise CommandError(str(exc)) from None
        self.stdout.write(f"{options['name']}: rebuilt from {count} entries")


def _moment(text: str) -> datetime:
    value = parse_datetime(text)
    if value is None:
        day = parse_date(text)
        if day is None:
            raise ValueError(f"not an ISO date or datetime: {text!r}")
        value = datetime(day.year, day.month, day.day)
    return value if value.tzinfo is not None else value.replace(tzinfo=UTC)
