"""Step 4 of a pass: the fenced group commit, and everything a turn staged written with it.

:func:`commit_group` writes a group of turns in one short transaction: one ``UPDATE``
checks owner, token, generation and the unexpired lease and writes the state (the
*fence*); the claimed row must still be ours; results and rejections are written, the
group's last failure is recorded (retry with backoff, or dead letter), what each turn
staged is written by :func:`write_staged`, and the next message is claimed in the same
transaction, or the lease is released. If the fence fails nothing at all is written and
:class:`~solid_objects.errors.LostActivation` is raised. On PostgreSQL a group that staged
nothing commits in one autocommit statement (``Dialect.commit_group``).

:func:`after_commit` sends the signals and wake-ups of a committed group.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Sequence
from contextlib import nullcontext
from dataclasses import dataclass, replace
from decimal import Decimal
from typing import Any

from django.db import connections, transaction

from tilttek_activity.staging import JoinedInsert
from tilttek_activity.staging import write_staged as write_activities

from . import payloads, signals
from .activation import Activation
from .conf import get_settings
from .db.dialect import Dialect
from .db.notify import notify_enabled
from .db.notify import send as send_hint
from .db.rows import BatchedTurn, Completion, LeaseRow, MessageRow
from .db.transactions import short_transaction
from .errors import LostActivation, is_retryable
from .lease import claim_runnable
from .registry import effect_max_attempts, get_commit_action
from .runtime.wakeup import notify_local, progress
from .runtime.wakeup.hints import hint_mode, publish, publish_result
from .turn import TurnOutcome, describe_exception

logger = logging.getLogger("solid_objects")


@dataclass(frozen=True)
class CommitActionContext:
    """Passed to a commit action: it runs inside the fenced commit, on ``using``."""

    actor_type: str
    actor_id: str
    instance_id: int
    message_id: int
    using: str


def commit_group(
    activation: Activation,
    dialect: Dialect,
    outcomes: list[TurnOutcome],
    *,
    keep_going: bool,
    yield_head: bool,
    hand_off: bool = False,
    own_message: int | None = None,
) -> MessageRow | None:
    """The fenced commit of a group; returns the next claimed message, if any.

    ``keep_going``: claim the next turn (else release the lease); ``yield_head``: the pass
    budget is spent, send the actor's head to the back of the poll order. ``hand_off``: a
    sync caller ends its pass at its own message; if the actor has more due work the commit
    hints other processes (workers, waiting callers) to take it over, since nobody else was
    told when it was enqueued while this caller held the lease. ``own_message``: the
    message of the sync caller running the pass (no hint is sent for it)."""
    started = time.monotonic()
    lease = activation.lease
    write_state = activation.dirty
    revision = state_revision(activation, outcomes)
    completions = [_completion(o, claimed=o is outcomes[0]) for o in outcomes if o.kind != "failed"]
    journal = [o.staged.activities for o in outcomes if o.kind == "completed" and o.staged]
    if (
        dialect.single_statement_commit
        and not connections[activation.alias].in_atomic_block
        and outcomes[-1].kind != "failed"
        and not any((o.staged and not o.staged.only_joinable) or o.broadcasts for o in outcomes)
        and (not any(journal) or JoinedInsert.available(activation.alias, journal))
    ):
        next_message = _commit_in_one_statement(
            activation,
            dialect,
            completions,
            revision=revision,
            write_state=write_state,
            keep_going=keep_going,
            yield_head=yield_head,
            hand_off=hand_off,
            journal=JoinedInsert(activation.alias, journal) if any(journal) else None,
            result_hint=_released_hint(activation, outcomes),
            waited_hint=_waited_hint(activation, dialect, outcomes, own_message),
        )
    else:
        next_message = _commit_in_transaction(
            activation,
            dialect,
            outcomes,
            completions,
            revision=revision,
            write_state=write_state,
            keep_going=keep_going,
            yield_head=yield_head,
            hand_off=hand_off,
        )
    activation.dirty = False
    lease.state_revision = revision
    activation.commit_seconds = time.monotonic() - started
    return next_message


def state_revision(activation: Activation, outcomes: Sequence[TurnOutcome]) -> int:
    """The state revision a group's commit stores: the sequence of its last turn that
    changed the state when state is written, else the one the lease read."""
    successful = [o for o in outcomes if o.kind == "completed" and not o.is_query]
    if successful and activation.dirty:
        return successful[-1].message.sequence
    return activation.lease.state_revision


def _completion(outcome: TurnOutcome, *, claimed: bool) -> Completion:
    """What the commit writes for a finished (completed or rejected) turn."""
    return Completion(
        message_id=outcome.message.id,
        result=outcome.result_json if outcome.kind == "completed" else None,
        rejection=payloads.encode(outcome.rejection.as_dict(), what="rejection")
        if outcome.kind == "rejected" and outcome.rejection is not None
        else None,
        claimed=claimed,
    )


def joins_batch(outcomes: Sequence[TurnOutcome]) -> bool:
    """Whether a claimed turn may commit together with other actors' turns
    (:func:`commit_batch`): it finished and staged nothing (no effect, message, reminder,
    commit action, journal entry or broadcast)."""
    return (
        len(outcomes) == 1
        and outcomes[0].kind in ("completed", "rejected")
        and not outcomes[0].staged
        and not outcomes[0].broadcasts
    )


def commit_batch(
    alias: str, dialect: Dialect, ran: Sequence[tuple[Activation, TurnOutcome]]
) -> set[int]:
    """The fenced commit of one claimed turn of each of several actors (leased together,
    under one token), releasing their leases: one autocommit statement on PostgreSQL, one
    short transaction elsewhere. Each actor's fence is checked on its own; the instance ids
    whose fence held are returned, and only their turns were written."""
    if not ran:
        return set()
    started = time.monotonic()
    turns = []
    for activation, outcome in ran:
        lease = activation.lease
        write_state = activation.dirty
        revision = state_revision(activation, [outcome])
        completion = _completion(outcome, claimed=True)
        turns.append(
            BatchedTurn(
                instance_id=lease.instance_id,
                generation=lease.generation,
                message_id=outcome.message.id,
                state=activation.state_json if write_state else None,
                state_version=activation.stored_state_version,
                state_revision=revision,
                result=completion.result,
                rejection=completion.rejection,
            )
        )
    lease = ran[0][0].lease
    connection = connections[alias]
    # PostgreSQL: one autocommit statement; elsewhere one transaction.
    single = dialect.single_statement_commit and not connection.in_atomic_block
    with (
        nullcontext() if single else short_transaction(alias),
        connection.cursor() as cursor,
    ):
        fenced = dialect.commit_batch(cursor, turns, owner_id=lease.owner_id, token=lease.token)
    took = time.monotonic() - started
    for (activation, _outcome), turn in zip(ran, turns, strict=True):
        if turn.instance_id in fenced:
            activation.dirty = False
            activation.lease.state_revision = turn.state_revision
            activation.commit_seconds = took
    return fenced


def lost_before_commit(lease: LeaseRow) -> LostActivation:
    return LostActivation(
        f"{lease.actor_type}/{lease.actor_id}: the activation (generation "
        f"{lease.generation}) was lost before its commit; nothing was written"
    )


def _commit_in_transaction(
    activation: Activation,
    dialect: Dialect,
    outcomes: list[TurnOutcome],
    completions: list[Completion],
    *,
    revision: int,
    write_state: bool,
    keep_going: bool,
    yield_head: bool,
    hand_off: bool,
) -> MessageRow | None:
    """The fenced commit as a transaction of several statements (any database)."""
    if (
        keep_going
        and dialect.claim_moves_in_place
        and outcomes[-1].kind != "failed"
        and not any((o.staged and not o.staged.only_activities) or o.broadcasts for o in outcomes)
    ):
        return _commit_and_claim_next(
            activation, dialect, outcomes, completions, revision=revision, write_state=write_state
        )
    lease = activation.lease
    first = outcomes[0]
    connection = connections[activation.alias]
    with short_transaction(activation.alias), connection.cursor() as cursor:
        fenced = dialect.fence(
            cursor,
            lease,
            claimed_message_id=None if first.kind == "failed" else first.message.id,
            state=activation.state_json if write_state else None,
            state_version=activation.stored_state_version,
            state_revision=revision,
            release=not keep_going,
            lease_seconds=get_settings().LEASE_DURATION,
        )
        if not fenced:
            raise lost_before_commit(lease)
        dialect.complete(cursor, completions)
        for outcome in outcomes:
            write_staged(cursor, dialect, activation, outcome)
        write_journal(activation, outcomes)
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
            _hand_off(cursor, dialect, activation, _released_hint(activation, outcomes))
    return next_message


def _commit_and_claim_next(
    activation: Activation,
    dialect: Dialect,
    outcomes: list[TurnOutcome],
    completions: list[Completion],
    *,
    revision: int,
    write_state: bool,
) -> MessageRow | None:
    """MySQL, SQLite: a group that staged nothing but journal entries and whose pass goes
    on, committed with the claim of the next turn in the fewest statements
    (``Dialect.commit_and_claim_next``); the due messages read after that turn are the next
    group's read-ahead. (A staged message to the actor itself must be written before the
    next head is read: such groups take the general path.)"""
    lease = activation.lease
    settings = get_settings()
    connection = connections[activation.alias]
    with short_transaction(activation.alias), connection.cursor() as cursor:
        fenced, head, ahead = dialect.commit_and_claim_next(
            cursor,
            lease,
            claimed_message_id=outcomes[0].message.id,
            state=activation.state_json if write_state else None,
            state_version=activation.stored_state_version,
            state_revision=revision,
            lease_seconds=settings.LEASE_DURATION,
            completions=completions,
            read_ahead=settings.MAX_TURNS_PER_COMMIT - 1,
        )
        if not fenced:
            raise lost_before_commit(lease)
        write_journal(activation, outcomes)
        if head is not None and head.attempt_count > head.max_attempts:
            # Its attempts were used up by processes that died during its turn: to its dead
            # letter, and the next one is claimed (without a read-ahead).
            head, ahead = claim_runnable(cursor, dialect, lease, head), []
        if head is None:
            dialect.release(cursor, lease)
    activation.ahead = ahead if head is not None else None
    return head


def _commit_in_one_statement(
    activation: Activation,
    dialect: Dialect,
    completions: list[Completion],
    *,
    revision: int,
    write_state: bool,
    keep_going: bool,
    yield_head: bool,
    hand_off: bool,
    journal: JoinedInsert | None = None,
    result_hint: str = "result",
    waited_hint: str | None = None,
) -> MessageRow | None:
    """The common case on PostgreSQL: a group that staged nothing (or only journal entries
    under derived keys, which join the statement) commits in one statement, and the next
    turn is claimed by a second one (each its own transaction)."""
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
            lease_seconds=get_settings().LEASE_DURATION,
            completions=completions,
            claim_next=keep_going,
            hand_off=hand_off and not keep_going,
            notify=notify_enabled(dialect),
            joined=journal,
            result_hint=result_hint,
            waited_hint=waited_hint,
        )
        if not fenced:
            raise lost_before_commit(lease)
        activation.results_hinted = waited_hint is not None
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


def _released_hint(activation: Activation, outcomes: Sequence[TurnOutcome]) -> str:
    """The payload of the ``result`` hint a hand-off sends: what the group finished, and
    that this activation ends (so waiting callers elsewhere know the actor is free)."""
    lease = activation.lease
    return progress.payload(
        [(lease.instance_id, final_sequence(outcomes))], released=lease.generation
    )


def _waited_hint(
    activation: Activation,
    dialect: Dialect,
    outcomes: Sequence[TurnOutcome],
    own_message: int | None,
) -> str | None:
    """The payload of the ``result`` hint a one-statement commit sends itself when it
    finishes sync calls other callers wait for (``None``: nobody waits, or hints do not
    travel with the commit): the progress, and the results of the calls it completed."""
    waited = _waited_on(outcomes, own_message)
    if not waited or not notify_enabled(dialect):
        return None
    instance_id = activation.lease.instance_id
    return progress.payload(
        [(instance_id, final_sequence(outcomes))],
        results=[
            (instance_id, o.message.sequence, o.message.id, o.result_json)
            for o in waited
            if o.kind == "completed" and o.result_json is not None
        ],
    )


def _waited_on(outcomes: Sequence[TurnOutcome], own_message: int | None) -> list[TurnOutcome]:
    """The outcomes a caller other than the pass's own may wait for (its sync calls)."""
    return [
        o for o in outcomes if o.message.delivery_mode == "sync" and o.message.id != own_message
    ]


