"""The effect outbox: run what committed turns emitted, at least once.

Per effect:

1. **Claim** (one short transaction, committed before anything runs): a due ``pending`` row
   becomes ``processing`` under this process, its attempt counted (``SKIP LOCKED``).
2. **Run** the handler registered with ``@solid_objects.effect(name)`` as
   ``handler(arguments, context)`` outside any transaction (an ``async def`` handler is
   awaited on an event loop of its own, :func:`asgiref.sync.async_to_sync`). The
   supervisor's main thread keeps heartbeating meanwhile, so a long handler is not taken
   for dead.
3. **Record** (one short transaction, fenced on the claim): ``completed`` with the result
   and, atomically, the ``on_success`` callback enqueued into the emitting actor; or
   ``pending`` again after ``retry_delay(attempt)``; or ``dead`` after ``max_attempts`` (or
   a non-retryable error) with the ``on_failure`` callback.

A process that dies between 1 and 3 has its effects handed back to ``pending`` by
dead-process cleanup; the next worker runs them again with the same ``effect_id``, which is
why handlers pass it to providers as their idempotency key.
"""

from __future__ import annotations

import inspect
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from asgiref.sync import async_to_sync
from django.db import (
    DatabaseError,
    IntegrityError,
    InterfaceError,
    OperationalError,
    connections,
    transaction,
)

from .. import payloads, signals
from ..conf import get_settings
from ..db import outbox as queries
from ..db import rate_limits
from ..db.connections import DEADLOCK_RETRIES, is_deadlock
from ..db.outbox import ACTOR_MESSAGE, RECORD_ACTIVITY, EffectRow
from ..db.vendors import dialect_for
from ..errors import (
    IdempotencyConflict,
    SolidObjectsError,
    is_retryable,
)
from ..mailbox import enqueue
from ..registry import (
    effect_rate_interval,
    effect_retry_delay,
    effect_timeout,
    get_effect,
    get_spec,
)
from ..runtime.roles import Role
from ..turn import describe_exception
from . import actor_messages, journal_entries

logger = logging.getLogger("solid_objects")

COMPLETED, RETRIED, DEAD, LOST = "completed", "retried", "dead", "lost"
#: A failure delivered to the effect's ``on_failure`` callback: an outcome the actor handled,
#: not a dead effect (nothing to alert on, nothing to retry).
HANDLED = "handled"
#: Errors that say nothing about the effect (connection lost, deadlock, lock timeout): the
#: outcome is kept and written again later instead of being recorded as a failure.
TRANSIENT = (OperationalError, InterfaceError)


class UnknownEffect(SolidObjectsError, LookupError):
    """No handler is registered under the effect's name (not retried: the effect is dead)."""

    retryable = False


@dataclass(frozen=True, slots=True)
class EffectContext:
    """The second argument of an effect handler."""

    effect_id: str  # stable across attempts: the provider's idempotency key
    name: str
    attempt: int
    max_attempts: int
    actor_type: str
    actor_id: str
    instance_id: int
    message_id: int  # the turn that emitted the effect
    using: str


@dataclass(slots=True)
class Attempt:
    """What running one claimed effect produced, waiting to be recorded."""

    row: EffectRow
    ok: bool
    result: Any = None
    result_json: str | None = None
    error: dict[str, Any] | None = None
    retryable: bool = True
    duration: float = 0.0


# -- claiming ---------------------------------------------------------------------------------
def claim_due(alias: str, process_id: str, limit: int = 1) -> list[EffectRow]:
    """Claim up to ``limit`` due effects (a non-locking probe first: idle polls stay cheap
    and never take SQLite's write lock)."""
    connection = connections[alias]
    dialect = dialect_for(connection)
    with connection.cursor() as cursor:
        if not queries.any_due(cursor, dialect):
            return []
    with transaction.atomic(using=alias), connection.cursor() as cursor:
        return queries.claim(cursor, dialect, process_id, limit)


