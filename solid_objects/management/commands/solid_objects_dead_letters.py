from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser


class Command(BaseCommand):
    help = "List dead letters, or retry one (idempotent: keyed dead-letter:<id>)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--retry", type=int, metavar="ID", help="retry this dead letter")
        parser.add_argument("--limit", type=int, default=50)
        parser.add_argument("--database", default=None)

    def handle(
        self, *args: Any, retry: int | None, limit: int, database: str | None, **options: Any
    ) -> None:
        from solid_objects.conf import get_settings
        from solid_objects.models import DeadLetter

        alias = database or get_settings().DATABASE
        if retry is not None:
            retries = DeadLetter.objects.using(alias).filter(pk=retry).retry()
            if retry not in retries:
                raise CommandError(f"no dead letter {retry}")
            message = retries[retry]
            self.stdout.write(
                f"dead letter {retry} retried as message {message.id} (sequence {message.sequence})"
            )
            return
        rows = (
            DeadLetter.objects.using(alias)
            .order_by("-last_failed_at")
            .values_list(
                "id",
                "actor_type",
                "actor_id",
                "operation",
                "attempts",
                "exception_class",
                "last_failed_at",
                "retried_message_id",
            )[:limit]
        )
        if not rows:
            self.stdout.write("no dead letters")
            return
        self.stdout.write(
            f"{'id':>6}  {'actor':<40} {'operation':<20} {'att':>3}  "
            f"{'exception':<30} last failure / retried as"
        )
        for id_, actor_type, actor_id, operation, attempts, exc, failed_at, retried in rows:
            retried_text = f" -> message {retried}" if retried else ""
            self.stdout.write(
                f"{id_:>6}  {actor_type + '/' + actor_id:<40.40} {operation:<20.20} "
                f"{attempts:>3}  {exc.rsplit('.', 1)[-1]:<30.30} "
                f"{failed_at:%Y-%m-%d %H:%M:%S}{retried_text}"
            )
