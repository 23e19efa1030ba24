"""Catch-up: feed each projection the entries after its checkpoint, exactly once.

One batch is one transaction: lock the projection's checkpoint row, read the entries after
it, apply them, advance the checkpoint, commit. The row lock serialises runners of the same
projection, so two runners never apply an entry twice; the projection's writes commit with
the checkpoint, so a crash never applies one twice either. Writers are never locked out:
gap safety comes from :mod:`~tilttek_activity.gaps`, not from serialising inserts.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from django.db import close_old_connections, transaction

from .conf import MAX_BATCH_SIZE, database_alias, get_settings
from .db import backend_for
from .db.base import Backend
from .errors import InvalidActivity
from .gaps import Hole, tracker
from .projections import Projection, registry, validate_projection_name
from .reading import validate_position
from .records import decode_row
from .signals import hole_skipped
from .text import shown

__all__ = ["CatchUpResult", "catch_up", "follow", "wait_until_projected"]

logger = logging.getLogger("tilttek_activity")


@dataclass
class CatchUpResult:
    """What one ``catch_up`` did for one projection."""

    projection: str
    position: int = 0
    applied: int = 0
    skipped: list[tuple[int, int]] = field(default_factory=list)
    #: The hole catch-up stopped at (still possibly alive), if any.
    waiting_on: tuple[int, int] | None = None


@dataclass
class _Batch:
    position: int
    read: int
    applied: int
    skipped: list[Hole]
    blocked: Hole | None
    #: every hole still open in the rows read (the blocking one first): examined together,
    #: so a run of dead holes costs one round of evidence, not one each
    open_holes: list[Hole]


#: ``progress(projection, done, total)`` of :func:`catch_up` (journal positions).
CatchUpProgress = Callable[[str, int, int], None]


class _MissingCheckpoint(Exception):
    pass


def catch_up(
    name: str | None = None,
    batch_size: int | None = None,
    *,
    using: str | None = None,
    stop: threading.Event | None = None,
    progress: CatchUpProgress | None = None,
) -> dict[str, CatchUpResult]:
    """Apply new entries to one projection (``name``) or to all, until nothing is left
    that may be applied safely. Returns one result per projection.

    ``stop`` ends the work between two batches (the ``--follow`` command sets it on
    SIGTERM). ``progress(projection, done, total)`` is called before the first batch and
    after each one, counting journal positions from the projection's checkpoint to the
    journal's last position when the catch-up began (one indexed read per projection).
    Run it outside a transaction: a catch-up inside a caller's transaction cannot prove
    MySQL holes dead, and under REPEATABLE READ not PostgreSQL ones either.
    """
    size = _batch_size(batch_size)
    alias = database_alias(using)
    _check_stop(stop, required=False)
    if progress is not None and not callable(progress):
        raise InvalidActivity("progress", "must be callable (projection, done, total) or None")
    names = [name] if name is not None else registry.names()
    projections = [registry.get(projection_name) for projection_name in names]
    results = {}
    for projection_name, projection in zip(names, projections, strict=True):
        runner = _Runner(projection, alias, size)
        results[projection_name] = runner.run(stop, runner.reporter(progress))
        if stop is not None and stop.is_set():
            break
    return results


def follow(
    name: str | None = None,
    batch_size: int | None = None,
    *,
    using: str | None = None,
    stop: threading.Event,
    poll_interval: float | None = None,
    on_result: Callable[[CatchUpResult], None] | None = None,
) -> None:
    """Catch up forever (until ``stop`` is set), sleeping ``POLL_INTERVAL`` when idle.

    An exception in a projection is logged and retried after a back-off; the batch that
    raised was rolled back, so nothing is applied twice.
    """
    _check_stop(stop, required=True)
    if name is not None:
        registry.get(name)
    _batch_size(batch_size)
    database_alias(using)
    if poll_interval is None:
        interval = get_settings().POLL_INTERVAL
    else:
        interval = _seconds(poll_interval, "poll_interval", positive=True)
    if on_result is not None and not callable(on_result):
        raise InvalidActivity("on_result", "must be callable")
    failures = 0
    while not stop.is_set():
        close_old_connections()
        try:
            results = catch_up(name, batch_size, using=using, stop=stop)
        except Exception:
            failures += 1
            logger.exception("Activity catch-up failed (attempt %d); retrying", failures)
            stop.wait(min(interval * 2**failures, 60.0))
            continue
        failures = 0
        if on_result is not None:
            for result in results.values():
                on_result(result)
        if not any(result.applied or result.skipped for result in results.values()):
            stop.wait(interval)


def wait_until_projected(
    name: str, position: int, timeout: float = 10.0, *, using: str | None = None
) -> bool:
    """Wait until projection ``name`` has passed ``position`` (read-your-writes).

    Returns True once its checkpoint is at or beyond ``position``, False after ``timeout``
    seconds. It only watches: a runner (``activity_catch_up --follow``) or a ``catch_up``
    call must be doing the work.
    """
    validate_projection_name(name)
    position = validate_position(position, "position")
    timeout = _seconds(timeout, "timeout", positive=False)
    alias = database_alias(using)
    ceiling = get_settings().POLL_INTERVAL
    deadline = time.monotonic() + timeout
    delay = min(0.005, ceiling)
    backend = backend_for(alias)
    while True:
        if backend.checkpoint_position(name) >= position:
            return True
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return False
        time.sleep(min(delay, remaining))
        delay = min(delay * 2, ceiling)


class _Runner:
    def __init__(self, projection: Projection, alias: str, batch_size: int) -> None:
        self.projection = projection
        self.name = projection.name
        self.alias = alias
        self.batch_size = batch_size
        self.backend: Backend = backend_for(alias)

    def reporter(self, progress: CatchUpProgress | None) -> Callable[[int], None] | None:
        """``progress`` bound to this projection: called with each new checkpoint position."""
        if progress is None:
            return None
        start = self.backend.checkpoint_position(self.name)
        total = max(0, self.backend.head() - start)
        progress(self.name, 0, total)

        def report(position: int) -> None:
            progress(self.name, min(total, max(0, position - start)), total)

        return report

    def run(
        self, stop: threading.Event | None, report: Callable[[int], None] | None = None
    ) -> CatchUpResult:
        result = CatchUpResult(self.name)
        created = False
        while stop is None or not stop.is_set():
            try:
                batch = self.batch()
            except _MissingCheckpoint:
                if created:
                    raise RuntimeError(f"cannot create the checkpoint of {self.name!r}") from None
                self.backend.create_checkpoint(self.name, _now())
                created = True
                continue
            result.position = batch.position
            if report is not None:
                report(batch.position)
            result.applied += batch.applied
            result.skipped.extend((hole.start, hole.end) for hole in batch.skipped)
            result.waiting_on = None
            if batch.blocked is not None:
                result.waiting_on = (batch.blocked.start, batch.blocked.end)
                if tracker.examine(self.backend, batch.open_holes):
                    continue  # proven dead: the next batch passes it if still missing
                break
            if batch.read < self.batch_size:
                break
        return result

    def batch(self) -> _Batch:
        """One transaction: lock, read, apply, advance."""
        backend = self.backend
        projection = self.projection
        with transaction.atomic(using=self.alias):
            checkpoint = backend.lock_checkpoint(self.name)
            if checkpoint is None:
                raise _MissingCheckpoint
            rows = backend.read_after(checkpoint, self.batch_size)
            expected = checkpoint + 1
            skipped: list[Hole] = []
            blocked: Hole | None = None
            open_holes: list[Hole] = []
            wanted = []
            applied_upto = checkpoint
            for row in rows:
                position = row[0]
                if position != expected:
                    hole = tracker.observe(backend, expected, position - 1)
                    if not hole.dead:
                        # Nothing at or past an open hole is applied; the holes after it
                        # are only observed now, to be examined in the same round.
                        blocked = blocked or hole
                        open_holes.append(hole)
                    elif blocked is None:
                        skipped.append(
                            Hole(expected, position - 1, hole.seen_at, None, True, hole.reason)
                        )
                expected = position + 1
                if blocked is not None:
                    continue
                verb = row[4]
                if not isinstance(verb, str) or projection.wants(verb):
                    wanted.append(row)
                applied_upto = position
            tz = backend.timezone
            entries = [decode_row(row, tz) for row in wanted]
            if entries:
                projection.apply_batch(entries)
            position = applied_upto
            if position != checkpoint:
                backend.advance_checkpoint(self.name, position, _now())
            if skipped:
                transaction.on_commit(lambda: self._report(skipped), using=self.alias)
        read = len(rows)
        return _Batch(position, read, len(entries), skipped, blocked, open_holes)

    def _report(self, holes: Sequence[Hole]) -> None:
        for hole in holes:
            level = logging.WARNING if "GAP_SETTLE_SECONDS" in hole.reason else logging.INFO
            logger.log(
                level,
                "Projection %r passed missing journal position(s) %s: %s",
                self.name,
                hole,
                hole.reason,
            )
            hole_skipped.send_robust(
                sender=type(self.projection),
                projection=self.name,
                start=hole.start,
                end=hole.end,
                reason=hole.reason,
                using=self.alias,
            )


def _seconds(value: Any, field: str, *, positive: bool) -> float:
    """A finite number of seconds (zero allowed unless ``positive``)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InvalidActivity(field, f"must be a number of seconds, got {type(value).__name__}")
    try:
        seconds = float(value)
    except OverflowError:
        seconds = math.inf
    if not math.isfinite(seconds) or seconds < 0 or (positive and seconds == 0):
        wanted = "a positive" if positive else "a finite, non-negative"
        raise InvalidActivity(field, f"must be {wanted} number of seconds, got {shown(value)}")
    return seconds


def _check_stop(stop: Any, *, required: bool) -> None:
    if stop is None and not required:
        return
    if not callable(getattr(stop, "is_set", None)) or not callable(getattr(stop, "wait", None)):
        raise InvalidActivity("stop", f"must be a threading.Event, got {type(stop).__name__}")


def _batch_size(value: int | None) -> int:
    if value is None:
        return get_settings().BATCH_SIZE
    if isinstance(value, bool) or not isinstance(value, int) or not 0 < value <= MAX_BATCH_SIZE:
        raise InvalidActivity("batch_size", f"must be an integer between 1 and {MAX_BATCH_SIZE}")
    return value


def _now() -> datetime:
    return datetime.now(UTC).replace(microsecond=0)