def _hand_off(cursor: Any, dialect: Dialect, activation: Activation, result_hint: str) -> None:
    """A sync caller releases the lease at its own message: look for due work left only
    where a hint can reach another process (this process's waiters are rung anyway)."""
    if notify_enabled(dialect):
        if dialect.has_due(cursor, activation.lease.instance_id):
            send_hint(cursor, "work")  # sent when this transaction commits
            send_hint(cursor, "result", payload_text=result_hint)
    elif hint_mode() == "redis":
        activation.handed_off = dialect.has_due(cursor, activation.lease.instance_id)


def _record_failure(
    cursor: Any, dialect: Dialect, activation: Activation, outcome: TurnOutcome, *, claimed: bool
) -> None:
    """The group's failed turn: retried after a backoff, or dead-lettered."""
    message = outcome.message
    attempt = message.attempt_count if claimed else message.attempt_count + 1
    error = outcome.error or {}
    error_json = payloads.encode(error, what="error")
    outcome.message.attempt_count = attempt
    if outcome.retryable and attempt < message.max_attempts:
        dialect.record_failure(
            cursor,
            instance_id=activation.lease.instance_id,
            message_id=message.id,
            claimed=claimed,
            error=error_json,
            retry_seconds=activation.spec.retry_delay(message.operation, attempt),
        )
        return
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


