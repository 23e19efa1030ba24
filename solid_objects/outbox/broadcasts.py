"""Broadcast delivery: the ``broadcasts`` outbox → Django Channels groups (PRODUCT §A10).

A committed turn that changed an ``@observable`` inserted one ``pending`` row per changed
observable. The broadcast role delivers them to the actor's group
(:func:`solid_objects.channels_groups.group_name`) as::

    {"type": "solid_objects.broadcast", "actor_type": ..., "actor_id": ...,
     "observable": ..., "value": ..., "instance_id": ..., "state_revision": ...,
     "broadcast_id": ...}

``state_revision`` is the sequence of the message whose turn made the change, so
``(instance_id, state_revision)`` orders every broadcast an actor ever sends.

**Order.** Rows of one actor are delivered in id order (commit order), one worker at a time:
a row is claimed only together with every unfinished (``pending`` or ``processing``) row of
its actor that precedes it. While worker A's claim transaction holds the lock on an actor's
first unfinished row, any other worker still sees that row as unfinished and not in its own
claim, so it claims nothing of that actor; once A commits, the rows are ``processing`` and
block the same way until A finishes them. A failed delivery puts the failed row back to
``pending`` with a backoff (``RETRY_DELAY``) and hands the actor's later rows of the same
batch back untouched, so they wait for it; after ``MAX_ATTEMPTS`` failures the row is
``dead`` (kept for inspection, like a dead effect) and the actor's next row goes out.

Delivery is at least once: a worker that dies after ``group_send`` but before recording the
delivery sends the row again after dead-process cleanup. Clients ignore a revision they
have already seen. A worker whose database connection fails while recording keeps the
outcomes and writes them first once the database answers again (fenced on the claim, so
writing them twice changes nothing), instead of leaving the rows ``processing`` under a live
process that nobody would ever clean up.

Statements per batch of up to :data:`BATCH_SIZE` rows: one probe (the only statement of an
empty poll), four in the claim transaction, one to three to record the outcomes.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass
from typing import Any

from django.db import DatabaseError, InterfaceError, connections, transaction

from .. import payloads, signals
from ..channels_groups import group_name
from ..conf import get_settings
from ..db import broadcasts as queries
from ..db.dialect import Dialect
from ..db.vendors import dialect_for
from ..runtime.roles import Role
from ..turn import describe_exception

logger = logging.getLogger("solid_objects")

#: Rows claimed per round.
BATCH_SIZE = 100
#: The Channels message type; a consumer handles it in ``solid_objects_broadcast()``.
MESSAGE_TYPE = "solid_objects.broadcast"
#: Seconds one ``group_send`` may take before it counts as a failed delivery.
SEND_TIMEOUT = 10.0
#: How often a role without a channel layer repeats its warning (seconds).
NO_LAYER_WARNING_INTERVAL = 600.0


@dataclass(slots=True)
class BroadcastRow:
    """A claimed row, with what its Channels message needs."""

    id: int
    broadcast_id: str
    instance_id: int
    observable: str
    value: Any
    attempt_count: int  # failed attempts so far
    actor_type: str
    actor_id: str
    state_revision: int

    @property
    def group(self) -> str:
        return group_name(self.actor_type, self.actor_id)

    def message(self) -> dict[str, Any]:
        return {
            "type": MESSAGE_TYPE,
            "actor_type": self.actor_type,
            "actor_id": self.actor_id,
            "observable": self.observable,
            "value": self.value,
            "instance_id": self.instance_id,
            "state_revision": self.state_revision,
            "broadcast_id": self.broadcast_id,
        }

    def identity(self) -> dict[str, Any]:
        """Signal payload: identities only, never the value."""
        return {
            "broadcast_id": self.broadcast_id,
            "actor_type": self.actor_type,
            "actor_id": self.actor_id,
            "instance_id": self.instance_id,
            "observable": self.observable,
            "state_revision": self.state_revision,
        }


@dataclass(slots=True)
class Outcome:
    row: BroadcastRow
    error: BaseException | None = None
    deferred: bool = False  # not sent: an earlier row of the same actor failed
    duration: float = 0.0


# -- the protocol (its statements: :mod:`solid_objects.db.broadcasts`) -------------------------
def has_due(cursor: Any, dialect: Dialect) -> bool:
    """The idle poll: is any pending row due? (one indexed, non-locking statement)"""
    return queries.any_due(cursor, dialect)


def claim(cursor: Any, dialect: Dialect, process_id: str, limit: int) -> list[BroadcastRow]:
    """Inside the caller's transaction: move due rows to ``processing`` for ``process_id``,
    each only together with every unfinished row of its actor that precedes it."""
    candidates = queries.due_candidates(cursor, dialect, limit)
    if not candidates:
        return []
    instances = sorted(set(candidates.values()))
    unfinished = queries.unfinished_of_actors(cursor, dialect, instances, max(candidates))
    ids, waiting = _claimable(candidates, unfinished)
    for retrying_id, blocked in waiting.items():
        # Rows stuck behind a retrying row leave the poll window until its retry is due,
        # so they cannot crowd other actors' rows out of the next claims.
        queries.follow_leader(cursor, dialect, blocked, retrying_id)
    if not ids:
        return []
    queries.mark_processing(cursor, dialect, process_id, ids)
    return [BroadcastRow(*row) for row in queries.claimed_rows(cursor, dialect, ids)]


def _claimable(
    candidates: dict[int, int], unfinished: list[tuple[int, int, bool]]
) -> tuple[list[int], dict[int, list[int]]]:
    """Per actor, the longest run of its unfinished rows (in id order) that we locked; and,
    per row waiting for its retry, the locked rows of its actor stuck behind it."""
    ids: list[int] = []
    blocked_by: dict[int, int | None] = {}  # instance -> the retrying row blocking it
    waiting: dict[int, list[int]] = {}
    for instance_id, row_id, retrying in unfinished:
        if instance_id in blocked_by:
            blocker = blocked_by[instance_id]
            if blocker is not None and row_id in candidates:
                waiting[blocker].append(row_id)
            continue
        if row_id in candidates:
            ids.append(row_id)
        elif retrying:
            blocked_by[instance_id] = row_id
            waiting[row_id] = []
        else:  # in flight elsewhere, or locked by another claim: wait for it
            blocked_by[instance_id] = None
    return ids, {blocker: rows for blocker, rows in waiting.items() if rows}


def record(cursor: Any, dialect: Dialect, process_id: str, outcomes: list[Outcome]) -> None:
    """Inside the caller's transaction: write what happened to each claimed row. Only rows
    still ``processing`` under ``process_id`` change (a claim handed back by dead-process
    cleanup belongs to whoever claims it next)."""
    delivered = [o.row.id for o in outcomes if o.error is None and not o.deferred]
    if delivered:
        queries.mark_delivered(cursor, dialect, process_id, delivered)
    settings = get_settings()
    failed_row: dict[int, int] = {}
    for outcome in outcomes:
        if outcome.error is None:
            continue
        failed_row[outcome.row.instance_id] = outcome.row.id
        attempt = outcome.row.attempt_count + 1
        queries.mark_failed(
            cursor,
            dialect,
            process_id,
            outcome.row.id,
            payloads.encode(describe_exception(outcome.error), what="error"),
            retry_in=None if attempt >= settings.MAX_ATTEMPTS else settings.retry_delay(attempt),
        )
    deferred: dict[int, list[int]] = {}
    for outcome in outcomes:
        if outcome.deferred:
            deferred.setdefault(failed_row[outcome.row.instance_id], []).append(outcome.row.id)
    for leader, ids in deferred.items():
        # Later rows of the actor wait for the failed one's retry (or go on if it is dead).
        queries.follow_leader(cursor, dialect, ids, leader, fenced_for=process_id)


# -- delivery ----------------------------------------------------------------------------------
def channel_layer() -> Any:
    """The default Channels layer, or ``None`` when Channels is absent or not configured."""
    try:
        from channels.layers import get_channel_layer
    except ImportError:
        return None
    return get_channel_layer()


def send(layer: Any, rows: list[BroadcastRow]) -> list[Outcome]:
    """``group_send`` each row in order (one event loop for the batch). After a failure the
    actor's later rows are not sent (deferred), so nothing overtakes the failed one."""
    from asgiref.sync import async_to_sync

    return async_to_sync(_send_all)(layer, rows)


