from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandParser


class Command(BaseCommand):
    help = "Deliver the broadcast outbox to Django Channels groups (observable changes)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--threads", type=int, default=1, help="broadcast threads (default 1)")
        parser.add_argument("--database", default=None, help="database alias")

    def handle(self, *args: Any, threads: int, database: str | None, **options: Any) -> None:
        from django.core.management.base import CommandError

        from solid_objects.conf import get_settings
        from solid_objects.live.layers import default_layer, describe, is_process_local
        from solid_objects.outbox.broadcasts import BroadcastRole
        from solid_objects.runtime.supervisor import Supervisor

        layer = default_layer()
        if is_process_local(layer):
            raise CommandError(
                f"the channel layer ({describe(layer)}) reaches only this process, where no "
                "browser is connected: deliver broadcasts in the web process "
                "(solid_objects.live.embedded.EmbeddedBroadcasts) or configure channels_redis"
            )
        alias = database or get_settings().DATABASE
        code = Supervisor(roles=[(BroadcastRole, max(1, threads))], alias=alias).run()
        if code:
            raise SystemExit(code)
