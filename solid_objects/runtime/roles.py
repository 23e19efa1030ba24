"""Roles: the loops a worker process runs (actor turns; effects, reminders and broadcasts
join them as further roles). Each role thread polls adaptively: after work or a wake-up it
waits ``POLLING_INTERVAL``; each empty poll doubles the wait up to ``IDLE_POLLING_INTERVAL``.
A database error is logged, the thread's connection is closed and the loop backs off and
resumes, so a database restart never kills the worker. A lease held by a pass that a database
error interrupted is given back as soon as the database answers again (fenced by its token),
instead of blocking its actor until the lease expires.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Protocol

from django.db import DatabaseError, InterfaceError, connections, transaction

from ..activation import ActivationCache
from ..batch_pass import batch_size, run_batch
from ..conf import get_settings
from ..db.connections import abandon, release_abandoned
from ..db.cursor import Cursor
from ..db.dialect import Dialect
from ..db.rows import LeaseRow
from ..db.vendors import dialect_for
from ..db.work_filter import WorkFilter
from ..errors import LostActivation, StateMigrationError, UnknownActorType
from ..lease import acquire
from ..passes import run_pass
from ..pause_points import pause_point
from . import connection_names
from .wakeup import doorbell

logger = logging.getLogger("solid_objects")


class RoleHost(Protocol):
    """What a role needs of the process running it (the
    :class:`~solid_objects.runtime.supervisor.Supervisor`)."""

    alias: str
    stopping: threading.Event
    activation_cache: ActivationCache
    #: The actors this process takes (``run_actor_worker --actor-types``...), or all.
    work_filter: WorkFilter | None

    def track(self, lease: LeaseRow) -> None:
        """Hold ``lease`` for renewal while a pass runs."""

    def untrack(self, lease: LeaseRow) -> None:
        """Stop renewing ``lease``."""


#: How many due ready rows one scan looks at for candidate actors.
CANDIDATE_WINDOW = 64
#: Units of work done one actor at a time after a batch that leased nothing while a single
#: lease found a free candidate (cold actors of types that never commit with others).
BATCH_BACKOFF = 8
#: Units of work done one actor at a time after a batch handed turns back behind a slow one
#: (each hand-back costs a few statements per turn: slow turns are best leased one by one).
HELD_UP_BACKOFF = 64


def stale_scan_interval() -> float:
    """How often the actor role looks for claims whose lease expired: half a lease, so an
    abandoned turn waits at most 1.5 leases, and an idle role stays under one query/s."""
    return max(get_settings().LEASE_DURATION / 2, 1.0)


class Role:
    """One loop of work. Subclasses implement :meth:`run_once`."""

    name = "role"
    kind = "worker"  # the ``processes.kind`` its registry row carries
    doorbell_kind = "work"

    def __init__(self, supervisor: RoleHost, index: int = 0) -> None:
        self.supervisor = supervisor
        self.index = index
        self.alias = supervisor.alias
        self.process_id = ""

    @property
    def label(self) -> str:
        return f"{self.name}-{self.index}"

    def run_once(self) -> bool:
        """Do one unit of work; ``True`` if there was work (poll again at once)."""
        raise NotImplementedError

    def on_stop(self) -> None:
        """Called once in the role's thread after the loop ends."""

    def loop(self) -> None:
        connection_names.use(f"{self.kind} {self.label}")
        settings = get_settings()
        bell = doorbell(self.doorbell_kind)
        stop = self.supervisor.stopping
        interval = settings.POLLING_INTERVAL
        backoff = settings.POLLING_INTERVAL
        try:
            while not stop.is_set():
                seen = bell.generation
                try:
                    worked = self.run_once()
                except (DatabaseError, InterfaceError) as exc:
                    logger.warning(
                        "%s: database error, backing off %.1fs: %s", self.label, backoff, exc
                    )
                    _close_connection(self.alias)
                    stop.wait(backoff)
                    backoff = min(backoff * 2, 10.0)
                    continue
                backoff = settings.POLLING_INTERVAL
                if worked:
                    interval = settings.POLLING_INTERVAL
                    continue
                if bell.wait(seen, interval):
                    interval = settings.POLLING_INTERVAL
                else:
                    interval = min(interval * 2, settings.IDLE_POLLING_INTERVAL)
        finally:
            try:
                self.on_stop()
            finally:
                _close_connection(self.alias)
                connection_names.forget()


def _close_connection(alias: str) -> None:
    try:
        connections[alias].close()
    except Exception:
        logger.debug("closing a broken connection failed", exc_info=True)