async def _send_all(layer: Any, rows: list[BroadcastRow]) -> list[Outcome]:
    outcomes: list[Outcome] = []
    failed: set[int] = set()
    for row in rows:
        if row.instance_id in failed:
            outcomes.append(Outcome(row, deferred=True))
            continue
        started = time.monotonic()
        try:
            await asyncio.wait_for(layer.group_send(row.group, row.message()), SEND_TIMEOUT)
        except Exception as exc:
            failed.add(row.instance_id)
            outcomes.append(Outcome(row, error=exc, duration=time.monotonic() - started))
        else:
            outcomes.append(Outcome(row, duration=time.monotonic() - started))
    return outcomes


def deliver_due(
    alias: str,
    process_id: str,
    *,
    layer: Any = None,
    limit: int = BATCH_SIZE,
    unrecorded: list[tuple[str, list[Outcome]]] | None = None,
) -> list[Outcome]:
    """One round: claim due rows, deliver them, record the outcomes, send the signals.
    Returns the outcomes (empty when nothing was due). When recording fails with a database
    error, ``(process_id, outcomes)`` is appended to ``unrecorded`` (for
    :func:`record_outcomes` later) and the error propagates."""
    layer = layer if layer is not None else channel_layer()
    if layer is None:
        raise NoChannelLayer(
            "broadcasts need a Channels layer: install channels and set CHANNEL_LAYERS"
        )
    connection = connections[alias]
    dialect = dialect_for(connection)
    with connection.cursor() as cursor:
        if not has_due(cursor, dialect):
            return []
    with transaction.atomic(using=alias), connection.cursor() as cursor:
        rows = claim(cursor, dialect, process_id, limit)
    if not rows:
        return []
    outcomes = send(layer, rows)
    try:
        record_outcomes(alias, process_id, outcomes)
    except (DatabaseError, InterfaceError):
        if unrecorded is not None:
            unrecorded.append((process_id, outcomes))
        raise
    return outcomes


