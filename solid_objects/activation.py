"""Activations: take an actor's lease, drain its mailbox in passes, commit under the fence.

The protocol, per pass:

1. **Acquire** (one short transaction): lock a free candidate instance (``SKIP LOCKED``),
   take the lease (owner, fresh token, ``generation + 1``, expiry on the database clock) and
   recover a claimed row a dead activation left behind.
2. **Claim** the lowest-sequence ready message into ``claimed_messages`` and count the
   attempt, committed *before* the handler runs, so a handler that kills the process still
   reaches its dead letter after ``MAX_ATTEMPTS``.
3. **Run** the claimed turn, then up to ``MAX_TURNS_PER_COMMIT - 1`` following due messages
   read ahead (grouped commits), each on the state its predecessor left, outside any
   transaction. A message whose attempt count shows it crashed before runs alone.
4. **Fenced commit** (one short transaction): one ``UPDATE`` checks owner, token, generation
   and the unexpired lease and writes the state; the claimed row must still be ours; results,
   rejections, failures, outbox rows and commit actions are written; the next message is
   claimed in the same transaction, or the lease is released.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from django.db import InterfaceError, OperationalError, connections, transaction

from tilttek_activity.staging import JoinedInsert

from . import payloads, signals
from .commit_writes import write_broadcasts, write_staged
from .conf import get_settings
from .db.dialect import Completion, LeaseRow, MessageRow
from .db.notify import notify_enabled
from .db.notify import send as send_hint
from .db.vendors import dialect_for
from .errors import (
    LostActivation,
    SolidObjectsError,
    StateMigrationError,
    UnknownActorType,
    is_retryable,
)
from .pause_points import pause_point
from .registry import get_spec
from .runtime.wakeup import notify_local
from .runtime.wakeup.hints import hint_mode, publish, publish_result
from .spec import ActorInstance, ActorSpec
from .turn import TurnOutcome, describe_exception, run_turn

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
            _deactivate(entry.actor)
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
            _deactivate(old.actor)

    def evict(self, instance_id: int) -> None:
        with self._lock:
            entry = self._entries.pop(instance_id, None)
        if entry is not None:
            _deactivate(entry.actor)

    def clear(self) -> None:
        with self._lock:
            entries = list(self._entries.values())
            self._entries.clear()
        for entry in entries:
            _deactivate(entry.actor)

    def __len__(self) -> int:
        return len(self._entries)

    def revisions_of(self, instance_ids: list[int]) -> dict[int, int]:
        with self._lock:
            return {i: self._entries[i].revision for i in instance_ids if i in self._entries}


def _deactivate(actor: ActorInstance) -> None:
    try:
        actor.on_deactivate()
    except Exception:
        logger.exception("on_deactivate of %s/%s failed", actor.actor_type, actor.actor_id)


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
    started_at: float = field(default_factory=time.monotonic)
    observed: dict[str, Any] = field(default_factory=dict)
    #: The last commit released the lease with due work left and no hint was sent with it.
    handed_off: bool = False


@dataclass
class PassResult:
    outcomes: dict[int, TurnOutcome] = field(default_factory=dict)
    processed: int = 0
    lost: bool = False


@dataclass
class Claim:
    """A lease taken and its first turn claimed, committed or about to be."""

    lease: LeaseRow
    first: MessageRow


def take_lease(
    cursor: Any,
    alias: str,
    owner_id: str,
    instance_ids: list[int],
    cache: ActivationCache | None = None,
) -> Claim | None:
    """Inside the caller's transaction: lease one of ``instance_ids`` (skipping locked or
    leased ones), recover a claim a dead activation left, and claim the first turn (its
    attempt is counted when this transaction commits, before the handler runs)."""
    dialect = dialect_for(connections[alias])
    lease = dialect.acquire_lease(
        cursor,
        instance_ids,
        owner_id=owner_id,
        token=str(uuid.uuid4()),
        lease_seconds=get_settings().LEASE_DURATION,
        cached=cache.revisions_of(instance_ids) if cache is not None else None,
    )
    if lease is None:
        return None
    pause_point("acquire.after_lease")
    if lease.has_stale_claim:
        pause_point("acquire.before_recovery")
        _recover_stale_claim(cursor, dialect, lease)
    first = claim_runnable(cursor, dialect, lease)
    if lease.has_stale_claim:
        pause_point("acquire.recovered")
    if first is None:
        dialect.release(cursor, lease)
        return None
    return Claim(lease, first)


def claim_runnable(
    cursor: Any, dialect: Any, lease: LeaseRow, claimed: MessageRow | None = None
) -> MessageRow | None:
    """Claim the next message; one whose attempts were all used by processes that died
    during its turn (the claim counts an attempt beyond ``max_attempts``) goes to its dead
    letter instead of running again, and the next one is claimed. ``claimed`` is a message
    the caller already claimed with the same statement."""
    while True:
        message = claimed if claimed is not None else dialect.claim_next(cursor, lease)
        claimed = None
        if message is None or message.attempt_count <= message.max_attempts:
            return message
        _dead_letter_exhausted(cursor, dialect, lease, message)


def _dead_letter_exhausted(cursor: Any, dialect: Any, lease: LeaseRow, message: MessageRow) -> None:
    attempts = message.attempt_count - 1  # the claim just counted one more
    cursor.execute(
        f"UPDATE {dialect.t_messages} SET attempt_count = %s WHERE id = %s",
        [attempts, message.id],
    )
    _dead_letter_lost(cursor, dialect, lease, message.id, attempts)


def _dead_letter_lost(
    cursor: Any, dialect: Any, lease: LeaseRow, message_id: int, attempts: int
) -> None:
    """Dead-letter a claimed message whose every attempt died with its process."""
    error = {
        "class": "solid_objects.errors.LostActivation",
        "message": f"the process running this turn stopped during each of its {attempts} "
        "attempt(s)",
        "backtrace": [],
    }
    dialect.dead_letter(
        cursor,
        instance_id=lease.instance_id,
        message_id=message_id,
        claimed=True,
        error=payloads.encode(error),
        exception_class=error["class"],
        exception_message=error["message"],
        backtrace="[]",
    )
    signals.send(
        signals.message_dead_lettered,
        actor_type=lease.actor_type,
        actor_id=lease.actor_id,
        message_id=message_id,
        attempt=attempts,
    )


def activate(alias: str, claim: Claim, cache: ActivationCache | None = None) -> Activation:
    """After the claim committed: build the actor (cached, or decoded and migrated)."""
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
        activation = _activate(alias, lease, cache)
    except (StateMigrationError, UnknownActorType) as exc:
        _refuse(alias, lease, claim.first, exc)
        raise
    activation.first = claim.first
    return activation


def acquire(
    alias: str,
    owner_id: str,
    instance_ids: list[int],
    cache: ActivationCache | None = None,
) -> Activation | None:
    """Take a lease and claim its first turn in one short transaction, then activate."""
    connection = connections[alias]
    dialect = dialect_for(connection)
    if dialect.single_statement_commit and not connection.in_atomic_block:
        return _acquire_in_one_statement(alias, dialect, owner_id, instance_ids, cache)
    with transaction.atomic(using=alias), connection.cursor() as cursor:
        claim = take_lease(cursor, alias, owner_id, instance_ids, cache)
    return None if claim is None else activate(alias, claim, cache)


def _acquire_in_one_statement(
    alias: str,
    dialect: Any,
    owner_id: str,
    instance_ids: list[int],
    cache: ActivationCache | None,
) -> Activation | None:
    """PostgreSQL: lease and first claim in one autocommit statement; the rare cases (a
    claim left by a dead activation, a message out of attempts, nothing due) finish in a
    short transaction."""
    connection = connections[alias]
    with connection.cursor() as cursor:
        got = dialect.acquire_and_claim(
            cursor,
            instance_ids,
            owner_id=owner_id,
            token=str(uuid.uuid4()),
            lease_seconds=get_settings().LEASE_DURATION,
            cached=cache.revisions_of(instance_ids) if cache is not None else None,
        )
        if got is None:
            return None
        lease, first, more_due = got
        pause_point("acquire.after_lease")
        if lease.has_stale_claim or (
            first is not None and first.attempt_count > first.max_attempts
        ):
            if lease.has_stale_claim:
                pause_point("acquire.before_recovery")
            with transaction.atomic(using=alias):
                # The lease committed on its own: take the instance row lock (cleanup and
                # the fenced commit hold it too) and check the lease is still ours before
                # touching its claimed and ready rows, so every read below sees what they
                # committed.
                if not dialect.hold_lease(cursor, lease):
                    logger.info(
                        "lease of %s/%s lost before its recovery",
                        lease.actor_type,
                        lease.actor_id,
                    )
                    return None
                if lease.has_stale_claim:
                    _recover_stale_claim(cursor, dialect, lease)
                first = claim_runnable(cursor, dialect, lease, first)
                if lease.has_stale_claim:
                    pause_point("acquire.recovered")
                if first is None:
                    dialect.release(cursor, lease)
            more_due = True
        elif first is None:
            dialect.release(cursor, lease)
    if first is None:
        return None
    activation = activate(alias, Claim(lease, first), cache)
    activation.more_due = more_due
    return activation


def _recover_stale_claim(cursor: Any, dialect: Any, lease: LeaseRow) -> None:
    """Under the instance row lock: put back (or dead-letter) the claim a previous
    activation left. Cleanup may have requeued it already; then there is none."""
    stale = dialect.stale_claim(cursor, lease.instance_id)
    if stale is None:
        return
    message_id, attempts, max_attempts = stale
    if attempts >= max_attempts:
        _dead_letter_lost(cursor, dialect, lease, message_id, attempts)
    else:
        dialect.unclaim_to_ready(cursor, lease.instance_id, message_id)
        signals.send(
            signals.message_retried,
            actor_type=lease.actor_type,
            actor_id=lease.actor_id,
            message_id=message_id,
            attempt=attempts,
            reason="stale claim recovered",
        )


def _activate(alias: str, lease: LeaseRow, cache: ActivationCache | None) -> Activation:
    spec = get_spec(lease.actor_type)
    entry = cache.take(lease.instance_id) if cache is not None else None
    if (
        entry is not None
        and lease.state is None
        and entry.revision == lease.state_revision
        # A migration writes state without a new revision: newer code may have upgraded
        # the row since this entry was cached (and an older version must not be written).
        and entry.state_version == lease.state_version
        and type(entry.actor) is spec.cls
    ):
        activation = Activation(
            alias, lease, spec, entry.actor, entry.state_json, entry.state_version
        )
        if spec.observables:
            activation.observed = _observe(activation)
        return activation
    if entry is not None:
        _deactivate(entry.actor)
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
    activation = Activation(alias, lease, spec, actor, state_json, code_version, dirty=dirty)
    if spec.observables:
        activation.observed = _observe(activation)
    return activation


def _load_state(alias: str, instance_id: int) -> str:
    connection = connections[alias]
    dialect = dialect_for(connection)
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT state FROM {dialect.t_instances} WHERE id = %s", [instance_id])
        value = cursor.fetchone()[0]
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
        cursor.execute(
            f"UPDATE {dialect.t_messages} SET attempt_count = attempt_count - 1 "
            "WHERE id = %s AND attempt_count > 0",
            [first.id],
        )
        dialect.release(cursor, lease)
    logger.error("activation of %s/%s refused: %s", lease.actor_type, lease.actor_id, exc)


def _observe(activation: Activation) -> dict[str, Any]:
    values = {}
    for name, observable in activation.spec.observables.items():
        try:
            values[name] = observable.function(activation.actor)
        except Exception:
            logger.exception("observable %s of %s failed", name, activation.spec.actor_type)
    return values


def run_pass(
    activation: Activation,
    *,
    max_messages: int | None = None,
    max_seconds: float | None = None,
    stop_after: int | None = None,
    should_stop: Callable[[], bool] | None = None,
    cache: ActivationCache | None = None,
    others_waiting: Callable[[], bool] | None = None,
) -> PassResult:
    """Drain the activation's mailbox within the pass budget, then release the lease.

    The budget (``MAX_MESSAGES_PER_ACTIVATION_PASS`` / ``MAX_ACTIVATION_DURATION``) exists so
    other actors get a turn; when ``others_waiting()`` says no other actor has due work, a
    spent budget is renewed instead of yielding to nobody.

    ``stop_after`` (a message id) ends the pass once that message has committed: a sync
    caller drives the actor only up to its own message.
    """
    settings = get_settings()
    max_messages = max_messages or settings.MAX_MESSAGES_PER_ACTIVATION_PASS
    max_seconds = max_seconds if max_seconds is not None else settings.MAX_ACTIVATION_DURATION
    lease = activation.lease
    alias = activation.alias
    connection = connections[alias]
    dialect = dialect_for(connection)
    result = PassResult()
    pass_started = time.monotonic()
    budget_base = 0  # messages counted before the current budget (renewed when nobody waits)

    first = activation.first
    activation.first = None
    if first is None:
        with transaction.atomic(using=alias), connection.cursor() as cursor:
            # A claim outside the fenced commit: under the row lock, and only while the
            # lease is ours (cleanup may have given it back meanwhile).
            if not dialect.hold_lease(cursor, lease):
                raise LostActivation(
                    f"{lease.actor_type}/{lease.actor_id}: the lease (generation "
                    f"{lease.generation}) was lost before its first claim"
                )
            first = claim_runnable(cursor, dialect, lease)
            if first is None:
                dialect.release(cursor, lease)
        if first is None:
            _released(activation, cache, result)
            return result

    solo_until = 0  # after a failed group commit, its turns are rerun one commit each
    while first is not None:
        solo = first.attempt_count > 1 or first.sequence <= solo_until
        group_size = 1 if solo else settings.MAX_TURNS_PER_COMMIT
        group_size = max(1, min(group_size, max_messages - (result.processed - budget_base)))
        followers: list[MessageRow] = []
        more_due, activation.more_due = activation.more_due, True
        if group_size > 1 and first.id != stop_after and more_due:
            with connection.cursor() as cursor:
                followers = dialect.prefetch(
                    cursor, lease.instance_id, first.sequence, group_size - 1
                )
            if stop_after is not None:
                for index, message in enumerate(followers):
                    if message.id == stop_after:
                        followers = followers[: index + 1]
                        break
        committed = (activation.state_json, activation.dirty, dict(activation.observed))
        outcomes = _run_group(activation, [first, *followers], settings.MAX_COMMIT_DELAY)
        last = outcomes[-1]
        reached_stop = stop_after is not None and any(o.message.id == stop_after for o in outcomes)
        stopping = bool(should_stop and should_stop())
        within_budget = (
            result.processed + len(outcomes) - budget_base < max_messages
            and time.monotonic() - pass_started < max_seconds
        )
        if (
            last.ok
            and not reached_stop
            and not stopping
            and not within_budget
            and (others_waiting is not None and not others_waiting())
        ):
            budget_base, pass_started, within_budget = (
                result.processed + len(outcomes),
                time.monotonic(),
                True,
            )
        keep_going = last.ok and not reached_stop and within_budget and not stopping
        budget_spent = last.ok and not reached_stop and not keep_going and not stopping
        pause_point("turn.before_commit")
        try:
            try:
                first = _commit_group(
                    activation,
                    dialect,
                    outcomes,
                    keep_going=keep_going,
                    yield_head=budget_spent,
                    hand_off=reached_stop,
                )
            except LostActivation:
                raise
            except Exception as exc:
                # The commit itself failed (a commit action raised, a staged row was refused)
                # and rolled back; the lease and the claim are still ours. Back to the last
                # committed state: a group is rerun one turn per commit, so the failure is
                # pinned on the turn that causes it, which then fails like a handler would
                # (retry with backoff, dead letter) instead of leaving the claim stuck until
                # the lease runs out.
                if isinstance(exc, OperationalError | InterfaceError):
                    raise  # the connection or the server: nothing to pin on a turn
                activation.state_json, activation.dirty, activation.observed = committed
                activation.actor._state = payloads.decode(activation.state_json)
                if len(outcomes) > 1:
                    solo_until = outcomes[-1].message.sequence
                    first = outcomes[0].message
                    continue
                logger.warning(
                    "commit of %s/%s message %s failed: %r",
                    lease.actor_type,
                    lease.actor_id,
                    outcomes[0].message.id,
                    exc,
                )
                outcomes = [_failed_in_commit(outcomes[0], exc)]
                first = _commit_group(
                    activation, dialect, outcomes, keep_going=False, yield_head=False
                )
        except LostActivation:
            result.lost = True
            if cache is not None:
                cache.evict(lease.instance_id)
            signals.send(
                signals.activation_lost,
                actor_type=lease.actor_type,
                actor_id=lease.actor_id,
                instance_id=lease.instance_id,
                generation=lease.generation,
            )
            raise
        result.processed += len(outcomes)
        for outcome in outcomes:
            result.outcomes[outcome.message.id] = outcome
        _after_commit(activation, outcomes, stop_after)
        if reached_stop:
            notify_local("work")  # this process's workers may take over what is left
    _released(activation, cache, result)
    return result


def _failed_in_commit(outcome: TurnOutcome, exc: Exception) -> TurnOutcome:
    """The turn whose own commit failed, as a failed turn (nothing it staged is written)."""
    return replace(
        outcome,
        kind="failed",
        result=None,
        result_json=None,
        rejection=None,
        exception=exc,
        error=describe_exception(exc),
        retryable=is_retryable(exc),
        staged=None,
        broadcasts=None,
    )


def _run_group(
    activation: Activation, messages: list[MessageRow], max_delay: float
) -> list[TurnOutcome]:
    """Run turns in order; a failure ends the group. State rolls back per failed turn."""
    outcomes: list[TurnOutcome] = []
    started = time.monotonic()
    actor = activation.actor
    max_depth = dialect_for(connections[activation.alias]).json_max_depth
    for message in messages:
        signals.send(
            signals.message_started,
            actor_type=activation.spec.actor_type,
            actor_id=actor.actor_id,
            message_id=message.id,
            sequence=message.sequence,
            attempt=message.attempt_count or 1,
        )
        outcome = run_turn(actor, activation.spec, message, max_depth)
        if outcome.kind == "completed" and not outcome.is_query:
            try:
                state_json = payloads.encode(
                    actor._state,
                    what="state",
                    limit=get_settings().MAX_STATE_BYTES,
                    max_depth=max_depth,
                )
            except Exception as exc:
                outcome.kind = "failed"
                outcome.exception = exc
                outcome.error = describe_exception(exc)
                outcome.retryable = False
                outcome.staged = None
            else:
                if state_json != activation.state_json:
                    activation.state_json = state_json
                    activation.dirty = True
                    _check_state_size(activation, state_json)
                    if activation.spec.observables:
                        _stage_broadcasts(activation, outcome)
        if outcome.kind != "completed" or outcome.is_query:
            # Roll back whatever the turn (or a query) did to the in-memory state.
            actor._state = payloads.decode(activation.state_json)
        outcomes.append(outcome)
        if outcome.kind == "failed":
            break
        if time.monotonic() - started >= max_delay:
            break
    return outcomes


def _check_state_size(activation: Activation, state_json: str) -> None:
    warn = get_settings().WARN_STATE_BYTES
    if len(state_json) > warn:
        signals.send(
            signals.state_too_large,
            actor_type=activation.spec.actor_type,
            actor_id=activation.actor.actor_id,
            size=len(state_json),
            limit=warn,
        )


def _stage_broadcasts(activation: Activation, outcome: TurnOutcome) -> None:
    current = _observe(activation)
    changed = {
        name: value
        for name, value in current.items()
        if name not in activation.observed or activation.observed[name] != value
    }
    activation.observed = current
    if changed:
        outcome.broadcasts = changed


def _commit_group(
    activation: Activation,
    dialect: Any,
    outcomes: list[TurnOutcome],
    *,
    keep_going: bool,
    yield_head: bool,
    hand_off: bool = False,
) -> MessageRow | None:
    """The fenced commit of a group; returns the next claimed message, if any.

    ``hand_off``: a sync caller ends its pass at its own message; if the actor has more due
    work the commit hints other processes (workers, waiting callers) to take it over, since
    nobody else was told when it was enqueued while this caller held the lease."""
    settings = get_settings()
    lease = activation.lease
    alias = activation.alias
    connection = connections[alias]
    first = outcomes[0]
    first_failed = first.kind == "failed"
    successful = [o for o in outcomes if o.kind == "completed" and not o.is_query]
    write_state = activation.dirty
    revision = (
        successful[-1].message.sequence if successful and write_state else lease.state_revision
    )
    completions = [
        Completion(
            message_id=o.message.id,
            result=o.result_json if o.kind == "completed" else None,
            rejection=payloads.encode(o.rejection.as_dict(), what="rejection")
            if o.kind == "rejected" and o.rejection is not None
            else None,
            claimed=o is first,
        )
        for o in outcomes
        if o.kind != "failed"
    ]
    journal = [o.staged.activities for o in outcomes if o.kind == "completed" and o.staged]
    if (
        dialect.single_statement_commit
        and not connection.in_atomic_block
        and outcomes[-1].kind != "failed"
        and not any((o.staged and not o.staged.only_joinable) or o.broadcasts for o in outcomes)
        and (not any(journal) or JoinedInsert.available(alias, journal))
    ):
        return _commit_group_in_one_statement(
            activation,
            dialect,
            completions,
            revision=revision,
            write_state=write_state,
            keep_going=keep_going,
            yield_head=yield_head,
            hand_off=hand_off,
            journal=JoinedInsert(alias, journal) if any(journal) else None,
        )
    with transaction.atomic(using=alias), connection.cursor() as cursor:
        fenced = dialect.fence(
            cursor,
            lease,
            claimed_message_id=None if first_failed else first.message.id,
            state=activation.state_json if write_state else None,
            state_version=activation.stored_state_version,
            state_revision=revision,
            release=not keep_going,
            lease_seconds=settings.LEASE_DURATION,
        )
        if not fenced:
            raise LostActivation(
                f"{lease.actor_type}/{lease.actor_id}: the activation (generation "
                f"{lease.generation}) was lost before its commit; nothing was written"
            )
        dialect.complete(cursor, completions)
        for outcome in outcomes:
            if outcome.kind == "completed" and outcome.staged:
                write_staged(cursor, dialect, activation, outcome)
            if outcome.broadcasts:
                write_broadcasts(cursor, dialect, activation, outcome)
        last = outcomes[-1]
        if last.kind == "failed":
            _record_failure(cursor, dialect, activation, last, claimed=last is first)
        next_message = None
        if keep_going:
            next_message = claim_runnable(cursor, dialect, lease)
            if next_message is None:
                dialect.release(cursor, lease)
        elif yield_head:
            dialect.yield_head(cursor, lease.instance_id)
        if hand_off and not keep_going:
            _hand_off_in_transaction(cursor, dialect, activation)
    activation.dirty = False
    lease.state_revision = revision
    return next_message


def _hand_off_in_transaction(cursor: Any, dialect: Any, activation: Activation) -> None:
    """A sync caller releases the lease at its own message: look for due work left only
    where a hint can reach another process (this process's waiters are rung anyway)."""
    mode = hint_mode()
    if notify_enabled(dialect):
        if dialect.has_due(cursor, activation.lease.instance_id):
            send_hint(cursor, "work")  # sent when this transaction commits
            send_hint(cursor, "result")
    elif mode == "redis":
        activation.handed_off = dialect.has_due(cursor, activation.lease.instance_id)


def _commit_group_in_one_statement(
    activation: Activation,
    dialect: Any,
    completions: list[Completion],
    *,
    revision: int,
    write_state: bool,
    keep_going: bool,
    yield_head: bool,
    hand_off: bool,
    journal: JoinedInsert | None = None,
) -> MessageRow | None:
    """The common case on PostgreSQL: a group that staged nothing (or only journal entries
    under derived keys, which join the statement) commits in one statement, and the next
    turn is claimed by a second one (each its own transaction)."""
    settings = get_settings()
    lease = activation.lease
    connection = connections[activation.alias]
    with connection.cursor() as cursor:
        fenced, next_message, activation.handed_off = dialect.commit_group(
            cursor,
            lease,
            claimed_message_id=completions[0].message_id,
            state=activation.state_json if write_state else None,
            state_version=activation.stored_state_version,
            state_revision=revision,
            release=not keep_going,
            lease_seconds=settings.LEASE_DURATION,
            completions=completions,
            claim_next=keep_going,
            hand_off=hand_off and not keep_going,
            notify=notify_enabled(dialect),
            joined=journal,
        )
        if not fenced:
            raise LostActivation(
                f"{lease.actor_type}/{lease.actor_id}: the activation (generation "
                f"{lease.generation}) was lost before its commit; nothing was written"
            )
        if journal is not None:
            journal.announce()
        activation.dirty = False
        lease.state_revision = revision
        # With nothing due after the group the statement released the lease itself.
        if next_message is not None and next_message.attempt_count > next_message.max_attempts:
            with transaction.atomic(using=activation.alias):
                # As in the recovery: the row lock, and the lease still ours, before the
                # exhausted message goes to its dead letter.
                if not dialect.hold_lease(cursor, lease):
                    return None  # the group committed; its next claim is recovered later
                next_message = claim_runnable(cursor, dialect, lease, next_message)
                if next_message is None:
                    dialect.release(cursor, lease)
        elif yield_head:
            dialect.yield_head(cursor, lease.instance_id)
    return next_message


def _record_failure(
    cursor: Any, dialect: Any, activation: Activation, outcome: TurnOutcome, *, claimed: bool
) -> None:
    message = outcome.message
    attempt = message.attempt_count if claimed else message.attempt_count + 1
    error = outcome.error or {}
    error_json = payloads.encode(error, what="error")
    outcome.message.attempt_count = attempt
    if outcome.retryable and attempt < message.max_attempts:
        delay = get_settings().retry_delay(attempt)
        dialect.record_failure(
            cursor,
            instance_id=activation.lease.instance_id,
            message_id=message.id,
            claimed=claimed,
            error=error_json,
            retry_seconds=delay,
        )
    else:
        dialect.dead_letter(
            cursor,
            instance_id=activation.lease.instance_id,
            message_id=message.id,
            claimed=claimed,
            error=error_json,
            exception_class=error.get("class", "Exception")[:255],
            exception_message=error.get("message", ""),
            backtrace=payloads.encode(error.get("backtrace", [])),
        )
        outcome.kind = "dead"


def _after_commit(
    activation: Activation, outcomes: list[TurnOutcome], own_message: int | None = None
) -> None:
    """Signals and wake-ups of a committed group. ``own_message`` is the message of the sync
    caller running this pass (it needs no hint)."""
    lease = activation.lease
    for outcome in outcomes:
        message = outcome.message
        payload = {
            "actor_type": lease.actor_type,
            "actor_id": lease.actor_id,
            "message_id": message.id,
            "sequence": message.sequence,
            "attempt": message.attempt_count or 1,
            "duration": outcome.duration,
        }
        if outcome.kind == "completed":
            signals.send(signals.message_completed, **payload)
        elif outcome.kind == "rejected":
            signals.send(
                signals.message_rejected,
                code=outcome.rejection.code if outcome.rejection else "",
                **payload,
            )
        elif outcome.kind == "dead":
            signals.send(signals.message_dead_lettered, **payload)
        else:
            signals.send(signals.message_retried, **payload)
        if outcome.kind == "completed" and outcome.staged:
            if outcome.staged.effects:
                notify_local("effect")
            if outcome.staged.reminders:
                notify_local("reminder")
            for name in outcome.staged.replaced_reminders:
                signals.send(signals.reminder_replaced, name=name, **payload)
        if outcome.broadcasts:
            notify_local("broadcast")
    notify_local("result")
    if activation.handed_off:
        activation.handed_off = False
        publish("work")
        publish("result")
    if any(o.message.delivery_mode == "sync" and o.message.id != own_message for o in outcomes):
        # Another process may be waiting for one of these outcomes.
        try:
            publish_result(activation.alias)
        except Exception:
            logger.debug("result hint not sent", exc_info=True)


def _released(activation: Activation, cache: ActivationCache | None, result: PassResult) -> None:
    lease = activation.lease
    if cache is not None and not result.lost:
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
        _deactivate(activation.actor)
    signals.send(
        signals.activation_released,
        actor_type=lease.actor_type,
        actor_id=lease.actor_id,
        instance_id=lease.instance_id,
        processed=result.processed,
    )