# -- running ----------------------------------------------------------------------------------
def execute(row: EffectRow, alias: str) -> Attempt:
    """Run the effect's handler (outside any transaction). Actor messages have no handler:
    they are delivered when the attempt is recorded."""
    if row.name == ACTOR_MESSAGE:
        return _deliver_across(row, alias)
    if row.name == RECORD_ACTIVITY:
        try:
            journal_entries.write(row)
        except Exception as exc:
            error = describe_exception(exc)
            return Attempt(row, ok=False, error=error, retryable=is_retryable(exc))
        return Attempt(row, ok=True)
    started = time.monotonic()
    handler = get_effect(row.name)
    if handler is None:
        error = describe_exception(UnknownEffect(f"no effect handler {row.name!r} is registered"))
        return Attempt(row, ok=False, error=error, retryable=False)
    context = EffectContext(
        effect_id=row.effect_id,
        name=row.name,
        attempt=row.attempt,
        max_attempts=row.max_attempts,
        actor_type=row.actor_type,
        actor_id=row.actor_id,
        instance_id=row.instance_id,
        message_id=row.message_id,
        using=alias,
    )
    try:
        timeout = effect_timeout(row.name)
        if timeout is None:
            result = handler(row.arguments, context)
            if inspect.isawaitable(result):
                result = async_to_sync(_awaited)(result)
        else:
            result = _within(timeout, handler, row.arguments, context)
        result_json = payloads.encode(
            result,
            what="effect result",
            limit=get_settings().MAX_RESULT_BYTES,
            # One level less than the column allows: callbacks carry it inside their arguments.
            max_depth=dialect_for(connections[alias]).json_max_depth - 1,
        )
    except Exception as exc:
        return Attempt(
            row,
            ok=False,
            error=describe_exception(exc),
            retryable=is_retryable(exc),
            duration=time.monotonic() - started,
        )
    return Attempt(
        row, ok=True, result=result, result_json=result_json, duration=time.monotonic() - started
    )


def _deliver_across(row: EffectRow, alias: str) -> Attempt:
    """An actor message is delivered when its attempt is recorded, in that transaction;
    one to an actor on another shard is delivered (and committed there) here, first."""
    try:
        if actor_messages.target_database(row) == alias:
            return Attempt(row, ok=True)
        actor_messages.deliver(row)
    except Exception as exc:
        return Attempt(row, ok=False, error=describe_exception(exc), retryable=is_retryable(exc))
    return Attempt(row, ok=True)


async def _awaited(awaitable: Any) -> Any:
    return await awaitable


class EffectTimeout(SolidObjectsError, TimeoutError):
    """The handler ran longer than its effect's ``timeout``: the attempt is abandoned (it
    fails and is retried like any failure; the handler's thread is left to finish alone)."""


def _within(timeout: float, handler: Callable[..., Any], arguments: Any, context: Any) -> Any:
    """Run ``handler`` in a thread of its own and wait at most ``timeout`` seconds for it.

    A handler that overruns cannot be stopped from outside: its thread is abandoned (a
    daemon, its outcome discarded) while this worker records the timeout and moves on; its
    heartbeat never stopped, so the process is not taken for dead meanwhile.
    """
    done = threading.Event()
    outcome: dict[str, Any] = {}

    def run() -> None:
        try:
            value = handler(arguments, context)
            if inspect.isawaitable(value):
                value = async_to_sync(_awaited)(value)
            outcome["value"] = value
        except BaseException as exc:
            outcome["error"] = exc
        finally:
            for alias in connections:
                connections[alias].close()
            done.set()

    thread = threading.Thread(target=run, name=f"effect-{context.effect_id}", daemon=True)
    thread.start()
    if not done.wait(timeout):
        raise EffectTimeout(
            f"effect {context.name!r} ({context.effect_id}) ran longer than its timeout of "
            f"{timeout:g}s; the attempt was abandoned"
        )
    if "error" in outcome:
        raise outcome["error"]
    return outcome.get("value")


# -- recording --------------------------------------------------------------------------------
def record(alias: str, process_id: str, attempt: Attempt) -> str:
    """Write the attempt's outcome under the claim fence; returns ``completed``,
    ``retried``, ``dead`` or ``lost`` (the claim was taken away: nothing written).

    A :data:`TRANSIENT` error (connection lost, deadlock) propagates and nothing is
    written: the caller keeps the attempt and records it again later.
    """
    if attempt.ok:
        try:
            outcome = _record_success(alias, process_id, attempt)
        except TRANSIENT:
            raise
        except (SolidObjectsError, DatabaseError) as exc:  # an actor message not deliverable
            attempt = replace(
                attempt, ok=False, error=describe_exception(exc), retryable=is_retryable(exc)
            )
            outcome = _record_failure(alias, process_id, attempt)
    else:
        outcome = _record_failure(alias, process_id, attempt)
    _announce(attempt, outcome)
    return outcome


def _record_success(alias: str, process_id: str, attempt: Attempt) -> str:
    row = attempt.row
    connection = connections[alias]
    dialect = dialect_for(connection)
    with transaction.atomic(using=alias), connection.cursor() as cursor:
        if row.name == ACTOR_MESSAGE:
            if not queries.finish(cursor, dialect, row, process_id, status="completed"):
                return LOST
            if actor_messages.target_database(row) == alias:
                actor_messages.deliver(row)  # a failure rolls the completion back
            return COMPLETED
        callback = row.success_operation
        source = callback is not None and queries.lock_instance(cursor, dialect, row.instance_id)
        if not queries.finish(
            cursor, dialect, row, process_id, status="completed", result=attempt.result_json
        ):
            return LOST
        if source and callback is not None:
            failure = _callback(
                alias,
                row,
                callback,
                "success",
                {"effect_id": row.effect_id, "arguments": row.arguments, "result": attempt.result},
            )
            if failure is not None:
                note = {**describe_exception(failure), "callback": callback}
                queries.note_error(cursor, dialect, row.id, payloads.encode(note))
    return COMPLETED