def failed_in_commit(outcome: TurnOutcome, exc: Exception) -> TurnOutcome:
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


# -- what a turn staged ----------------------------------------------------------------------
def write_staged(
    cursor: Any, dialect: Dialect, activation: Activation, outcome: TurnOutcome
) -> None:
    """Everything ``outcome`` staged, written inside its fenced commit: effects (including
    actor-to-actor messages), reminders, commit actions and the broadcasts of the
    observables it changed (its journal entries go with the group's: :func:`write_journal`).
    The one place the fence applies staged writes."""
    if outcome.kind == "completed" and outcome.staged:
        _write_effects_and_reminders(cursor, dialect, activation, outcome)
        _run_commit_actions(activation, outcome)
    if outcome.broadcasts:
        _write_broadcasts(cursor, dialect, activation, outcome)


def write_journal(activation: Activation, outcomes: Sequence[TurnOutcome]) -> None:
    """The journal entries the group's committed turns recorded, in turn order, with the
    journal's own insert-once statement (one for the whole group where the database allows)
    in this transaction. The journal's database is the actor's: a system check says so at
    start-up."""
    staged = [
        o.staged.activities
        for o in outcomes
        if o.kind == "completed" and o.staged is not None and o.staged.activities
    ]
    if staged:
        write_activities(activation.alias, staged)


