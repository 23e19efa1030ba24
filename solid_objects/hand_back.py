"""Handing back the turns of a batch that a slow turn holds up.

A batch (:mod:`solid_objects.batch_pass`) leases several cold actors and claims their first
turns together, then runs those turns one after another in one worker thread. A turn that
blocks (a task waiting on I/O or on another task) would keep the turns behind it leased and
claimed, though other threads and workers are free to run them, and a turn waiting for one
of them would wait for ever. So while a batch runs, a watchdog thread of the process looks
at it: once its current turn has run for ``MAX_COMMIT_DELAY``, the turns not started yet
are handed back: each put back in its mailbox with its attempt uncounted and its lease
released, in one transaction on the watchdog's own connection, under the instance row lock
and only while the lease is still the batch's (:meth:`Dialect.hold_lease`), as a refused
activation is. The batch's thread skips them; other threads and workers take them at once
(the work doorbell rings).

A hand-back the server rolls back to break a deadlock, or whose connection was lost, runs
again (:func:`~solid_objects.db.connections.recovering`). One that fails for good
(the database is unreachable) gives the leases back as soon as the database answers, as an
activation that lost its connection does; the claims left on them are then recovered like
any other a dead activation left, with their attempt counted.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable

from django.db import DatabaseError, InterfaceError, connections, transaction

from .activation import Activation
from .conf import get_settings
from .db import notify
from .db.connections import abandon, close_quietly, recovering
from .db.rows import LeaseRow
from .db.vendors import dialect_for
from .pause_points import pause_point
from .runtime.wakeup import notify_local, progress

logger = logging.getLogger("solid_objects")


class Unstarted:
    """The turns of one batch not started yet, shared by the batch's thread (which starts
    them one by one) and the watchdog (which may take all that are left)."""

    def __init__(
        self,
        alias: str,
        activations: Iterable[Activation],
        untrack: Callable[[LeaseRow], None] | None = None,
    ) -> None:
        self.alias = alias
        self.untrack = untrack
        self._lock = threading.Lock()
        self._waiting = {a.lease.instance_id: a for a in activations}
        #: When the turn running now started (monotonic); the watchdog reads it.
        self.turn_started = time.monotonic()
        #: Instance ids of the turns handed back.
        self.handed_back: set[int] = set()

    def start(self, activation: Activation) -> bool:
        """Before running ``activation``'s turn: ``False`` if it was handed back."""
        with self._lock:
            if self._waiting.pop(activation.lease.instance_id, None) is None:
                return False
            self.turn_started = time.monotonic()
            return True

    def waiting(self) -> bool:
        with self._lock:
            return bool(self._waiting)

    def take(self) -> list[Activation]:
        """Every turn not started yet, which the batch will then skip."""
        with self._lock:
            taken = list(self._waiting.values())
            self._waiting.clear()
            self.handed_back.update(a.lease.instance_id for a in taken)
        return taken


def hand_back(unstarted: Unstarted) -> int:
    """Give back the turns of ``unstarted`` not started yet (see the module docstring);
    returns how many were put back."""
    taken = unstarted.take()
    if not taken:
        return 0
    for activation in taken:
        if unstarted.untrack is not None:
            unstarted.untrack(activation.lease)
    alias = unstarted.alias
    try:
        given = _give_back(alias, taken)
    except (DatabaseError, InterfaceError):
        # The leases are still the batch's: release them as soon as the database answers
        # (the next unit of work of any thread of this process does); the claims left on
        # them are then stale, and the scan that follows puts them back, attempt counted.
        for activation in taken:
            abandon(alias, activation.lease)
        notify_local("work")
        logger.warning(
            "handing back %d turns failed; their leases are released once the database "
            "answers and recovery puts the turns back",
            len(taken),
            exc_info=True,
        )
        return 0
    pause_point("hand_back.given")
    for lease in given:
        progress.ended(alias, lease.instance_id, lease.generation)
    notify_local("work")
    from .runtime.wakeup.hints import publish_work

    publish_work()
    logger.info("handed back %d turns held up behind a slow turn", len(given))
    return len(given)


def _give_back(alias: str, taken: list[Activation]) -> list[LeaseRow]:
    """The hand-back's transaction, through :func:`~.db.connections.recovering`: run again
    when the server broke a deadlock by rolling it back (on MariaDB the batch's own commit,
    on other rows, may hold gap locks it needs) or the connection was lost (safe: a lease
    already given back no longer holds); returns the leases given back."""
    try:
        return recovering(
            alias, "hand-back", lambda attempt: _give_back_once(alias, taken), idempotent=True
        )
    finally:
        close_quietly(alias)  # the watchdog's connection is only needed now and then


def _give_back_once(alias: str, taken: list[Activation]) -> list[LeaseRow]:
    connection = connections[alias]
    dialect = dialect_for(connection)
    given = []
    with transaction.atomic(using=alias), connection.cursor() as cursor:
        for activation in sorted(taken, key=lambda a: a.lease.instance_id):
            first = activation.first
            lease = activation.lease
            if first is None or not dialect.hold_lease(cursor, lease):
                continue  # the lease ran out meanwhile: recovery has it
            dialect.unclaim_to_ready(cursor, lease.instance_id, first.id)
            dialect.uncount_attempt(cursor, first.id)
            dialect.release(cursor, lease)
            given.append(lease)
        if given and notify.notify_enabled(dialect):
            notify.send(cursor, "work")
    return given


class Watchdog:
    """One thread per process that hands back the unstarted turns of every batch whose
    current turn has run for longer than ``MAX_COMMIT_DELAY``."""

    def __init__(self) -> None:
        self._condition = threading.Condition()
        self._batches: set[Unstarted] = set()
        self._thread: threading.Thread | None = None

    def watch(self, unstarted: Unstarted) -> None:
        with self._condition:
            self._batches.add(unstarted)
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(
                    target=self._loop, name="solid_objects hand-back watchdog", daemon=True
                )
                self._thread.start()
            self._condition.notify()

    def unwatch(self, unstarted: Unstarted) -> None:
        with self._condition:
            self._batches.discard(unstarted)

    def _due(self, bound: float) -> tuple[list[Unstarted], float | None]:
        """The batches held up now, and how long to sleep before the next could be."""
        now = time.monotonic()
        # A batch whose turns have all started has nothing left to hand back.
        self._batches = {b for b in self._batches if b.waiting()}
        due = [b for b in self._batches if now - b.turn_started >= bound]
        self._batches.difference_update(due)
        if not self._batches:
            return due, None
        return due, max(min(b.turn_started for b in self._batches) + bound - now, 0.001)

    def _loop(self) -> None:
        while True:
            with self._condition:
                while not self._batches:
                    self._condition.wait()
                due, sleep = self._due(get_settings().MAX_COMMIT_DELAY)
                if not due:
                    self._condition.wait(sleep)
                    continue
            for batch in due:
                try:
                    hand_back(batch)
                except Exception:  # never let the watchdog die
                    logger.exception("handing back the turns of a batch failed")


#: The process's watchdog.
watchdog = Watchdog()