class _ClaimLost(Exception):
    """The fence refused the outcome: roll back whatever this recording did."""


def _record_failure(alias: str, process_id: str, attempt: Attempt) -> str:
    row = attempt.row
    error = attempt.error or {}
    error_json = payloads.encode(error, what="effect error")
    connection = connections[alias]
    dialect = dialect_for(connection)
    dead = not attempt.retryable or row.attempt >= row.max_attempts
    try:
        with transaction.atomic(using=alias), connection.cursor() as cursor:
            if not dead:
                delay = effect_retry_delay(row.name, row.attempt)
                done = queries.reschedule(
                    cursor, dialect, row, process_id, error=error_json, delay=delay
                )
                return RETRIED if done else LOST
            callback = row.failure_operation
            source = callback is not None and queries.lock_instance(
                cursor, dialect, row.instance_id
            )
            delivered = False
            if source and callback is not None:
                # The failure goes to the actor first: only a failure its on_failure
                # callback received is handled; one that could not be delivered is dead.
                failure = _callback(
                    alias,
                    row,
                    callback,
                    "failure",
                    {
                        "effect_id": row.effect_id,
                        "arguments": row.arguments,
                        "error": {"class": error.get("class"), "message": error.get("message")},
                    },
                )
                delivered = failure is None
                if failure is not None:
                    error = {**error, "callback": describe_exception(failure)}
                    error_json = payloads.encode(error, what="effect error")
            status = HANDLED if delivered else DEAD
            if not queries.finish(
                cursor, dialect, row, process_id, status=status, error=error_json
            ):
                raise _ClaimLost
    except _ClaimLost:
        return LOST
    return HANDLED if delivered else DEAD


def _callback(
    alias: str, row: EffectRow, operation: str, kind: str, arguments: dict[str, Any]
) -> Exception | None:
    """Enqueue ``operation`` into the emitting actor (whose row the caller holds locked, so
    the enqueue reaches this incarnation and can never create a new one). Errors other
    than operational ones are returned: the effect's outcome still stands."""
    try:
        enqueue(
            get_spec(row.actor_type),
            row.actor_id,
            operation,
            arguments,
            delivery_mode="internal",
            idempotency_key=f"effect:{row.effect_id}:{kind}",
            using=alias,
        )
    except TRANSIENT:
        raise
    except IdempotencyConflict as exc:
        # A retried dead effect failed again: the actor was already told about a failure.
        logger.info("effect %s: %s callback already enqueued (%s)", row.effect_id, kind, exc)
        return None
    except (SolidObjectsError, DatabaseError) as exc:
        logger.error(
            "effect %s: the %s callback %s.%s could not be enqueued: %s",
            row.effect_id,
            kind,
            row.actor_type,
            operation,
            exc,
        )
        return exc
    return None


def _announce(attempt: Attempt, outcome: str) -> None:
    row = attempt.row
    payload = {
        "effect_id": row.effect_id,
        "name": row.name,
        "actor_type": row.actor_type,
        "actor_id": row.actor_id,
        "attempt": row.attempt,
        "duration": attempt.duration,
    }
    if outcome == COMPLETED:
        signals.send(signals.effect_delivered, **payload)
    elif outcome in (RETRIED, DEAD, HANDLED):
        error = attempt.error or {}
        signals.send(
            signals.effect_failed,
            dead=outcome == DEAD,
            handled=outcome == HANDLED,
            error_class=error.get("class", ""),
            **payload,
        )
    else:
        logger.info(
            "effect %s: the claim was taken away (handed back, re-claimed or its actor "
            "destroyed); this attempt's outcome was not recorded",
            row.effect_id,
        )


# -- entry points ------------------------------------------------------------------------------
#: The effect was handed back: its rate limit has no slot for it yet (no attempt counted).
DEFERRED = "deferred"
#: How long an attempt may wait for its rate-limit slot while holding its claim; a later
#: slot hands the effect back, due at that slot.
MAX_SLOT_WAIT = 1.0


def process(alias: str, process_id: str, row: EffectRow) -> str:
    """Run and record one claimed effect (after its rate limit's slot, if it has one)."""
    if not slot_ready(alias, process_id, row):
        return DEFERRED
    return record(alias, process_id, execute(row, alias))


