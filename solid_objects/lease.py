"""Steps 1 and 2 of a pass: take an actor's lease and claim its first turn.

:func:`acquire` is the whole step: in one short transaction (on PostgreSQL one autocommit
statement), lock a free candidate instance (``SKIP LOCKED``), take the lease (owner, fresh
token, ``generation + 1``, expiry on the database clock), recover a claim a dead activation
left behind, and claim the lowest-sequence ready message (its attempt counted *before* the
handler runs, so a handler that kills the process still reaches its dead letter after
``MAX_ATTEMPTS``); then build the actor (:func:`solid_objects.activation.activate`).
:func:`lease_and_claim` is its database part, inside the caller's transaction.
:func:`claim_runnable` claims the next turn at any later point of the pass.
"""

from __future__ import annotations

import logging
import uuid
from contextlib import nullcontext
from typing import Any

from django.db import connections, transaction

from . import payloads, signals
from .activation import Activation, ActivationCache, Claim, activate
from .conf import get_settings
from .db.dialect import Dialect
from .db.rows import LeaseRow, MessageRow
from .db.transactions import short_transaction
from .db.vendors import dialect_for
from .errors import StateMigrationError, UnknownActorType
from .pause_points import pause_point

logger = logging.getLogger("solid_objects")


def acquire(
    alias: str,
    owner_id: str,
    instance_ids: list[int],
    cache: ActivationCache | None = None,
) -> Activation | None:
    """Lease one of ``instance_ids`` and claim its first turn, then build the actor."""
    connection = connections[alias]
    dialect = dialect_for(connection)
    if dialect.single_statement_commit and not connection.in_atomic_block:
        return _acquire_in_one_statement(alias, dialect, owner_id, instance_ids, cache)
    with short_transaction(alias), connection.cursor() as cursor:
        claim = lease_and_claim(cursor, alias, owner_id, instance_ids, cache)
    return None if claim is None else activate(alias, claim, cache)


def lease_and_claim(
    cursor: Any,
    alias: str,
    owner_id: str,
    instance_ids: list[int],
    cache: ActivationCache | None = None,
    *,
    locked: bool = False,
) -> Claim | None:
    """Inside the caller's transaction: lease one of ``instance_ids`` (skipping locked or
    leased ones), recover a claim a dead activation left, and claim the first turn (its
    attempt is counted when this transaction commits, before the handler runs).
    ``locked``: the transaction already locks the candidates' rows (an enqueue to them),
    so nothing is skipped and the lease needs no locking read first."""
    dialect = dialect_for(connections[alias])
    lease = dialect.acquire_lease(
        cursor,
        instance_ids,
        owner_id=owner_id,
        token=str(uuid.uuid4()),
        lease_seconds=get_settings().LEASE_DURATION,
        cached=cache.revisions_of(instance_ids) if cache is not None else None,
        wait=locked,
    )
    if lease is None:
        return None
    pause_point("acquire.after_lease")
    if lease.has_stale_claim:
        pause_point("acquire.before_recovery")
        recover_stale_claim(cursor, dialect, lease)
    ahead = None
    if dialect.claim_moves_in_place:
        # The head is read with the first group's read-ahead.
        read, ahead = dialect.claim_and_read_ahead(
            cursor, lease, get_settings().MAX_TURNS_PER_COMMIT - 1
        )
        first = claim_runnable(cursor, dialect, lease, read) if read is not None else None
        if first is not read:
            ahead = None  # it went to its dead letter; another one was claimed
    else:
        first = claim_runnable(cursor, dialect, lease)
    if lease.has_stale_claim:
        pause_point("acquire.recovered")
    if first is None:
        dialect.release(cursor, lease)
        return None
    return Claim(lease, first, ahead)


def _acquire_in_one_statement(
    alias: str,
    dialect: Dialect,
    owner_id: str,
    instance_ids: list[int],
    cache: ActivationCache | None,
) -> Activation | None:
    """PostgreSQL: lease and first claim in one autocommit statement; the rare cases (a
    claim left by a dead activation, a message out of attempts, nothing due) finish in a
    short transaction."""
    with connections[alias].cursor() as cursor:
        got = dialect.acquire_and_claim(
            cursor,
            instance_ids,
            owner_id=owner_id,
            token=str(uuid.uuid4()),
            lease_seconds=get_settings().LEASE_DURATION,
            cached=cache.revisions_of(instance_ids) if cache is not None else None,
        )
    return _activate_first(alias, dialect, got, cache)


def take_up(
    alias: str,
    owner_id: str,
    token: str,
    instance_id: int,
    cache: ActivationCache | None = None,
) -> Activation | None:
    """A lease a sync caller's enqueue took (``Dialect.lease_on_enqueue``): claim its first
    turn in one autocommit statement, then build the actor. ``None``: the lease is not ours
    (any more), or nothing is due."""
    dialect = dialect_for(connections[alias])
    with connections[alias].cursor() as cursor:
        got = dialect.claim_held(
            cursor,
            instance_id,
            owner_id=owner_id,
            token=token,
            cached=cache.revisions_of([instance_id]) if cache is not None else None,
        )
    return _activate_first(alias, dialect, got, cache)


def take_up_claimed(
    alias: str, claimed: tuple[LeaseRow, MessageRow], cache: ActivationCache | None = None
) -> Activation | None:
    """A lease and first claim a sync caller's enqueue took together
    (``Enqueued.claimed``): build the actor (nothing else is due before the message)."""
    lease, first = claimed
    return _activate_first(alias, dialect_for(connections[alias]), (lease, first, False), cache)


