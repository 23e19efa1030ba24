"""Building an activation: the actor object behind a lease, warm or decoded and migrated.

A lease and its first claimed turn (:class:`Claim`, taken by :mod:`solid_objects.lease`)
become an :class:`Activation`: the actor object, its committed state as stored and the
fence the commit will check. :class:`ActivationCache` keeps idle actors warm between
passes, so a lease whose state revision has not changed neither transfers nor decodes the
state again. When the pass ends, :func:`shelve` puts the actor back in the cache.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

from django.db import connections, transaction

from . import payloads, signals
from .conf import get_settings
from .db.rows import LeaseRow, MessageRow
from .db.vendors import dialect_for
from .errors import SolidObjectsError, StateMigrationError, UnknownActorType
from .registry import get_spec
from .spec import ActorInstance, ActorSpec

logger = logging.getLogger("solid_objects")


@dataclass
class CachedActor:
    revision: int
    actor: ActorInstance
    state_json: str
    state_version: int
    cached_at: float


class ActivationCache:
    """Idle activations kept warm: the actor object and its committed state's revision.

    On the next lease the database returns no state when the revision still matches, so a
    warm actor neither transfers nor decodes its state again.
    """

    def __init__(self, max_entries: int = 1000) -> None:
        self.max_entries = max_entries
        self._entries: OrderedDict[int, CachedActor] = OrderedDict()
        self._lock = threading.Lock()

    def take(self, instance_id: int) -> CachedActor | None:
        """Remove and return the entry (the caller holds the lease, so nobody else may use
        the actor object until it is put back)."""
        with self._lock:
            entry = self._entries.pop(instance_id, None)
        if entry is None:
            return None
        if time.monotonic() - entry.cached_at > get_settings().IDLE_DEACTIVATION_TIMEOUT:
            deactivate(entry.actor)
            return None
        return entry

    def put(self, instance_id: int, entry: CachedActor) -> None:
        evicted = []
        with self._lock:
            self._entries[instance_id] = entry
            self._entries.move_to_end(instance_id)
            while len(self._entries) > self.max_entries:
                evicted.append(self._entries.popitem(last=False)[1])
        for old in evicted:
            deactivate(old.actor)

    def evict(self, instance_id: int) -> None:
        with self._lock:
            entry = self._entries.pop(instance_id, None)
        if entry is not None:
            deactivate(entry.actor)

    def clear(self) -> None:
        with self._lock:
            entries = list(self._entries.values())
            self._entries.clear()
        for entry in entries:
            deactivate(entry.actor)

    def __len__(self) -> int:
        return len(self._entries)

    def revisions_of(self, instance_ids: list[int]) -> dict[int, int]:
        with self._lock:
            return {i: self._entries[i].revision for i in instance_ids if i in self._entries}


def deactivate(actor: ActorInstance) -> None:
    """The actor leaves memory (its ``on_deactivate`` hook; a failure is only logged)."""
    try:
        actor.on_deactivate()
    except Exception:
        logger.exception("on_deactivate of %s/%s failed", type(actor).__name__, actor.actor_id)


@dataclass(slots=True)
class Claim:
    """A lease taken and its first turn claimed, committed or about to be."""

    lease: LeaseRow
    first: MessageRow
    #: The due messages after ``first`` its claim read (``None``: not read).
    ahead: list[MessageRow] | None = None


@dataclass
class Activation:
    alias: str
    lease: LeaseRow
    spec: ActorSpec
    actor: ActorInstance
    state_json: str  # the committed state, as stored
    stored_state_version: int
    dirty: bool = False  # state must be written even if no turn changed it (migration)
    first: MessageRow | None = None  # the turn claimed together with the lease
    more_due: bool = True  # whether a due message follows it (False: no read-ahead)
    more_due_known: bool = False  # ``more_due`` was read with the claim, not assumed
    #: The due messages after the claimed turn, read by the commit that claimed it (MySQL,
    #: SQLite): the next group's read-ahead, already done.
    ahead: list[MessageRow] | None = None
    started_at: float = field(default_factory=time.monotonic)
    observed: dict[str, Any] = field(default_factory=dict)
    #: The last commit released the lease with due work left and no hint was sent with it.
    handed_off: bool = False
    #: The last commit sent the ``result`` hint for the calls it finished itself.
    results_hinted: bool = False
    #: How long the last fenced commit took (seconds; the ``turns_committed`` signal's).
    commit_seconds: float = 0.0


def activate(alias: str, claim: Claim, cache: ActivationCache | None = None) -> Activation:
    """After the claim committed: build the actor (cached, or decoded and migrated).

    An actor that cannot be built (its state is newer than the code, its type is unknown)
    is refused: its claimed turn goes back to ready uncounted and the lease is released.
    """
    lease = claim.lease
    signals.send(
        signals.activation_claimed,
        actor_type=lease.actor_type,
        actor_id=lease.actor_id,
        instance_id=lease.instance_id,
        generation=lease.generation,
        owner_id=lease.owner_id,
    )
    try:
        spec = get_spec(lease.actor_type)
        entry = cache.take(lease.instance_id) if cache is not None else None
        activation = _from_cache(alias, lease, spec, entry) or _from_state(alias, lease, spec)
    except (StateMigrationError, UnknownActorType) as exc:
        _refuse(alias, lease, claim.first, exc)
        raise
    if spec.observables:
        activation.observed = observe(activation)
    activation.first = claim.first
    activation.ahead = claim.ahead
    return activation


def _from_cache(
    alias: str, lease: LeaseRow, spec: ActorSpec, entry: CachedActor | None
) -> Activation | None:
    """The warm actor, when the lease sent no state and nothing changed since it was cached."""
    if entry is None:
        return None
    if (
        lease.state is None
        and entry.revision == lease.state_revision
        # A migration writes state without a new revision: newer code may have upgraded
        # the row since this entry was cached (and an older version must not be written).
        and entry.state_version == lease.state_version
        and type(entry.actor) is spec.cls
    ):
        return Activation(alias, lease, spec, entry.actor, entry.state_json, entry.state_version)
    deactivate(entry.actor)
    return None


def _from_state(alias: str, lease: LeaseRow, spec: ActorSpec) -> Activation:
    """A new actor object on the stored state, migrated to the code's state version."""
    if lease.state is None:  # the cached entry expired between the lease and now
        lease.state = _load_state(alias, lease.instance_id)
    state_json = lease.state if isinstance(lease.state, str) else payloads.encode(lease.state)
    state = payloads.decode(state_json)
    if not isinstance(state, dict):
        state = {}
    code_version = spec.cls.state_version
    dirty = lease.state_version != code_version
    state = spec.migrate(state, lease.state_version, lease.actor_id)
    actor = spec.cls(lease.actor_id, state)
    actor.on_activate()
    if dirty:
        try:
            state_json = payloads.encode(actor._state, what="state")
        except SolidObjectsError as exc:  # refused like any failed migration (released)
            raise StateMigrationError(
                f"the migrated state of {lease.actor_type}/{lease.actor_id} cannot be stored: {exc}"
            ) from exc
    return Activation(alias, lease, spec, actor, state_json, code_version, dirty=dirty)


