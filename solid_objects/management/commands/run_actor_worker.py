from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from solid_objects import shard_agreement


class Command(BaseCommand):
    help = "Run actor turns (and, with --all-roles, the effect, reminder and broadcast roles)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--threads", type=int, default=1, help="actor role threads per shard (default 1)"
        )
        parser.add_argument(
            "--all-roles",
            action="store_true",
            help="also run the effect, reminder and broadcast roles, periodic "
            "cleanup and retention, under one supervisor",
        )
        parser.add_argument(
            "--database",
            default=None,
            help="serve only this shard (default: every alias of SOLID_OBJECTS['DATABASES'])",
        )
        parser.add_argument(
            "--actor-types",
            default="",
            help="comma-separated actor types: run only these (with --queues: these and "
            "those tasks)",
        )
        parser.add_argument(
            "--exclude-actor-types", default="", help="comma-separated actor types never run"
        )
        parser.add_argument(
            "--queues",
            default="",
            help="comma-separated django.tasks queues: run only their tasks (with "
            "--actor-types: those actors too)",
        )
        parser.add_argument(
            "--reload",
            action="store_true",
            default=None,
            help="restart when a Python file changes (default when DEBUG is on)",
        )
        parser.add_argument(
            "--noreload", action="store_false", dest="reload", help="never restart on changes"
        )

    def handle(
        self,
        *args: Any,
        threads: int,
        all_roles: bool,
        database: str | None,
        actor_types: str,
        exclude_actor_types: str,
        queues: str,
        reload: bool | None,
        **options: Any,
    ) -> None:
        shard_agreement.refuse_to_start()  # PRODUCT §A18: not while actors must move
        from django.conf import settings

        from solid_objects.runtime import reloading

        if reload is None:
            reload = bool(settings.DEBUG)
        if reload and not reloading.in_child():
            code = reloading.run_parent()  # the worker runs in a child, restarted on changes
            if code:
                raise SystemExit(code)
            return
        from solid_objects.live.layers import default_layer, describe, is_process_local
        from solid_objects.runtime.dedication import UnknownWork, names, work_filter
        from solid_objects.runtime.launch import build_workers
        from solid_objects.runtime.shard_group import NotAShard

        try:
            work = work_filter(names(actor_types), names(exclude_actor_types), names(queues))
        except UnknownWork as exc:
            raise CommandError(str(exc)) from None

        layer = default_layer() if all_roles else None
        broadcasts = not is_process_local(layer)
        if not broadcasts:
            self.stderr.write(
                f"note: the channel layer ({describe(layer)}) reaches only its own process, so "
                "this worker leaves broadcasts to the web process (EmbeddedBroadcasts in "
                "asgi.py); use channels_redis to deliver them from here"
            )
        try:
            workers = build_workers(
                database=database,
                actor_threads=threads,
                all_roles=all_roles,
                broadcasts=broadcasts,
                work_filter=work,
            )
        except NotAShard as exc:
            raise CommandError(str(exc)) from None
        code = reloading.run_child(workers.run, workers.request_stop) if reload else workers.run()
        if code:
            raise SystemExit(code)