def _activate_first(
    alias: str,
    dialect: Dialect,
    got: tuple[LeaseRow, MessageRow | None, bool] | None,
    cache: ActivationCache | None,
) -> Activation | None:
    """After a one-statement lease or first claim: finish the rare cases in a short
    transaction (a claim left by a dead activation, a message out of attempts), release a
    lease with nothing due, and build the actor."""
    if got is None:
        return None
    lease, first, more_due = got
    pause_point("acquire.after_lease")
    if lease.has_stale_claim or (first is not None and first.attempt_count > first.max_attempts):
        if lease.has_stale_claim:
            pause_point("acquire.before_recovery")
        with connections[alias].cursor() as cursor:
            first = _finish_claim(cursor, alias, dialect, lease, first)
        more_due = True
    elif first is None:
        with connections[alias].cursor() as cursor:
            dialect.release(cursor, lease)
    if first is None:
        return None
    activation = activate(alias, Claim(lease, first), cache)
    activation.more_due, activation.more_due_known = more_due, True
    return activation


def acquire_batch(
    alias: str,
    owner_id: str,
    instance_ids: list[int],
    limit: int,
    cache: ActivationCache | None = None,
    apart: list[str] | None = None,
) -> list[Activation]:
    """Lease up to ``limit`` of ``instance_ids`` (none of the actor types ``apart``) under
    one token and claim each one's first turn together (one statement on PostgreSQL, one
    transaction elsewhere), then build the actors. The rare leases that need more (a claim
    left by a dead activation, a message out of attempts, a head no longer due) are
    finished one by one afterwards, each in a short transaction of its own, as
    :func:`acquire` does on PostgreSQL."""
    connection = connections[alias]
    dialect = dialect_for(connection)
    options: dict[str, Any] = {
        "limit": limit,
        "owner_id": owner_id,
        "token": str(uuid.uuid4()),
        "lease_seconds": get_settings().LEASE_DURATION,
        "cached": cache.revisions_of(instance_ids) if cache is not None else None,
        "apart": apart or (),
    }
    # PostgreSQL: one autocommit statement; elsewhere one transaction.
    single = dialect.single_statement_commit and not connection.in_atomic_block
    with (
        nullcontext() if single else short_transaction(alias),
        connection.cursor() as cursor,
    ):
        taken = dialect.claim_batch(cursor, instance_ids, **options)
        pause_point("batch.after_claim")
    claims: list[Claim] = []
    with connection.cursor() as cursor:
        for lease, first in taken:
            if _unfinished(lease, first):
                first = _finish_claim(cursor, alias, dialect, lease, first)
            if first is not None:
                claims.append(Claim(lease, first))
    activations = []
    for claim in claims:
        try:
            activations.append(activate(alias, claim, cache))
        except (StateMigrationError, UnknownActorType):
            continue  # refused and released (logged by ``activate``)
        activations[-1].more_due = False  # it runs one turn, alone in its group
    return activations


def _unfinished(lease: LeaseRow, first: MessageRow | None) -> bool:
    """The batch claim left this lease to be finished on its own."""
    return lease.has_stale_claim or first is None or first.attempt_count > first.max_attempts


def _finish_claim(
    cursor: Any, alias: str, dialect: Dialect, lease: LeaseRow, first: MessageRow | None
) -> MessageRow | None:
    """The lease committed on its own with a stale claim or an exhausted message: recover
    and claim in a short transaction (``None``: nothing to run, or the lease was lost)."""
    with transaction.atomic(using=alias):
        # Take the instance row lock (cleanup and the fenced commit hold it too) and check
        # the lease is still ours before touching its claimed and ready rows, so every read
        # below sees what they committed.
        if not dialect.hold_lease(cursor, lease):
            logger.info("lease of %s/%s lost before its recovery", lease.actor_type, lease.actor_id)
            return None
        if lease.has_stale_claim:
            # A claim under this lease's own token is not stale: the enqueue that took the
            # lease claimed the message too, and its reply was lost. Its attempt is counted
            # once, by that claim: it is this activation's first turn.
            own = dialect.own_claim(cursor, lease.instance_id, lease.token)
            if own is not None:
                return own
            recover_stale_claim(cursor, dialect, lease)
        first = claim_runnable(cursor, dialect, lease, first)
        if lease.has_stale_claim:
            pause_point("acquire.recovered")
        if first is None:
            dialect.release(cursor, lease)
    return first


def claim_runnable(
    cursor: Any, dialect: Dialect, lease: LeaseRow, claimed: MessageRow | None = None
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
        attempts = message.attempt_count - 1  # the claim just counted one more
        dialect.set_attempts(cursor, message.id, attempts)
        _dead_letter_lost(cursor, dialect, lease, message.id, attempts)


def recover_stale_claim(cursor: Any, dialect: Dialect, lease: LeaseRow) -> None:
    """Under the instance row lock: put back (or dead-letter) the claim a previous
    activation left. Cleanup may have requeued it already; then there is none."""
    stale = dialect.stale_claim(cursor, lease.instance_id)
    if stale is None:
        return
    message_id, attempts, max_attempts = stale
    if attempts >= max_attempts:
        _dead_letter_lost(cursor, dialect, lease, message_id, attempts)
        return
    dialect.unclaim_to_ready(cursor, lease.instance_id, message_id)
    signals.send(
        signals.message_retried,
        actor_type=lease.actor_type,
        actor_id=lease.actor_id,
        message_id=message_id,
        attempt=attempts,
        reason="stale claim recovered",
    )


def _dead_letter_lost(
    cursor: Any, dialect: Dialect, lease: LeaseRow, message_id: int, attempts: int
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
        exception_class=str(error["class"]),
        exception_message=str(error["message"]),
        backtrace="[]",
    )
    signals.send(
        signals.message_dead_lettered,
        actor_type=lease.actor_type,
        actor_id=lease.actor_id,
        message_id=message_id,
        attempt=attempts,
    )
