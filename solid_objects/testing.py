"""Helpers for your test suite: run everything that is due in the test process, no workers.

    from solid_objects.testing import drain

    def test_cart(db):                                # pytest-django, or django.test.TestCase
        cart = Cart.ref("a")
        assert cart.add_item("shirt") == 1            # sync calls work in the test transaction
        cart.enqueue().add_item("hat")
        report = drain()                              # due turns, effects, reminders, broadcasts
        drain(at=timezone.now() + timedelta(days=2))  # reminders due by then (a test clock)

:func:`drain` writes through the same statements the worker roles use: the same lease,
claim and fenced commit, inside the test's transaction when there is one (see
``docs/testing.md``). :func:`run_due_reminders` and :func:`run_pending_effects` run one
kind of work only. :class:`SolidObjectsTestMixin` and the pytest plugin
``solid_objects.pytest_plugin`` forget this process's warm activations between tests.

:func:`pause_at` holds a runtime thread at a named protocol step
(:mod:`solid_objects.pause_points`), so a test can run another session in between.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.db import connections

from . import pause_points
from .db.vendors import dialect_for
from .errors import LostActivation, SolidObjectsError
from .lease import acquire
from .outbox.broadcasts import channel_layer, deliver_due
from .outbox.effects import run_pending_effects
from .passes import run_pass
from .reminders import fire_due_reminders
from .runtime.processes import callers
from .shards import databases
from .sync import cache_for, caller_cache, with_caller

__all__ = [
    "ROLES",
    "DrainReport",
    "NotDrained",
    "Paused",
    "SolidObjectsTestMixin",
    "drain",
    "pause_at",
    "reset_runtime_state",
    "run_due_reminders",
    "run_pending_effects",
]

#: What :func:`drain` runs, in the order of each round.
ROLES = ("actors", "effects", "reminders", "broadcasts")

#: Passes :func:`run_due_reminders` makes at most (a ``missed="all"`` reminder enqueues up
#: to ``reminders.MAX_CATCH_UP`` messages per pass).
MAX_PASSES = 100


def run_due_reminders(at: datetime | None = None, *, using: str | None = None) -> int:
    """Fire every reminder due at ``at`` (default: the database's now) as if the clock read
    ``at``; returns how many messages were enqueued. The messages are ordinary mailbox
    messages: a sync call to the actor, or a worker, runs them."""
    if at is not None and (not isinstance(at, datetime) or at.tzinfo is None):
        raise ValueError("run_due_reminders(at=...) needs a timezone-aware datetime")
    total = 0
    for _ in range(MAX_PASSES):
        fired = fire_due_reminders(using, now=at)
        if not fired:
            break
        total += len(fired)
    return total


@dataclass
class DrainReport:
    """What :func:`drain` ran: ``turns`` lists ``(actor_type, actor_id, message_id,
    outcome)`` in the order they committed (``outcome``: ``completed``, ``rejected`` or
    ``failed``, a failed turn being retried later or dead-lettered); the counts are of effect
    attempts, reminder occurrences enqueued and broadcasts delivered."""

    rounds: int = 0
    turns: list[tuple[str, str, int, str]] = field(default_factory=list)
    effects: int = 0
    reminders: int = 0
    broadcasts: int = 0

    @property
    def total(self) -> int:
        return len(self.turns) + self.effects + self.reminders + self.broadcasts

    def __bool__(self) -> bool:
        return self.total > 0


class NotDrained(SolidObjectsError, AssertionError):
    """:func:`drain` still found work after ``max_rounds`` rounds (actors that keep
    messaging each other, a recurring reminder with ``missed="all"`` far behind...)."""

    def __init__(self, message: str, report: DrainReport) -> None:
        super().__init__(message)
        self.report = report


def drain(
    *,
    at: datetime | None = None,
    roles: Sequence[str] = ROLES,
    max_rounds: int = 100,
    using: str | None = None,
) -> DrainReport:
    """Run everything that is due in this process until nothing is left; return what ran.

    Each round fires the reminders due at ``at`` (a timezone-aware test clock; default: the
    database's now), runs every actor with a due message (turns in mailbox order, through
    the lease, claim and fenced commit workers use), delivers due effects (awaiting ``async``
    handlers) and, when a Channels layer is configured, due broadcasts. Rounds repeat while
    one did something: a turn's effect's callback, a message sent to another actor, all run.
    Messages due later (``available_at``, a failed turn's retry delay) are left alone, and
    :class:`NotDrained` is raised when work is still found after ``max_rounds`` rounds.

    Works inside a test's transaction (``TestCase``, pytest-django's ``db``) and outside
    one (``transaction=True``), never inside a block the test opened with ``atomic()``.
    """
    if at is not None and (not isinstance(at, datetime) or at.tzinfo is None):
        raise ValueError("drain(at=...) needs a timezone-aware datetime")
    unknown = sorted(set(roles) - set(ROLES))
    if isinstance(roles, str) or unknown:
        raise ValueError(f"drain(roles=...) takes a sequence of {ROLES}, got {roles!r}")
    if isinstance(max_rounds, bool) or not isinstance(max_rounds, int) or max_rounds < 1:
        raise ValueError(f"drain(max_rounds=...) must be a positive integer, got {max_rounds!r}")
    aliases = (using,) if using else databases()  # every shard, in turn, each round
    report = DrainReport()
    layer = channel_layer() if "broadcasts" in roles else None
    while True:
        before = report.total
        for alias in aliases:
            if "reminders" in roles:
                report.reminders += run_due_reminders(at, using=alias)
            if "actors" in roles:
                report.turns.extend(_run_due_actors(alias))
            if "effects" in roles:
                report.effects += run_pending_effects(alias)
            if layer is not None:
                report.broadcasts += _deliver_broadcasts(alias, layer)
        if report.total == before:
            return report
        report.rounds += 1
        if report.rounds >= max_rounds:
            raise NotDrained(
                f"drain(): work was still due after {max_rounds} rounds "
                f"({len(report.turns)} turns, {report.effects} effects, "
                f"{report.reminders} reminders, {report.broadcasts} broadcasts so far)",
                report,
            )


def _run_due_actors(alias: str) -> list[tuple[str, str, int, str]]:
    """One activation pass for every actor whose mailbox head is due now (a message it
    sends, or one enqueued meanwhile, runs in the next round)."""
    turns: list[tuple[str, str, int, str]] = []
    connection = connections[alias]
    with connection.cursor() as cursor:
        due = dialect_for(connection).due_instances(cursor, 10_000)
    cache = cache_for(alias)
    for instance_id in due:
        activation = with_caller(alias, _leaser(alias, instance_id, cache))
        if activation is None:  # held by another process, or nothing due after all
            continue
        try:
            result = run_pass(activation, cache=cache, max_messages=1_000_000)
        except LostActivation:
            continue
        actor_type, actor_id = activation.spec.actor_type, activation.lease.actor_id
        for message_id, outcome in result.outcomes.items():
            turns.append((actor_type, actor_id, message_id, outcome.kind))
    return turns


def _leaser(alias: str, instance_id: int, cache: Any) -> Callable[[str], Any]:
    return lambda owner: acquire(alias, owner, [instance_id], cache)


def _deliver_broadcasts(alias: str, layer: Any) -> int:
    process_id = callers.process_id(alias)
    delivered = 0
    while True:
        outcomes = deliver_due(alias, process_id, layer=layer)
        if not outcomes:
            return delivered
        delivered += sum(1 for outcome in outcomes if outcome.error is None)


def reset_runtime_state() -> None:
    """Forget this process's warm activations and caller registrations (call it between
    tests that roll their rows back or flush the tables; the mixin and plugin do)."""
    caller_cache.clear()
    for alias in connections:
        callers.forget(alias)


class SolidObjectsTestMixin:
    """For ``django.test.TestCase`` / ``TransactionTestCase``: forget warm activations and
    caller registrations around every test, and offer :meth:`drain`::

        class CartTests(SolidObjectsTestMixin, TestCase):
            def test_checkout(self):
                Cart.ref("a").add_item("shirt")
                self.drain()
    """

    @classmethod
    def setUpClass(cls) -> None:
        reset_runtime_state()
        super().setUpClass()  # type: ignore[misc]  # the TestCase this is mixed into

    def _post_teardown(self) -> None:  # Django's hook after each test and its rollback
        try:
            super()._post_teardown()  # type: ignore[misc]  # the TestCase mixed into
        finally:
            reset_runtime_state()

    def drain(
        self,
        *,
        at: datetime | None = None,
        roles: Sequence[str] = ROLES,
        max_rounds: int = 100,
        using: str | None = None,
    ) -> DrainReport:
        return drain(at=at, roles=roles, max_rounds=max_rounds, using=using)


class Paused:
    """A pause point held for a test: the first ``times`` threads that reach it (and pass
    ``only``) wait there until :meth:`release`; any later arrival passes straight through."""

    def __init__(self, name: str, times: int, only: Callable[[], bool] | None) -> None:
        self.name = name
        self._times = times
        self._only = only
        self._lock = threading.Lock()
        self._reached = threading.Event()
        self._released = threading.Event()
        self.threads: list[str] = []

    def _hook(self, name: str) -> None:
        if self._only is not None and not self._only():
            return
        with self._lock:
            if len(self.threads) >= self._times:
                return
            self.threads.append(threading.current_thread().name)
        self._reached.set()
        if not self._released.wait(timeout=120):
            raise TimeoutError(f"pause point {name!r} was never released by the test")

    def wait_reached(self, timeout: float = 30.0) -> None:
        """Block until a thread waits at the point (``TimeoutError`` if none comes)."""
        if not self._reached.wait(timeout):
            raise TimeoutError(f"no thread reached pause point {self.name!r} in {timeout}s")

    @property
    def reached(self) -> bool:
        return self._reached.is_set()

    def release(self) -> None:
        """Let the held thread(s), and every later arrival, go on."""
        self._released.set()


@contextmanager
def pause_at(
    name: str, *, times: int = 1, only: Callable[[], bool] | None = None
) -> Iterator[Paused]:
    """Hold the first ``times`` threads that reach pause point ``name`` until the test calls
    :meth:`Paused.release` (or the block ends). ``only`` picks which threads to hold, e.g.
    ``only=lambda: threading.current_thread() is worker``."""
    paused = Paused(name, times, only)
    pause_points.install(name, paused._hook)
    try:
        yield paused
    finally:
        pause_points.uninstall(name)
        paused.release()