def _load_state(alias: str, instance_id: int) -> str:
    connection = connections[alias]
    with connection.cursor() as cursor:
        value = dialect_for(connection).load_state(cursor, instance_id)
    return value if isinstance(value, str) else payloads.encode(value)


def _refuse(alias: str, lease: LeaseRow, first: MessageRow, exc: Exception) -> None:
    """Activation refused (state newer than code, type unknown): put the claimed message
    back uncounted, back off and release. The message waits for code that can run it."""
    connection = connections[alias]
    dialect = dialect_for(connection)
    with transaction.atomic(using=alias), connection.cursor() as cursor:
        # Like every change to the claim outside the fenced commit: under the row lock and
        # only while the lease is ours (cleanup may have requeued the claim meanwhile).
        if not dialect.hold_lease(cursor, lease):
            logger.error("activation of %s/%s refused: %s", lease.actor_type, lease.actor_id, exc)
            return
        dialect.unclaim_to_ready(cursor, lease.instance_id, first.id, get_settings().retry_delay(3))
        dialect.uncount_attempt(cursor, first.id)
        dialect.release(cursor, lease)
    logger.error("activation of %s/%s refused: %s", lease.actor_type, lease.actor_id, exc)


def observe(activation: Activation) -> dict[str, Any]:
    """The current value of every observable of the actor (a failing one is left out)."""
    values = {}
    for name, observable in activation.spec.observables.items():
        try:
            values[name] = observable.function(activation.actor)
        except Exception:
            logger.exception("observable %s of %s failed", name, activation.spec.actor_type)
    return values


def shelve(
    activation: Activation, cache: ActivationCache | None, *, lost: bool, processed: int
) -> None:
    """The pass is over: keep the actor warm (unless its lease was lost) and say so."""
    lease = activation.lease
    if cache is not None and not lost:
        cache.put(
            lease.instance_id,
            CachedActor(
                revision=lease.state_revision,
                actor=activation.actor,
                state_json=activation.state_json,
                state_version=activation.stored_state_version,
                cached_at=time.monotonic(),
            ),
        )
    elif cache is None:
        deactivate(activation.actor)
    signals.send(
        signals.activation_released,
        actor_type=lease.actor_type,
        actor_id=lease.actor_id,
        instance_id=lease.instance_id,
        processed=processed,
    )