class ActorRole(Role):
    """Claims actors with due messages and drains them in activation passes."""

    name = "actors"
    kind = "worker"
    doorbell_kind = "work"

    def __init__(self, supervisor: RoleHost, index: int = 0) -> None:
        super().__init__(supervisor, index)
        self.cache: ActivationCache = supervisor.activation_cache
        self._next_stale_scan = 0.0
        #: The last unit of work was a batch of cold actors (the next one goes to a hot
        #: actor, if any, so neither kind of work can starve the other).
        self._batched = False
        #: Units of work to do without trying a batch: the last try leased nothing while
        #: a single lease found a free candidate (of a type that never commits with others).
        self._skip_batches = 0

    def candidates(self) -> dict[int, int]:
        """Candidate instances, oldest work first, each with how many of its due messages
        the scan saw (0: found by the scan for claims left without a lease)."""
        connection = connections[self.alias]
        dialect = dialect_for(connection)
        with connection.cursor() as cursor:
            work = self.supervisor.work_filter
            found = dialect.due_instances(cursor, CANDIDATE_WINDOW, work)
            now = time.monotonic()
            if now >= self._next_stale_scan:
                self._next_stale_scan = now + stale_scan_interval()
                for instance_id in stale_claims(cursor, dialect, work):
                    found.setdefault(instance_id, 0)
        return found

    def others_waiting(self, instance_id: int) -> bool:
        """Whether an actor other than ``instance_id`` has due work (one short read)."""
        connection = connections[self.alias]
        with connection.cursor() as cursor:
            return dialect_for(connection).others_due(
                cursor, instance_id, self.supervisor.work_filter
            )

    def run_once(self) -> bool:
        if release_abandoned(self.alias):
            self._next_stale_scan = 0.0  # their claimed turns are stale now: recover them
        found = self.candidates()
        if not found:
            return False
        ids = list(found)
        batched = self._run_batch(found)
        if batched:
            return True
        try:
            activation = acquire(self.alias, self.process_id, ids, self.cache)
        except (StateMigrationError, UnknownActorType) as exc:
            logger.error("%s: %s", self.label, exc)
            return True
        if activation is None:
            return False  # every candidate was taken (by other threads or processes)
        if batched == 0:
            # The batch leased none of the cold candidates, yet one of them was free: they
            # are of types that never commit with others. Lease one at a time for a while.
            self._skip_batches = BATCH_BACKOFF
        self.supervisor.track(activation.lease)
        try:
            run_pass(
                activation,
                should_stop=self.supervisor.stopping.is_set,
                cache=self.cache,
                others_waiting=lambda: self.others_waiting(activation.lease.instance_id),
            )
        except LostActivation as exc:
            logger.warning("%s: %s", self.label, exc)
        except (DatabaseError, InterfaceError):
            # The connection died mid-pass, or the last commit's outcome is unknown: the
            # lease is given back at the next run_once (or by any other thread of this
            # process that gets there first), once the database answers again; the scan
            # that follows finds its claim stale.
            abandon(self.alias, activation.lease)
            self._next_stale_scan = 0.0
            raise
        finally:
            self.supervisor.untrack(activation.lease)
        return True

    def _run_batch(self, found: dict[int, int]) -> int | None:
        """Cold actors (one due message seen) are leased and committed together, unless
        the last unit of work was such a batch and a hot actor is waiting. Returns how many
        actors the batch leased (``None``: no batch was tried)."""
        size = batch_size()
        cold = [instance_id for instance_id, seen in found.items() if seen == 1]
        hot_waiting = len(cold) < len(found)
        if size < 2 or len(cold) < 2 or (self._batched and hot_waiting) or self._skip_batches:
            self._batched = False
            self._skip_batches = max(self._skip_batches - 1, 0)
            return None
        try:
            leased = run_batch(
                self.alias,
                self.process_id,
                cold,
                limit=size,
                cache=self.cache,
                should_stop=self.supervisor.stopping.is_set,
                track=self.supervisor.track,
                untrack=self.supervisor.untrack,
                held_up=self._held_up,
            )
        except (DatabaseError, InterfaceError):
            self._next_stale_scan = 0.0  # the batch's claimed turns may be stale now
            raise
        self._batched = leased > 0
        return leased

    def _held_up(self, handed_back: int) -> None:
        """A slow turn made the last batch hand turns back: these actors' turns may take
        long, so lease one at a time for a while (other threads run the rest meanwhile)."""
        self._skip_batches = HELD_UP_BACKOFF

    def on_stop(self) -> None:
        self.cache.clear()


def stale_claims(cursor: Cursor, dialect: Dialect, work: WorkFilter | None = None) -> list[int]:
    """Instances whose claimed turn belongs to no live lease (expired, released or taken
    over): the next lease on them recovers the claim (retry, or dead letter at the limit)."""
    return dialect.claims_without_lease(cursor, work)


def renew_leases(alias: str, leases: list[LeaseRow]) -> None:
    """Extend the leases of turns still in flight (long handlers)."""
    if not leases:
        return
    from .. import signals

    connection = connections[alias]
    dialect = dialect_for(connection)
    seconds = get_settings().LEASE_DURATION
    pause_point("renew.before")
    with transaction.atomic(using=alias), connection.cursor() as cursor:
        # In instance order: two workers renewing overlapping rows (one of them holding a
        # lease that expired and was taken over) lock them in the same order.
        for lease in sorted(leases, key=lambda lease: lease.instance_id):
            if dialect.renew(cursor, lease, seconds):
                signals.send(
                    signals.activation_renewed,
                    actor_type=lease.actor_type,
                    actor_id=lease.actor_id,
                    instance_id=lease.instance_id,
                    generation=lease.generation,
                )