def _write_effects_and_reminders(
    cursor: Any, dialect: Dialect, activation: Activation, outcome: TurnOutcome
) -> None:
    staged = outcome.staged
    assert staged is not None
    lease = activation.lease
    if staged.effects:
        dialect.insert_effects(
            cursor,
            instance_id=lease.instance_id,
            message_id=outcome.message.id,
            effects=staged.effects,
            max_attempts=effect_max_attempts,
        )
        _hint(cursor, dialect, "effect")
    for reminder in staged.reminders:
        if reminder.cancel:
            dialect.cancel_reminder(cursor, lease.instance_id, reminder.name)
        elif dialect.upsert_reminder(
            cursor,
            lease,
            name=reminder.name,
            operation=reminder.operation,
            arguments=reminder.arguments,
            at=reminder.at,
            delay=reminder.delay or 0.0,
            interval=None
            if reminder.interval_seconds is None
            else Decimal(f"{reminder.interval_seconds:.6f}"),
            missed_policy=reminder.missed_policy,
            cron=reminder.cron,
            time_zone=reminder.time_zone,
        ):
            staged.replaced_reminders.append(reminder.name)
    if any(not reminder.cancel for reminder in staged.reminders):
        _hint(cursor, dialect, "reminder")


def _run_commit_actions(activation: Activation, outcome: TurnOutcome) -> None:
    assert outcome.staged is not None
    lease = activation.lease
    for action in outcome.staged.commit_actions:
        function = get_commit_action(action.name)
        if function is None:  # unregistered between staging and commit
            raise LookupError(f"no commit action {action.name!r} is registered")
        function(
            action.arguments,
            CommitActionContext(
                actor_type=lease.actor_type,
                actor_id=lease.actor_id,
                instance_id=lease.instance_id,
                message_id=outcome.message.id,
                using=activation.alias,
            ),
        )


