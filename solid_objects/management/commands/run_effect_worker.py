from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from solid_objects import shard_agreement


class Command(BaseCommand):
    help = "Run the effect outbox: effect handlers and actor-to-actor messages."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--threads", type=int, default=1, help="effect threads per shard (default 1)"
        )
        parser.add_argument(
            "--database",
            default=None,
            help="serve only this shard (default: every alias of SOLID_OBJECTS['DATABASES'])",
        )

    def handle(self, *args: Any, threads: int, database: str | None, **options: Any) -> None:
        shard_agreement.refuse_to_start()  # PRODUCT §A18: not while actors must move
        from solid_objects.outbox.effects import EffectRole
        from solid_objects.runtime.launch import role_workers
        from solid_objects.runtime.shard_group import NotAShard

        try:
            workers = role_workers(EffectRole, threads, database)
        except NotAShard as exc:
            raise CommandError(str(exc)) from None
        code = workers.run()
        if code:
            raise SystemExit(code)
