"""``manage.py activity_catch_up [--projection NAME] [--follow] [--batch-size N]``."""

from __future__ import annotations

import signal
import threading
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from tilttek_activity.catchup import CatchUpProgress, CatchUpResult, catch_up, follow
from tilttek_activity.errors import InvalidActivity, UnknownProjection
from tilttek_activity.progress import Bars, progress_bars


class Command(BaseCommand):
    help = "Apply new journal entries to the projections (once, or continuously with --follow)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--projection", help="Only this projection (default: all).")
        parser.add_argument(
            "--follow", action="store_true", help="Keep catching up until SIGTERM/SIGINT."
        )
        parser.add_argument("--batch-size", type=int, help="Entries per transaction.")
        parser.add_argument("--database", help="Database alias (default: the setting).")

    def handle(self, *args: Any, **options: Any) -> None:
        name = options["projection"]
        batch_size = options["batch_size"]
        if batch_size is not None and batch_size < 1:
            raise CommandError("--batch-size must be a positive integer")
        stop = threading.Event()
        try:
            if options["follow"]:
                self._on_signals(stop)
                follow(
                    name,
                    batch_size,
                    using=options["database"],
                    stop=stop,
                    on_result=self._report_progress,
                )
                self.stdout.write("Stopped.")
            else:
                with progress_bars(self.stderr, options["verbosity"]) as bars:
                    results = catch_up(
                        name,
                        batch_size,
                        using=options["database"],
                        progress=_drawer(bars),
                    )
                for result in results.values():
                    self._report(result)
        except (InvalidActivity, UnknownProjection) as exc:
            raise CommandError(str(exc)) from None

    def _on_signals(self, stop: threading.Event) -> None:
        def finish_batch_then_exit(signum: int, frame: Any) -> None:
            stop.set()

        signal.signal(signal.SIGTERM, finish_batch_then_exit)
        signal.signal(signal.SIGINT, finish_batch_then_exit)

    def _report_progress(self, result: CatchUpResult) -> None:
        if result.applied or result.skipped:
            self._report(result)

    def _report(self, result: CatchUpResult) -> None:
        line = f"{result.projection}: position {result.position}, {result.applied} applied"
        if result.skipped:
            holes = ", ".join(_range(hole) for hole in result.skipped)
            line += f", passed dead position(s) {holes}"
        if result.waiting_on:
            line += f", waiting on position(s) {_range(result.waiting_on)}"
        self.stdout.write(line)


def _drawer(bars: Bars) -> CatchUpProgress:
    """One bar per projection, in journal positions from its checkpoint to the head."""
    drawn: dict[str, Any] = {}

    def progress(projection: str, done: int, total: int) -> None:
        bar = drawn.get(projection)
        if bar is None:
            bar = drawn[projection] = bars.new(desc=projection, unit="positions", total=total)
        bar.update(done - bar.n)

    return progress


def _range(hole: tuple[int, int]) -> str:
    start, end = hole
    return str(start) if start == end else f"{start}..{end}"
