from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser


class Command(BaseCommand):
    help = (
        "List dead letters of every shard (or one, --database), or retry one (idempotent: "
        "keyed dead-letter:<id>)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--retry", type=int, metavar="ID", help="retry this dead letter")
        parser.add_argument("--limit", type=int, default=50)
        parser.add_argument(
            "--database", default=None, help="one database alias (default: every shard)"
        )

    def handle(
        self, *args: Any, retry: int | None, limit: int, database: str | None, **options: Any
    ) -> None:
        from solid_objects.dead_letter_lookup import AmbiguousDeadLetter, latest
        from solid_objects.dead_letter_lookup import retry as retry_one
        from solid_objects.dead_letters import DeadLetterNotFound
        from solid_objects.errors import UnknownDatabase

        try:
            if retry is not None:  # the operator verb DeadLetter.retry(), on the row's shard
                alias, message = retry_one(retry, database)
                self.stdout.write(
                    f"dead letter {retry} retried as message {message.id} "
                    f"(sequence {message.sequence}) on {alias}"
                )
                return
            rows, sharded = latest(limit, database)
        except (UnknownDatabase, DeadLetterNotFound, AmbiguousDeadLetter) as exc:
            raise CommandError(str(exc)) from exc
        if not rows:
            self.stdout.write("no dead letters")
            return
        where = f"{'database':<16} " if sharded else ""
        self.stdout.write(
            f"{'id':>6}  {where}{'actor':<40} {'operation':<20} {'att':>3}  "
            f"{'exception':<30} last failure / retried as"
        )
        for row in rows:
            retried_text = f" -> message {row.retried_message_id}" if row.retried_message_id else ""
            shard = f"{row.database:<16.16} " if sharded else ""
            if row.label != row.operation:
                # A django.tasks task: its name and queue, never cut, say more than its
                # internal actor (solid_objects.task/task:<queue>:<uuid>, operation run).
                what = f"{row.label:<61}"
            else:
                what = f"{row.actor_type + '/' + row.actor_id:<40.40} {row.operation:<20.20}"
            self.stdout.write(
                f"{row.id:>6}  {shard}{what} {row.attempts:>3}  "
                f"{row.exception_class.rsplit('.', 1)[-1]:<30.30} "
                f"{row.last_failed_at:%Y-%m-%d %H:%M:%S}{retried_text}"
            )