def _hint(cursor: Any, dialect: Dialect, kind: str) -> None:
    """Wake the effect or reminder role of other processes (PostgreSQL ``NOTIFY``, sent only
    if this commit succeeds; identical notifications of one transaction are folded)."""
    if notify_enabled(dialect):
        send_hint(cursor, kind)


def _write_broadcasts(
    cursor: Any, dialect: Dialect, activation: Activation, outcome: TurnOutcome
) -> None:
    """One ``broadcasts`` row per observable the turn changed (unique per message)."""
    rows = []
    for name, value in (outcome.broadcasts or {}).items():
        spec = activation.spec.observables[name]
        body = payloads.encode(value if spec.broadcast == "value" else {}, what=name)
        rows.append((str(uuid.uuid4()), name, body))
    dialect.insert_broadcasts(
        cursor,
        activation.lease,
        message_id=outcome.message.id,
        state_version=activation.stored_state_version,
        rows=rows,
    )


# -- after the commit ------------------------------------------------------------------------
def after_commit(
    activation: Activation,
    outcomes: list[TurnOutcome],
    own_message: int | None = None,
    *,
    result_hint: bool = True,
) -> bool:
    """Signals and wake-ups of a committed group. ``own_message`` is the message of the sync
    caller running this pass (it needs no hint). Returns whether another process may wait
    for one of these outcomes; ``result_hint=False`` leaves that hint to the caller (a
    batch of several actors sends one)."""
    final = final_sequence(outcomes)
    if final:
        progress.committed(activation.alias, activation.lease.instance_id, final)
    _signal_commit(activation, outcomes)
    for outcome in outcomes:
        _signal_outcome(activation.lease, outcome)
        if outcome.kind == "completed" and outcome.staged:
            if outcome.staged.effects:
                notify_local("effect")
            if outcome.staged.reminders:
                notify_local("reminder")
        if outcome.broadcasts:
            notify_local("broadcast")
    notify_local("result")
    if activation.handed_off:
        activation.handed_off = False
        publish("work")
        publish("result")
    waited = bool(_waited_on(outcomes, own_message))
    hinted, activation.results_hinted = activation.results_hinted, False
    if waited and result_hint and not hinted:  # unless the commit itself sent the hint
        send_result_hint(activation.alias, [(activation.lease.instance_id, final)])
    return waited


def final_sequence(outcomes: Sequence[TurnOutcome]) -> int:
    """The highest sequence among the group's outcomes that are final (0: none is)."""
    return max(
        (o.message.sequence for o in outcomes if o.kind in ("completed", "rejected", "dead")),
        default=0,
    )


def send_result_hint(alias: str, finished: Sequence[tuple[int, int]] = ()) -> None:
    """Another process may be waiting for an outcome just committed: ring it (best effort);
    ``finished``: ``(instance_id, highest final sequence)`` of the actors committed."""
    try:
        publish_result(alias, [entry for entry in finished if entry[1]])
    except Exception:
        logger.debug("result hint not sent", exc_info=True)


def _signal_commit(activation: Activation, outcomes: Sequence[TurnOutcome]) -> None:
    lease = activation.lease
    signals.send(
        signals.turns_committed,
        actor_type=lease.actor_type,
        actor_id=lease.actor_id,
        instance_id=lease.instance_id,
        sequence=max(o.message.sequence for o in outcomes),
        turns=len(outcomes),
        duration=activation.commit_seconds,
    )


def _signal_outcome(lease: LeaseRow, outcome: TurnOutcome) -> None:
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
        code = outcome.rejection.code if outcome.rejection else ""
        signals.send(signals.message_rejected, code=code, **payload)
    elif outcome.kind == "dead":
        signals.send(signals.message_dead_lettered, **payload)
    else:
        signals.send(signals.message_retried, **payload)
    if outcome.kind == "completed" and outcome.staged:
        for name in outcome.staged.replaced_reminders:
            signals.send(signals.reminder_replaced, name=name, **payload)
