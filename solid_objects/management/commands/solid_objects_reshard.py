from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser


class Command(BaseCommand):
    help = (
        'Move the actors whose home changed with SOLID_OBJECTS["DATABASES"] (a preview '
        "without --execute)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--execute", action="store_true", help="move the actors (default: a preview)"
        )
        parser.add_argument(
            "--from",
            dest="from_aliases",
            action="append",
            default=[],
            metavar="ALIAS",
            help="a database alias that left SOLID_OBJECTS['DATABASES'] (repeatable)",
        )
        parser.add_argument(
            "--wait",
            type=float,
            default=60.0,
            help="seconds to keep retrying actors in a turn (default 60)",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        from solid_objects import resharding
        from solid_objects.errors import InvalidReshard

        self._verbosity = int(options.get("verbosity", 1))
        if options["wait"] < 0:
            raise CommandError("--wait must be zero or more seconds")
        try:
            if options["execute"]:
                self._execute(resharding, options["from_aliases"], options["wait"])
            else:
                self._preview(resharding, options["from_aliases"])
        except InvalidReshard as error:
            raise CommandError(str(error)) from error

    def _preview(self, resharding: Any, from_aliases: list[str]) -> None:
        counts = resharding.preview(from_aliases)
        if not counts:
            self.stdout.write("Every actor is on its home database: nothing to move.")
            return
        for (source, target), route in counts.items():
            self.stdout.write(f"{source} -> {target}: {route.describe()}")
        self.stdout.write("Run with --execute to move them.")

    def _execute(self, resharding: Any, from_aliases: list[str], wait: float) -> None:
        from tilttek_activity.progress import progress_bars

        with progress_bars(self.stderr, self._verbosity) as bars:
            open_bars: dict[tuple[str, str], Any] = {}

            def on_plan(totals: dict[tuple[str, str], int]) -> None:
                for route, total in sorted(totals.items()):
                    open_bars[route] = bars.new(
                        total=total, desc=f"{route[0]} -> {route[1]}", unit="actors"
                    )

            def progress(route: tuple[str, str], actors: int) -> None:
                bar = open_bars.get(route)
                if bar is not None:
                    bar.update(actors)

            result = resharding.execute(from_aliases, wait=wait, on_plan=on_plan, progress=progress)
        for (source, target), moved in sorted(result.moved.items()):
            self.stdout.write(f"{source} -> {target}: {moved} actors moved")
        if not result.moved:
            self.stdout.write("No actor had to move.")
        for mover in result.busy:
            self.stderr.write(f"still in a turn after {wait:g} s, not moved: {mover}")
        for mover, reason in result.conflicts:
            self.stderr.write(f"not moved: {mover}: {reason}")
        if not result.complete:
            raise CommandError(
                f"{len(result.busy) + len(result.conflicts)} actors were not moved; "
                "run the command again"
            )
        self.stdout.write("Every database agrees with the shard list: workers may start.")
