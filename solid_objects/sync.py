"""Caller-assisted synchronous calls.

The caller durably enqueues its message, then runs the actor itself through exactly the same
lease / claim / fenced-commit path a worker uses, up to and including its own message (earlier
messages run first). If another process holds the activation, it waits for the durable result
(in-process wake-ups, bounded polling) and takes over when the lease frees up. A timeout
never cancels the message: ``SyncTimeout.message_reference.result()`` recovers it.

A lost database connection is recovered (:mod:`solid_objects.db.connections`): enqueueing is
tried once more on a fresh connection unless its commit may have happened without an
idempotency key, and driving the enqueued message is tried once more (it is fenced); a lease
held when the connection died is given back. Otherwise the call raises
``DatabaseUnavailable``.
"""

from __future__ import annotations

import math
import threading
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar
from weakref import WeakKeyDictionary

from django.db import IntegrityError, OperationalError, connections

from . import payloads, testcase_transaction
from .activation import Activation, ActivationCache, activate
from .conf import get_settings
from .db.connections import CONNECTION_ERRORS, Attempt, abandon, recovering
from .db.rows import LeaseRow
from .db.vendors import dialect_for
from .errors import (
    ActorCallCycle,
    DatabaseUnavailable,
    InvalidPayload,
    LostActivation,
    MessageFailed,
    Rejected,
    SyncInsideTransaction,
    SyncTimeout,
)
from .lease import acquire, lease_and_claim, take_up, take_up_claimed
from .mailbox import Enqueued, LeaseRequest, enqueue, prepare
from .mailbox import _is_timeout as is_lock_timeout
from .messages import MessageHandle, MessageOutcome
from .passes import run_pass
from .runtime import processes
from .runtime.processes import callers
from .runtime.wakeup import doorbell, progress
from .runtime.wakeup.transports import ensure_listener, hears_hints
from .shards import database_for
from .spec import ActorAddress
from .write_guard import inside_turn

T = TypeVar("T")


class CallerCaches:
    """The activations this process's callers keep warm, one cache per alias: instance ids
    are numbered by each database, so the same id names different actors on two shards."""

    def __init__(self, max_entries: int = 1000) -> None:
        self.max_entries = max_entries
        self._caches: dict[str, ActivationCache] = {}

    def of(self, alias: str) -> ActivationCache:
        cache = self._caches.get(alias)
        if cache is None:
            cache = self._caches.setdefault(alias, ActivationCache(self.max_entries))
        return cache

    def clear(self) -> None:
        for cache in list(self._caches.values()):
            cache.clear()

    def __len__(self) -> int:
        return sum(len(cache) for cache in list(self._caches.values()))


#: Activations this process's callers keep warm between calls.
caller_cache = CallerCaches(max_entries=1000)
#: Inside a test's transaction (rolled back at its end) the warm activations and the caller
#: registration live only as long as that transaction: one cache per test block.
_test_caches: WeakKeyDictionary[Any, ActivationCache] = WeakKeyDictionary()


def cache_for(alias: str) -> ActivationCache:
    """The warm activations a caller on ``alias`` uses: :data:`caller_cache`, or inside a
    test's transaction one of its own (nothing of a rolled-back test survives it)."""
    scope = testcase_transaction.current(alias)
    if scope is None:
        return caller_cache.of(alias)
    cache = _test_caches.get(scope)
    if cache is None:
        cache = _test_caches[scope] = ActivationCache(max_entries=1000)
        callers.forget(alias)  # a registration made in an earlier test was rolled back
    return cache


#: The first wait between steps of a sync caller whose actor another activation holds; it
#: doubles up to MAX_WAIT (hints end a wait early).
FIRST_WAIT = 0.005
MAX_WAIT = 0.1
#: The first wait when this process hears other processes' result hints: the holder's
#: commit wakes the caller, so the backoff is only the net under a lost hint (looking every
#: 5 ms instead cost 16 callers of one actor two reads per call, for nothing).
HEARD_FIRST_WAIT = 0.05


def first_wait(alias: str) -> float:
    """The first backoff of a caller waiting on ``alias``: short unless hints are heard."""
    return HEARD_FIRST_WAIT if hears_hints(alias) else FIRST_WAIT


