from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandParser


class Command(BaseCommand):
    help = (
        "Retention: delete old completed messages, idle instances of types with "
        "instance_retention, and old stopped processes. Previews counts unless --execute."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--messages", action="store_true", help="prune messages")
        parser.add_argument("--instances", action="store_true", help="prune instances")
        parser.add_argument("--processes", action="store_true", help="prune processes")
        parser.add_argument(
            "--execute", action="store_true", help="delete (default: only count what would go)"
        )
        parser.add_argument("--batch-size", type=int, default=None, help="rows per transaction")
        parser.add_argument(
            "--database",
            default=None,
            help="prune only this alias (default: SOLID_OBJECTS['DATABASE'] and every shard)",
        )

    def handle(
        self,
        *args: Any,
        messages: bool,
        instances: bool,
        processes: bool,
        execute: bool,
        batch_size: int | None,
        database: str | None,
        **options: Any,
    ) -> None:
        from django.core.management.base import CommandError

        from solid_objects import retention

        aliases = retention.databases()
        if database is not None:
            if database not in aliases:
                known = ", ".join(repr(alias) for alias in aliases)
                raise CommandError(f"--database {database!r} holds no actors (they are on {known})")
            aliases = (database,)
        if not (messages or instances or processes):
            messages = instances = processes = True  # no selection: everything
        self._verbosity = options.get("verbosity", 1)
        kinds = {"messages": messages, "instances": instances, "processes": processes}
        counts = retention.preview_all(aliases, **kinds)
        found = counts.as_dict()
        if not execute:
            for kind, selected in kinds.items():
                if selected:
                    self.stdout.write(f"{kind}: {found[kind]} would be deleted")
                    if kind == "instances":
                        for actor_type, count in sorted(counts.instances_by_type.items()):
                            self.stdout.write(f"  {actor_type}: {count}")
            self.stdout.write("preview only: run again with --execute to delete")
            return
        deleted = self._prune(retention, aliases, kinds, found, batch_size)
        for kind, selected in kinds.items():
            if selected:
                self.stdout.write(f"{kind}: {getattr(deleted, kind)} deleted")

    def _prune(
        self,
        retention: Any,
        aliases: tuple[str, ...],
        kinds: dict[str, bool],
        found: dict[str, Any],
        batch_size: int | None,
    ) -> Any:
        from tilttek_activity.progress import progress_bars

        with progress_bars(self.stderr, int(self._verbosity)) as bars:
            current: dict[str, Any] = {}

            def progress(kind: str, rows: int) -> None:
                bar = current.get(kind)
                if bar is None:
                    bars.close()  # the kinds run one after another: one bar at a time
                    bar = current[kind] = bars.new(total=found[kind] or None, desc=kind)
                bar.update(rows)

            return retention.prune_all(aliases, batch_size=batch_size, progress=progress, **kinds)