def record_outcomes(alias: str, process_id: str, outcomes: list[Outcome]) -> None:
    """Write the outcomes of rows ``process_id`` claimed (one short transaction), then send
    their signals."""
    connection = connections[alias]
    with transaction.atomic(using=alias), connection.cursor() as cursor:
        record(cursor, dialect_for(connection), process_id, outcomes)
    _signal(outcomes)


def _signal(outcomes: list[Outcome]) -> None:
    max_attempts = get_settings().MAX_ATTEMPTS
    for outcome in outcomes:
        if outcome.deferred:
            continue
        attempt = outcome.row.attempt_count + 1
        if outcome.error is None:
            signals.send(
                signals.broadcast_delivered,
                attempt=attempt,
                duration=outcome.duration,
                **outcome.row.identity(),
            )
        else:
            signals.send(
                signals.broadcast_failed,
                attempt=attempt,
                dead=attempt >= max_attempts,
                error_class=type(outcome.error).__qualname__,
                duration=outcome.duration,
                **outcome.row.identity(),
            )


class NoChannelLayer(RuntimeError):
    """Channels is not installed or ``CHANNEL_LAYERS`` has no default layer."""


# -- the role ----------------------------------------------------------------------------------
class BroadcastRole(Role):
    """Delivers pending broadcasts (``manage.py run_broadcast_worker``, or ``--all-roles``)."""

    name = "broadcasts"
    kind = "broadcast"
    doorbell_kind = "broadcast"

    def __init__(self, supervisor: Any, index: int = 0) -> None:
        super().__init__(supervisor, index)
        self._warned_at: float | None = None
        self._unrecorded: list[tuple[str, list[Outcome]]] = []

    def run_once(self) -> bool:
        # Outcomes a database error kept us from writing: write them first (never send those
        # rows again). A database error here backs the loop off and comes back.
        while self._unrecorded:
            record_outcomes(self.alias, *self._unrecorded[0])
            self._unrecorded.pop(0)
        layer = self.channel_layer()
        if layer is None:
            now = time.monotonic()
            if self._warned_at is None or now - self._warned_at > NO_LAYER_WARNING_INTERVAL:
                self._warned_at = now
                logger.warning(
                    "%s: no Channels layer (install channels and set CHANNEL_LAYERS); "
                    "broadcasts stay pending",
                    self.label,
                )
            return False
        outcomes = deliver_due(
            self.alias, self.process_id, layer=layer, unrecorded=self._unrecorded
        )
        return bool(outcomes)

    def channel_layer(self) -> Any:
        """The layer this role sends to (the embedded role of a web process overrides it)."""
        return channel_layer()