#: Lock waits follow the deadline up to this many seconds (PostgreSQL's ``lock_timeout``
#: takes at most 2**31 - 1 ms); a longer deadline still bounds the call as a whole.
MAX_LOCK_WAIT = 24 * 86400.0


def sync_timeout(value: Any) -> float:
    """A sync call's ``timeout``: ``None`` is ``SYNC_TIMEOUT``; otherwise positive seconds,
    ``math.inf`` for no deadline. Zero, negative, NaN and non-numbers raise
    :class:`InvalidPayload` (the same on every database, before anything is written)."""
    if value is None:
        return float(get_settings().SYNC_TIMEOUT)
    seconds = _seconds(value)
    if not seconds > 0:
        raise InvalidPayload(
            "timeout must be a positive number of seconds (math.inf: no deadline), got "
            f"{payloads.short_repr(value)}"
        )
    return seconds


def wait_timeout(value: Any) -> float | None:
    """``MessageReference.result(timeout=)``: ``None`` or ``math.inf`` waits as long as it
    takes (``None`` returned); zero or less does not wait (the outcome if it is final,
    :class:`SyncTimeout` otherwise); NaN and non-numbers raise :class:`InvalidPayload`."""
    if value is None:
        return None
    seconds = _seconds(value)
    if seconds == math.inf:
        return None
    return max(seconds, 0.0)