def slot_ready(alias: str, process_id: str, row: EffectRow) -> bool:
    """Whether the claimed ``row`` may run now: it has no rate limit, or it took its slot
    (and slept until it). ``False``: it was handed back, due at its slot."""
    interval = effect_rate_interval(row.name)
    return interval is None or _wait_for_slot(alias, process_id, row, interval)


def _wait_for_slot(alias: str, process_id: str, row: EffectRow, interval: float) -> bool:
    """Take the next slot of the effect's rate (in the database) and sleep until it; or
    hand the effect back, due at its slot, when that is more than ``MAX_SLOT_WAIT`` away.
    A deadlock victim (InnoDB) tries again, up to ``DEADLOCK_RETRIES`` times.

    A rate is global: its row lives on the home alias ``SOLID_OBJECTS["DATABASE"]``
    whichever shard holds the effect, so every worker of every shard shares it. On the
    home alias itself the hand-back commits with the slot's read; an effect of another
    shard is handed back on its own shard right after (nothing was taken: a failure there
    leaves the claim to be tried again)."""
    home = get_settings().DATABASE
    connection = connections[home]
    dialect = dialect_for(connection)
    failures = 0
    while True:
        try:
            with transaction.atomic(using=home), connection.cursor() as cursor:
                slot = rate_limits.take_slot(cursor, dialect, row.name, interval, MAX_SLOT_WAIT)
                if slot is not None and not slot[0] and home == alias:
                    queries.defer(cursor, dialect, row, process_id, slot[2])
                    return False
        except DatabaseError as exc:
            failures += 1
            if failures > DEADLOCK_RETRIES or not is_deadlock(exc):
                raise
            continue
        if slot is None:  # the name's first attempt anywhere: its row, in its own transaction
            try:
                with transaction.atomic(using=home), connection.cursor() as cursor:
                    rate_limits.create(cursor, dialect, row.name)
            except IntegrityError:
                pass  # another worker created it first
            continue
        if not slot[0]:  # an effect of another shard than the home alias: hand it back there
            shard = connections[alias]
            with transaction.atomic(using=alias), shard.cursor() as cursor:
                queries.defer(cursor, dialect_for(shard), row, process_id, slot[2])
            return False
        wait = slot[1]
        if wait > 0:
            time.sleep(wait)
        return True


def run_pending_effects(using: str | None = None, *, limit: int = 1000) -> int:
    """Deliver due effects in this process, one by one, until none is due (or ``limit``);
    returns how many attempts ran. For tests, scripts and shells; workers use
    :class:`EffectRole`."""
    from ..runtime.processes import callers

    alias = using or get_settings().DATABASE
    process_id = callers.process_id(alias)
    count = 0
    while count < limit:
        rows = claim_due(alias, process_id, 1)
        if not rows:
            break
        for row in rows:
            process(alias, process_id, row)
            count += 1
    return count


def retry_dead_effect(effect_id: str, using: str | None = None) -> bool:
    """Send a ``dead`` effect back to ``pending`` (attempts reset); ``False`` if there is no
    dead effect with this ``effect_id``. Its ``on_success`` callback is enqueued if it now
    succeeds; an ``on_failure`` callback is not repeated if it fails again."""
    from ..models import Effect  # the outbox package itself never loads the models

    alias = using or get_settings().DATABASE
    return Effect.objects.using(alias).filter(effect_id=str(effect_id)).retry_dead() == 1


class EffectRole(Role):
    """Claims due effects one at a time, runs them and records their outcome."""

    name = "effects"
    kind = "effect"
    doorbell_kind = "effect"
    #: Effects claimed per poll. One keeps a slow handler from holding others back.
    batch_size = 1

    def __init__(self, supervisor: Any, index: int = 0) -> None:
        super().__init__(supervisor, index)
        self._unrecorded: list[Attempt] = []
        #: Claimed rows whose rate-limit slot a database error kept us from taking: taken
        #: first at the next pass (the claim stays this process's meanwhile).
        self._unslotted: list[EffectRow] = []

    def run_once(self) -> bool:
        # An outcome a database error kept us from writing: write it first (never run the
        # handler again for it). A DatabaseError here backs the loop off and comes back.
        self._record_outcomes()
        if not self._unslotted:
            self._unslotted = claim_due(self.alias, self.process_id, self.batch_size)
            if not self._unslotted:
                return False
        while self._unslotted:
            row = self._unslotted[0]
            # The rate limit of its name holds across every worker, host and shard (a handed-back
            # row is due again at its slot and claimed then).
            if slot_ready(self.alias, self.process_id, row):
                self._unrecorded.append(execute(row, self.alias))
            self._unslotted.pop(0)
        self._record_outcomes()
        return True

    def _record_outcomes(self) -> None:
        while self._unrecorded:
            record(self.alias, self.process_id, self._unrecorded[0])
            self._unrecorded.pop(0)
