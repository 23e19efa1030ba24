"""Step 3 of a pass: the drain loop, running the leased actor's turns in commit groups.

A pass runs the claimed turn, then up to ``MAX_TURNS_PER_COMMIT - 1`` following due
messages read ahead (a *group*), each on the state its predecessor left, outside any
transaction; the group is committed under the fence (:func:`solid_objects.fencing.commit_group`),
which claims the next turn or releases the lease. A message whose attempt count shows it
crashed before runs alone, and so does every turn of a group whose commit failed, so the
failure is pinned on the turn that causes it. The pass ends when the mailbox has nothing
due, its budget is spent (other actors get a turn), the process stops, or a sync caller's
own message has committed.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from django.db import InterfaceError, OperationalError, connections

from . import payloads, signals
from .activation import Activation, ActivationCache, observe, shelve
from .conf import get_settings
from .db.dialect import Dialect
from .db.rows import MessageRow
from .db.transactions import short_transaction
from .db.vendors import dialect_for
from .errors import LostActivation
from .fencing import after_commit, commit_group, failed_in_commit
from .lease import claim_runnable
from .pause_points import pause_point
from .runtime.wakeup import notify_local, progress
from .turn import TurnOutcome, describe_exception, run_turn

logger = logging.getLogger("solid_objects")


#: A group that already ran: its outcomes, and the activation's committed
#: ``(state_json, dirty, observed)`` from before it (restored if its commit fails).
Ran = tuple[list[TurnOutcome], tuple[str, bool, dict[str, object]]]


@dataclass
class PassResult:
    outcomes: dict[int, TurnOutcome] = field(default_factory=dict)
    processed: int = 0
    lost: bool = False


def run_pass(
    activation: Activation,
    *,
    max_messages: int | None = None,
    max_seconds: float | None = None,
    stop_after: int | None = None,
    should_stop: Callable[[], bool] | None = None,
    cache: ActivationCache | None = None,
    others_waiting: Callable[[], bool] | None = None,
    stop_at_sequence: int | None = None,
) -> PassResult:
    """Drain the activation's mailbox within the pass budget, then release the lease.

    The budget (``MAX_MESSAGES_PER_ACTIVATION_PASS`` / ``MAX_ACTIVATION_DURATION``) exists so
    other actors get a turn; when ``others_waiting()`` says no other actor has due work, a
    spent budget is renewed instead of yielding to nobody.

    ``stop_after`` (a message id) ends the pass once that message has committed: a sync
    caller drives the actor only up to its own message. ``stop_at_sequence`` (that
    message's sequence) also ends it at the first turn at or past that position, for when
    another activation committed the message first: the caller never runs later messages.
    """
    settings = get_settings()
    budget = _Budget(
        max_messages or settings.MAX_MESSAGES_PER_ACTIVATION_PASS,
        max_seconds if max_seconds is not None else settings.MAX_ACTIVATION_DURATION,
    )
    drain = _Drain(
        activation,
        dialect_for(connections[activation.alias]),
        budget,
        stop_after=stop_after,
        should_stop=should_stop,
        others_waiting=others_waiting,
        cache=cache,
        stop_sequence=stop_at_sequence,
    )
    first, activation.first = activation.first, None
    if first is None:
        first = _claim_first(activation, drain.dialect)
    return _drain_from(drain, first)


def _drain_from(drain: _Drain, first: MessageRow | None) -> PassResult:
    """Run and commit groups from the claimed turn ``first`` until the pass ends, then
    keep the actor warm and say the activation ended."""
    while first is not None:
        first = drain.step(first)
    activation, result = drain.activation, drain.result
    shelve(activation, drain.cache, lost=result.lost, processed=result.processed)
    ended(activation)
    return result


def ended(activation: Activation) -> None:
    """The pass is over and the lease given back: waiting callers of this process whose
    message is still pending may take the actor over."""
    lease = activation.lease
    progress.ended(activation.alias, lease.instance_id, lease.generation)
    notify_local("result")


def _claim_first(activation: Activation, dialect: Dialect) -> MessageRow | None:
    """A pass that starts without a claimed turn claims one (or releases the lease)."""
    lease = activation.lease
    connection = connections[activation.alias]
    with short_transaction(activation.alias), connection.cursor() as cursor:
        # A claim outside the fenced commit: under the row lock, and only while the lease
        # is ours (cleanup may have given it back meanwhile).
        if not dialect.hold_lease(cursor, lease):
            raise LostActivation(
                f"{lease.actor_type}/{lease.actor_id}: the lease (generation "
                f"{lease.generation}) was lost before its first claim"
            )
        first = claim_runnable(cursor, dialect, lease)
        if first is None:
            dialect.release(cursor, lease)
    return first


@dataclass
class _Budget:
    """How many messages and seconds the pass may still spend before yielding."""

    max_messages: int
    max_seconds: float
    started: float = field(default_factory=time.monotonic)
    base: int = 0  # messages counted before the current budget (renewed when nobody waits)

    def room(self, processed: int) -> int:
        return self.max_messages - (processed - self.base)

    def left(self, processed: int) -> bool:
        return (
            processed - self.base < self.max_messages
            and time.monotonic() - self.started < self.max_seconds
        )

    def renew(self, processed: int) -> None:
        self.base, self.started = processed, time.monotonic()


@dataclass
class _Drain:
    """One pass over an activation: read ahead, run a group, commit it, again."""

    activation: Activation
    dialect: Dialect
    budget: _Budget
    stop_after: int | None
    should_stop: Callable[[], bool] | None
    others_waiting: Callable[[], bool] | None
    cache: ActivationCache | None
    stop_sequence: int | None = None
    result: PassResult = field(default_factory=PassResult)
    solo_until: int = 0  # after a failed group commit, its turns are rerun one commit each

    def step(self, first: MessageRow, ran: Ran | None = None) -> MessageRow | None:
        """Run and commit one group starting at ``first``; the next claimed turn, if any.
        ``ran``: the group already ran (its outcomes, and what was committed before it)."""
        activation = self.activation
        if ran is None:
            committed = (activation.state_json, activation.dirty, dict(activation.observed))
            group = [first, *self._read_ahead(first)]
            outcomes = run_group(activation, group, get_settings().MAX_COMMIT_DELAY)
        else:
            outcomes, committed = ran
        reached_stop = self.stop_after is not None and any(self._stops(o.message) for o in outcomes)
        keep_going, budget_spent = self._decide(outcomes, reached_stop)
        pause_point("turn.before_commit")
        try:
            written, next_first = self._commit(
                outcomes,
                committed,
                keep_going=keep_going,
                yield_head=budget_spent,
                hand_off=reached_stop,
            )
        except LostActivation:
            self._lost()
            raise
        if written is None:
            return next_first  # the group is rerun one turn per commit
        self.result.processed += len(written)
        for outcome in written:
            self.result.outcomes[outcome.message.id] = outcome
        after_commit(activation, written, self.stop_after)
        if reached_stop:
            notify_local("work")  # this process's workers may take over what is left
        return next_first

    def _read_ahead(self, first: MessageRow) -> list[MessageRow]:
        """The due messages after ``first`` that run in its group (none when it runs alone).

        A sync caller's group takes them too when it holds the caller's own message (or
        the first one past its position): the messages of the callers behind it are
        answered by the same commit, which ends the caller's pass."""
        solo = first.attempt_count > 1 or first.sequence <= self.solo_until
        size = 1 if solo else get_settings().MAX_TURNS_PER_COMMIT
        size = max(1, min(size, self.budget.room(self.result.processed)))
        activation = self.activation
        more_due, known = activation.more_due, activation.more_due_known
        ahead, activation.ahead = activation.ahead, None
        activation.more_due, activation.more_due_known = True, False
        if size == 1 or not more_due:
            return []
        if self._stops(first) and ahead is None and not known:
            return []  # a caller's own turn: read ahead only for messages known to be due
        if ahead is not None:  # read by the commit that claimed ``first``
            return [m for m in ahead if m.sequence > first.sequence][: size - 1]
        with connections[self.activation.alias].cursor() as cursor:
            return self.dialect.prefetch(
                cursor, self.activation.lease.instance_id, first.sequence, size - 1
            )

    def _stops(self, message: MessageRow) -> bool:
        """The pass of a sync caller ends with this message: its own, or one at or past its
        own message's position (someone else committed the caller's message)."""
        return message.id == self.stop_after or (
            self.stop_sequence is not None and message.sequence >= self.stop_sequence
        )

    def _decide(self, outcomes: list[TurnOutcome], reached_stop: bool) -> tuple[bool, bool]:
        """``(keep_going, budget_spent)`` after a group: claim the next turn in the commit,
        or release the lease (yielding the head when the budget, not the work, ran out)."""
        stopping = bool(self.should_stop and self.should_stop())
        going_on = outcomes[-1].ok and not reached_stop and not stopping
        processed = self.result.processed + len(outcomes)
        within_budget = self.budget.left(processed)
        if going_on and not within_budget and self._nobody_waits():
            self.budget.renew(processed)
            within_budget = True
        keep_going = going_on and within_budget
        return keep_going, going_on and not keep_going

    def _nobody_waits(self) -> bool:
        """No other actor has due work (asked only when the budget is spent)."""
        return self.others_waiting is not None and not self.others_waiting()

    def _commit(
        self,
        outcomes: list[TurnOutcome],
        committed: tuple[str, bool, dict[str, object]],
        *,
        keep_going: bool,
        yield_head: bool,
        hand_off: bool,
    ) -> tuple[list[TurnOutcome] | None, MessageRow | None]:
        """Commit the group: ``(what was written, the next claimed turn)``; ``None`` for the
        first when the group is to be rerun one turn per commit, from the second."""
        activation = self.activation
        try:
            next_first = commit_group(
                activation,
                self.dialect,
                outcomes,
                keep_going=keep_going,
                yield_head=yield_head,
                hand_off=hand_off,
                own_message=self.stop_after,
            )
            return outcomes, next_first
        except (LostActivation, OperationalError, InterfaceError):
            raise  # lost, or the connection or the server: nothing to pin on a turn
        except Exception as exc:
            # The commit itself failed (a commit action raised, a staged row was refused)
            # and rolled back; the lease and the claim are still ours. Back to the last
            # committed state: a group is rerun one turn per commit, so the failure is
            # pinned on the turn that causes it, which then fails like a handler would
            # (retry with backoff, dead letter) instead of leaving the claim stuck until
            # the lease runs out.
            activation.state_json, activation.dirty, activation.observed = committed
            activation.actor._state = payloads.decode(activation.state_json)
            if len(outcomes) > 1:
                self.solo_until = outcomes[-1].message.sequence
                return None, outcomes[0].message
            lease = activation.lease
            logger.warning(
                "commit of %s/%s message %s failed: %r",
                lease.actor_type,
                lease.actor_id,
                outcomes[0].message.id,
                exc,
            )
            failed = [failed_in_commit(outcomes[0], exc)]
            next_first = commit_group(
                activation, self.dialect, failed, keep_going=False, yield_head=False
            )
            return failed, next_first

    def _lost(self) -> None:
        self.result.lost = True
        lost(self.activation, self.cache)
        ended(self.activation)


def lost(activation: Activation, cache: ActivationCache | None) -> None:
    """The activation's fence failed at its commit: forget the actor object and say so."""
    lease = activation.lease
    if cache is not None:
        cache.evict(lease.instance_id)
    signals.send(
        signals.activation_lost,
        actor_type=lease.actor_type,
        actor_id=lease.actor_id,
        instance_id=lease.instance_id,
        generation=lease.generation,
    )


def finish_pass(
    activation: Activation,
    ran: Ran,
    *,
    should_stop: Callable[[], bool] | None = None,
    cache: ActivationCache | None = None,
) -> PassResult:
    """The pass of an actor whose claimed turn already ran in a batch of several actors
    but must commit on its own (it staged writes, failed, or the batch was refused): its
    group is committed as usual, and the pass goes on from there."""
    settings = get_settings()
    drain = _Drain(
        activation,
        dialect_for(connections[activation.alias]),
        _Budget(settings.MAX_MESSAGES_PER_ACTIVATION_PASS, settings.MAX_ACTIVATION_DURATION),
        stop_after=None,
        should_stop=should_stop,
        others_waiting=None,
        cache=cache,
    )
    return _drain_from(drain, drain.step(ran[0][0].message, ran))


def run_group(
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
            _keep_state(activation, outcome, max_depth)
        if outcome.kind != "completed" or outcome.is_query:
            # Roll back whatever the turn (or a query) did to the in-memory state.
            actor._state = payloads.decode(activation.state_json)
        outcomes.append(outcome)
        if outcome.kind == "failed" or time.monotonic() - started >= max_delay:
            break
    return outcomes


def _keep_state(activation: Activation, outcome: TurnOutcome, max_depth: int) -> None:
    """The state a completed turn left, encoded for its commit (a state that cannot be
    stored fails the turn, for good)."""
    try:
        state_json = payloads.encode(
            activation.actor._state,
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
        return
    if state_json == activation.state_json:
        return
    activation.state_json = state_json
    activation.dirty = True
    warn = get_settings().WARN_STATE_BYTES
    if len(state_json) > warn:
        signals.send(
            signals.state_too_large,
            actor_type=activation.spec.actor_type,
            actor_id=activation.actor.actor_id,
            size=len(state_json),
            limit=warn,
        )
    if activation.spec.observables:
        _stage_broadcasts(activation, outcome)


def _stage_broadcasts(activation: Activation, outcome: TurnOutcome) -> None:
    current = observe(activation)
    changed = {
        name: value
        for name, value in current.items()
        if name not in activation.observed or activation.observed[name] != value
    }
    activation.observed = current
    if changed:
        outcome.broadcasts = changed