def _seconds(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InvalidPayload(f"timeout must be a number of seconds, got {type(value).__name__}")
    try:
        seconds = float(value)
    except OverflowError:  # an int beyond the float range
        seconds = math.inf if value > 0 else -math.inf
    if math.isnan(seconds):
        raise InvalidPayload("timeout must be a number of seconds, got NaN")
    return seconds


class _Pending:
    """Marker: the caller could not finish the message itself this time."""

    def __repr__(self) -> str:
        return "PENDING"


PENDING: Any = _Pending()


@dataclass(frozen=True)
class Started:
    """A sync call's message, enqueued; ``done`` is its result when the caller could run it
    at once (otherwise :data:`PENDING`: wait for it with :func:`step`)."""

    message: MessageHandle
    alias: str
    deadline: float | None
    done: Any
    #: The enqueue found the actor's lease taken (another activation runs it).
    held_elsewhere: bool = False


def call_sync(
    reference: ActorAddress,
    operation: str,
    arguments: dict[str, Any],
    *,
    timeout: float | None,
    idempotency_key: str | None,
    wrap: Callable[[Enqueued], MessageHandle],
    using: str | None = None,
) -> Any:
    """Enqueue ``operation`` for ``reference`` and drive it to its outcome; ``wrap`` turns
    the enqueued message into the reference a timeout or an outage error carries."""
    started = start_sync(
        reference,
        operation,
        arguments,
        timeout=timeout,
        idempotency_key=idempotency_key,
        wrap=wrap,
        using=using,
    )
    if started.done is not PENDING:
        return started.done
    message, alias, deadline = started.message, started.alias, started.deadline
    tries = [started.held_elsewhere]

    def drive(attempt: Attempt) -> Any:
        look_first = not tries.pop() if tries else True  # a retry looks at once
        return _drive(message, deadline, alias, assist=True, look_first=look_first)

    return recovering(alias, "sync call", drive, message_reference=message)


def _inside_transaction(alias: str, settings: Any) -> bool:
    """Whether the caller is inside ``transaction.atomic()`` on the actor's database or,
    with shards, on another of ours (the call would commit apart from the caller's
    writes there)."""
    aliases = {alias} if len(settings.shards) == 1 else {alias, settings.DATABASE, *settings.shards}
    return any(
        connections[other].in_atomic_block and not testcase_transaction.allows_sync(other)
        for other in aliases
    )


def start_sync(
    reference: ActorAddress,
    operation: str,
    arguments: dict[str, Any],
    *,
    timeout: float | None,
    idempotency_key: str | None,
    wrap: Callable[[Enqueued], MessageHandle],
    using: str | None = None,
) -> Started:
    """The first half of a sync call (it never waits for another process): validate,
    enqueue and claim in one transaction, and run the actor up to the message if the claim
    succeeded. The async face runs this in a worker thread and waits on the event loop."""
    settings = get_settings()
    alias = using or database_for(reference.actor_type, reference.actor_id)
    if inside_turn():
        raise ActorCallCycle(
            "actor code cannot make synchronous calls to actors; use self.send_to(ref).op()"
        )
    timeout = sync_timeout(timeout)
    connection = connections[alias]
    # Everything is checked before the first statement: bad input writes nothing, not even
    # this process's registration as a caller.
    arguments_json = prepare(
        reference.spec,
        reference.actor_id,
        operation,
        arguments,
        delivery_mode="sync",
        idempotency_key=idempotency_key,
        available_at=None,
        dialect=dialect_for(connection),
        settings=settings,
    )
    if _inside_transaction(alias, settings):
        raise SyncInsideTransaction(
            "a synchronous actor call cannot run inside transaction.atomic(): the caller must "
            "commit the message and then run the actor. Use ref.enqueue(...) inside the "
            "transaction, or mark the view with @transaction.non_atomic_requests"
        )
    cache = cache_for(alias)
    deadline = None if timeout == math.inf else time.monotonic() + timeout
    lock_wait = min(timeout, MAX_LOCK_WAIT)
    dialect = dialect_for(connection)
    # PostgreSQL outside a transaction: the enqueue is one autocommit statement that also
    # takes the actor's lease if it is free; the first claim is one more (take_up).
    # Elsewhere the lease and the first claim are in the enqueue's transaction.
    # (Decided inside the recovered call: asking for autocommit opens the connection.)
    # Its request id is chosen once: run again after a lost reply, it finds the message.
    request_id = str(uuid.uuid4()) if dialect.lease_on_enqueue else None
    token = str(uuid.uuid4())
    #: How the caller builds the activation it took with its enqueue, if it took one, and
    #: the lease to give back if that fails for a lost connection.
    firsts: list[tuple[Callable[[], Activation | None], LeaseRow | None]] = []
    held: list[bool] = []  # the new message's actor was leased by another activation

    def enqueue_and_claim(owner: str, attempt: Attempt) -> MessageHandle:
        one_statement = (
            request_id is not None
            and not connection.in_atomic_block
            and connection.get_autocommit()
        )

        def claim_in_same_transaction(cursor: Any, enqueued: Enqueued) -> None:
            claim = lease_and_claim(
                cursor, alias, owner, [enqueued.instance_id], cache, locked=True
            )
            if claim is not None:
                firsts.append((lambda: activate(alias, claim, cache), claim.lease))
            else:
                held.append(True)
            attempt.committing()  # from here on the enqueue may have committed
            attempt.message_reference = wrap(enqueued)

        enqueued = enqueue(
            reference.spec,
            reference.actor_id,
            operation,
            arguments,
            delivery_mode="sync",
            idempotency_key=idempotency_key,
            using=alias,
            lock_wait=lock_wait,
            then=None if one_statement else claim_in_same_transaction,
            prepared=arguments_json,
            request_id=request_id if one_statement else None,
            leasing=(
                LeaseRequest(
                    owner,
                    token,
                    settings.LEASE_DURATION,
                    cached=cached_revision(alias, reference, cache),
                )
                if one_statement
                else None
            ),
        )
        attempt.message_reference = wrap(enqueued)
        if one_statement and enqueued.created:
            remember_instance(alias, reference, enqueued.instance_id)
            if enqueued.leased is False:
                held.append(True)
            else:
                instance_id, claimed = enqueued.instance_id, enqueued.claimed
                taken = released_lease(enqueued, owner, token)
                if claimed is not None:  # the enqueue claimed the message too
                    firsts.append((lambda: take_up_claimed(alias, claimed, cache), taken))
                else:
                    firsts.append((lambda: take_up(alias, owner, token, instance_id, cache), taken))
        return wrap(enqueued)

    def enqueue_once(attempt: Attempt) -> MessageHandle:
        firsts.clear()
        held.clear()
        try:
            return with_caller(
                alias, lambda owner: enqueue_and_claim(owner, attempt), lock_wait=lock_wait
            )
        except CONNECTION_ERRORS:
            if firsts and firsts[0][1] is not None:
                abandon(alias, firsts[0][1])  # it may have committed: give it back
            raise

    try:
        message = recovering(
            alias,
            "sync call",
            enqueue_once,
            idempotent=idempotency_key is not None or request_id is not None,
        )
    except OperationalError as exc:
        # Registering this process as a caller waited for a database lock past the deadline
        # (enqueue reports its own lock waits as SyncTimeout already).
        if isinstance(exc, DatabaseUnavailable) or not is_lock_timeout(exc):
            raise
        raise SyncTimeout(
            f"{reference.actor_type}/{reference.actor_id}: the database stayed locked longer "
            "than the deadline; nothing was enqueued",
            message_reference=None,
            actor_type=reference.actor_type,
            actor_id=reference.actor_id,
            status="not enqueued",
            waiting_on="database lock",
        ) from exc
    pending = firsts[:1]

    def first_run(attempt: Attempt) -> Any:
        if not pending:  # a retry never reuses the first lease
            return PENDING
        build, held = pending.pop()
        try:
            activation = build()
        except CONNECTION_ERRORS:
            if held is not None:
                abandon(alias, held)
            raise
        if activation is None:
            return PENDING
        return _run(message, alias, deadline, activation)

    held_elsewhere = bool(held)
    done = recovering(alias, "sync call", first_run, message_reference=message)
    return Started(message, alias, deadline, done, held_elsewhere)


#: The instance ids of the actors this process's sync callers enqueued to, by alias and
#: actor (the most recent :data:`MAX_KNOWN_INSTANCES`), so an enqueue that also claims can
#: name the state revision this process keeps warm before it knows the row.
_known_instances: OrderedDict[tuple[str, str, str], int] = OrderedDict()
_known_lock = threading.Lock()
MAX_KNOWN_INSTANCES = 10_000


def remember_instance(alias: str, reference: ActorAddress, instance_id: int) -> None:
    key = (alias, reference.actor_type, reference.actor_id)
    with _known_lock:
        _known_instances[key] = instance_id
        _known_instances.move_to_end(key)
        while len(_known_instances) > MAX_KNOWN_INSTANCES:
            _known_instances.popitem(last=False)


def cached_revision(
    alias: str, reference: ActorAddress, cache: ActivationCache
) -> tuple[int, int] | None:
    """``(instance id, state revision)`` of the actor if this process keeps it warm."""
    with _known_lock:
        instance_id = _known_instances.get((alias, reference.actor_type, reference.actor_id))
    if instance_id is None:
        return None
    revision = cache.revisions_of([instance_id]).get(instance_id)
    return None if revision is None else (instance_id, revision)


def released_lease(enqueued: Enqueued, owner: str, token: str) -> LeaseRow:
    """The lease a sync caller's enqueue took, as far as giving it back needs it (its
    instance, token and generation; a generation of 0 gives back nothing)."""
    return LeaseRow(
        instance_id=enqueued.instance_id,
        actor_type=enqueued.actor_type,
        actor_id=enqueued.actor_id,
        state=None,
        state_version=0,
        state_revision=0,
        generation=enqueued.lease_generation,
        token=token,
        owner_id=owner,
        has_stale_claim=False,
    )


def wait_for(message: MessageHandle, timeout: float | None) -> Any:
    deadline = result_deadline(timeout)
    assist = may_assist(message.using)
    return recovering(
        message.using,
        "result()",
        lambda attempt: _drive(message, deadline, message.using, assist=assist),
        message_reference=message,
    )


def result_deadline(timeout: float | None) -> float | None:
    """The monotonic deadline of ``MessageReference.result(timeout=...)``."""
    seconds = wait_timeout(timeout)
    return None if seconds is None else time.monotonic() + seconds


def may_assist(alias: str) -> bool:
    """Whether a caller waiting for a result may run the actor itself: never inside a turn,
    nor inside the caller's transaction (except a test's, see :mod:`.testcase_transaction`)."""
    if inside_turn():
        return False
    return not connections[alias].in_atomic_block or testcase_transaction.allows_sync(alias)


def _drive(
    message: MessageHandle,
    deadline: float | None,
    alias: str,
    *,
    assist: bool,
    look_first: bool = True,
) -> Any:
    """Step until the message's outcome is final. Between steps, wait for a ``result`` hint
    or the backoff (doubling up to :data:`MAX_WAIT`). What the hints tell
    (:mod:`.runtime.wakeup.progress`) decides whether a hint is worth a step: this message
    may be final, or the actor was released and this caller is the one of its process to
    take it over (the one whose message is furthest behind: its pass runs the others'
    messages in grouped commits). Other hints only say that other messages were finished.
    ``look_first=False``: the caller's enqueue has just found the actor held, so the first
    look waits for a hint (or the first backoff) instead of finding the same."""
    with progress.waiting(alias, message.instance_id, message.sequence):
        return _wait_and_step(message, deadline, alias, assist=assist, look_first=look_first)


def _wait_and_step(
    message: MessageHandle,
    deadline: float | None,
    alias: str,
    *,
    assist: bool,
    look_first: bool = True,
) -> Any:
    bell = doorbell("result")
    wait = first_wait(alias)
    take_over = False
    while True:
        seen = bell.generation
        heard = progress.known(alias, message.instance_id)
        if look_first:
            done = step(message, alias, deadline, assist=assist, take_over=take_over)
            if done is not PENDING:
                return done
        else:
            ensure_listener(alias)  # hear the holder's result hints
        look_first, take_over = True, False
        look_again = time.monotonic() + wait
        if deadline is not None:
            look_again = min(look_again, deadline)
        while True:
            left = look_again - time.monotonic()
            if left <= 0 or not bell.wait(seen, left):
                wait = min(wait * 2, MAX_WAIT)  # the backoff ran out: look at the database
                break
            seen = bell.generation
            heeded, heard = after_hint(message, alias, heard, assist=assist)
            if heeded in (LOOK, TAKE_OVER):
                take_over = heeded == TAKE_OVER
                break
            if heeded == CLOSER:  # the backoff starts over
                look_again = time.monotonic() + wait
                if deadline is not None:
                    look_again = min(look_again, deadline)


#: What a waiting caller does after a ``result`` hint (:func:`after_hint`).
LOOK, TAKE_OVER, CLOSER, WAIT = "look", "take over", "closer", "wait"


def after_hint(
    message: MessageHandle, alias: str, heard: tuple[int, int, int], *, assist: bool
) -> tuple[str, tuple[int, int, int]]:
    """What a caller waiting for ``message`` does after a ``result`` hint, from what this
    process has heard of its actor (:func:`.progress.known`) since ``heard``; returned with
    what it has heard now. The sync and the awaited waiters (:mod:`solid_objects.aio`) both
    decide with it:

    - :data:`LOOK`: this message may be final, or a hint said nothing (or the actor was
      released and the caller does not run actors): read the database;
    - :data:`TAKE_OVER`: the actor was released with this message still pending as far as
      this process heard, and this caller is the one of its process to take it over (its
      pass reads the message's outcome);
    - :data:`CLOSER`: the actor is making progress towards this message: keep waiting, the
      backoff starts over (hints of other actors never extend it);
    - :data:`WAIT`: nothing for this caller (other actors' progress, or a release another
      waiter takes over): keep waiting.
    """
    now = progress.known(alias, message.instance_id)
    if now[0] >= message.sequence or now[2] != heard[2]:
        return LOOK, now
    if now[1] != heard[1]:
        if not assist:
            return LOOK, now
        if progress.next_to_run(alias, message.instance_id, message.sequence):
            return TAKE_OVER, now
    return (CLOSER if now[0] != heard[0] else WAIT), now


def step(
    message: MessageHandle,
    alias: str,
    deadline: float | None,
    *,
    assist: bool,
    take_over: bool = False,
) -> Any:
    """One look at a message being waited for (it never waits itself): run the actor if
    ``assist`` and nobody holds it, else read the outcome. Returns the result (or raises
    ``Rejected`` / ``MessageFailed``), raises :class:`SyncTimeout` past ``deadline``, or
    returns :data:`PENDING` (the caller waits for a hint or a short delay, then steps again).

    ``take_over``: a hint said the actor was released before this message was final, so
    the lease is tried before the outcome is read (if someone else finished the message
    meanwhile, the pass ends at its position and the next look reads it).

    A result the completing commit's own hint carried is returned without any read."""
    carried = progress.carried_result(alias, message.instance_id, message.sequence, message.id)
    if carried is not None:
        return payloads.decode(carried)
    if take_over and message.instance_id:
        done = _try_run(message, alias, deadline)
        if done is not PENDING:
            return done
    # The outcome first: after a result hint the message is usually done, and a caller
    # that leased the actor anyway would go on to run other callers' messages.
    outcome = message.outcome()
    if outcome.status in ("completed", "rejected", "dead"):
        return message.raise_or_return(outcome)
    if assist and message.instance_id and not take_over:
        done = _try_run(message, alias, deadline)
        if done is not PENDING:
            return done
    remaining = None if deadline is None else deadline - time.monotonic()
    if remaining is not None and remaining <= 0:
        raise _timeout(message, outcome)
    ensure_listener(alias)  # another process runs it: hear its result hint
    return PENDING


def _try_run(message: MessageHandle, alias: str, deadline: float | None) -> Any:
    remaining = None if deadline is None else deadline - time.monotonic()
    if remaining is not None and remaining <= 0:
        return PENDING
    activation = with_caller(
        alias, lambda owner: acquire(alias, owner, [message.instance_id], cache_for(alias))
    )
    if activation is None:
        return PENDING
    return _run(message, alias, deadline, activation)


def _run(message: MessageHandle, alias: str, deadline: float | None, activation: Activation) -> Any:
    remaining = None if deadline is None else max(deadline - time.monotonic(), 0.001)
    try:
        result = run_pass(
            activation,
            stop_after=message.id,
            stop_at_sequence=message.sequence,
            max_messages=1_000_000,
            max_seconds=remaining if remaining is not None else 3600.0,
            cache=cache_for(alias),
        )
    except LostActivation:
        return PENDING
    except CONNECTION_ERRORS:
        abandon(alias, activation.lease)  # given back once a connection works again
        raise
    outcome = result.outcomes.get(message.id)
    if outcome is None:
        return PENDING
    # What the caller gets is decoded from what was stored, as any other reader of the
    # outcome gets it (never the handler's own objects, which may be the actor's state).
    if outcome.kind == "completed":
        return payloads.decode(outcome.result_json)
    if outcome.kind == "rejected" and outcome.rejection is not None:
        stored = payloads.decode(outcome.rejection_json) or outcome.rejection.as_dict()
        raise Rejected(stored["code"], stored["message"], stored["details"])
    if outcome.kind == "dead":
        error = outcome.error or {}
        raise MessageFailed(
            f"{message.actor_type}/{message.actor_id} message {message.id} failed: "
            f"{error.get('class', 'error')}: {error.get('message', '')}",
            error=error,
            message_id=message.id,
        ) from outcome.exception
    return PENDING  # failed, retry scheduled: wait for it (or time out)


def with_caller(alias: str, work: Callable[[str], T], lock_wait: float | None = None) -> T:
    """Run ``work(owner_id)`` as this process's caller; if the registry row it names was
    deleted (pruned, or a test flushed the table) the foreign key refuses the lease: register
    again and retry once. ``lock_wait`` bounds waiting for a database lock to register."""
    owner = callers.process_id(alias, lock_wait=lock_wait)
    try:
        return work(owner)
    except IntegrityError:
        if processes.heartbeat(owner, alias):
            raise
        callers.forget(alias)
        return work(callers.process_id(alias, lock_wait=lock_wait))


def _timeout(message: MessageHandle, outcome: MessageOutcome) -> SyncTimeout:
    if outcome.status == "claimed":
        waiting_on = "another process holds the activation and runs this message"
    elif outcome.status == "ready" and outcome.attempts:
        waiting_on = f"a retry of this message (attempt {outcome.attempts} failed)"
    elif outcome.status == "ready":
        waiting_on = "earlier messages or another activation of this actor"
    else:
        waiting_on = outcome.status
    return SyncTimeout(
        f"{message.actor_type}/{message.actor_id}: message {message.id} (sequence "
        f"{message.sequence}) is still {outcome.status}; waiting on {waiting_on}",
        message_reference=message,
        actor_type=message.actor_type,
        actor_id=message.actor_id,
        status=outcome.status,
        waiting_on=waiting_on,
    )
