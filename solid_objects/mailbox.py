"""Enqueue: validate, then append one message to an actor's mailbox.

Everything is checked before any SQL runs (operation, JSON, sizes, identifiers). The write
is one short transaction, or a savepoint inside the caller's ``transaction.atomic()`` so the
message commits or rolls back with the caller's own writes (a transactional outbox):

1. an idempotency key is looked up first (a retried request costs one read);
2. the instance row is created or locked and its next sequence taken, in one statement
   where the database allows (``INSERT … ON CONFLICT DO UPDATE … RETURNING``);
3. the history row and its ready membership are inserted.

On PostgreSQL steps 2 and 3 and the mailbox limit are one statement, run on its own in
autocommit when the caller has no transaction open (it is its own commit).
:func:`enqueue_many` appends a whole batch with multi-row statements (one on PostgreSQL):
the keys are looked up together, each actor takes all its sequences at once.
"""

from __future__ import annotations

import functools
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from django.db import IntegrityError, OperationalError, connections, transaction

from . import payloads, signals
from .conf import get_settings
from .db.dialect import Dialect
from .db.rows import Appended, LeaseRow, MailboxFullAt, MessageRow, NewMessage
from .db.transactions import short_transaction
from .db.vendors import dialect_for
from .errors import (
    ActorCallCycle,
    IdempotencyConflict,
    InvalidArguments,
    InvalidPayload,
    MailboxFull,
    SyncTimeout,
    UnknownOperation,
)
from .limits import IDENTIFIER_LENGTH
from .runtime.wakeup import notify_local
from .shards import database_for, require_joinable
from .spec import ActorSpec, Operation
from .write_guard import inside_turn

DELIVERY_MODES = ("async", "sync", "internal")


@dataclass(frozen=True, slots=True)
class Enqueued:
    """A message in a mailbox, as :func:`enqueue` wrote or found it (a plain value the
    references wrap into a :class:`~solid_objects.references.MessageReference`)."""

    message_id: int
    request_id: str
    sequence: int
    instance_id: int
    created: bool
    actor_type: str
    actor_id: str
    using: str  # the database alias
    #: With :class:`LeaseRequest`: whether the enqueue took the actor's lease (``None``:
    #: not known, the message was found written by an earlier run of the same enqueue).
    leased: bool | None = False
    #: The generation of the lease it took (0 when it took none, or it is not known).
    lease_generation: int = 0
    #: The lease and the message the same statement claimed as the actor's next turn
    #: (``Dialect.append_and_lease``), when it could.
    claimed: tuple[LeaseRow, MessageRow] | None = None


@dataclass(frozen=True, slots=True)
class LeaseRequest:
    """A sync caller's enqueue also takes the actor's lease when it is free, in the same
    statement (where the database can: ``Dialect.lease_on_enqueue``)."""

    owner_id: str
    token: str
    seconds: float
    #: ``(instance id, state revision)`` the caller keeps warm for the actor, if any.
    cached: tuple[int, int] | None = None


def validate_identifier(value: Any, what: str) -> str:
    """An actor id, idempotency key or name: a non-empty string of at most
    ``IDENTIFIER_LENGTH`` characters that every database stores as given (no NUL, no lone
    surrogate); :class:`InvalidPayload` otherwise."""
    if not isinstance(value, str) or not value:
        raise InvalidPayload(f"{what} must be a non-empty string, got {payloads.short_repr(value)}")
    if len(value) > IDENTIFIER_LENGTH:
        raise InvalidPayload(f"{what} is longer than {IDENTIFIER_LENGTH} characters")
    problem = payloads.problem_with_text(value)
    if problem is not None:
        raise InvalidPayload(f"{what} {problem}: {payloads.short_repr(value)}")
    return value


def validate_available_at(value: Any, what: str = "available_at") -> datetime | None:
    """``None`` or a timezone-aware datetime that converts to UTC (every database stores
    it in UTC); :class:`InvalidPayload` otherwise."""
    if value is None:
        return None
    try:
        aware = isinstance(value, datetime) and value.utcoffset() is not None
        if aware:
            value.astimezone(UTC)
    except (OverflowError, ValueError, TypeError, ArithmeticError):
        raise InvalidPayload(f"{what} is out of range once converted to UTC") from None
    if not aware or not isinstance(value, datetime):  # (the second test narrows the type)
        raise InvalidPayload(
            f"{what} must be a timezone-aware datetime, got {payloads.short_repr(value)}"
        )
    return value


def bind(operation: Operation, args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
    """The call's arguments as the stored keyword dict; :class:`InvalidArguments` (also a
    ``TypeError``) when they do not match the operation's signature."""
    try:
        return operation.bind(args, kwargs)
    except TypeError as exc:
        raise InvalidArguments(str(exc)) from None


def prepare(
    spec: ActorSpec,
    actor_id: Any,
    operation: Any,
    arguments: Any,
    *,
    delivery_mode: str,
    idempotency_key: Any,
    available_at: Any,
    dialect: Dialect,
    settings: Any,
) -> str:
    """Check everything a message needs before any SQL runs (so bad input writes nothing,
    not even this process's registration); return the arguments as stored JSON."""
    validate_identifier(actor_id, "actor_id")
    if not isinstance(operation, str):
        raise UnknownOperation(
            f"{spec.actor_type!r} has no operation {payloads.short_repr(operation)}"
        )
    spec.operation(operation)
    if idempotency_key is not None:
        validate_identifier(idempotency_key, "idempotency_key")
    validate_available_at(available_at)
    if delivery_mode not in DELIVERY_MODES:
        raise InvalidPayload(f"delivery_mode must be one of {DELIVERY_MODES}")
    if not isinstance(arguments, dict):
        raise InvalidPayload("arguments must be a dict of keyword arguments")
    return payloads.encode(
        arguments,
        what="arguments",
        limit=settings.MAX_PAYLOAD_BYTES,
        max_depth=dialect.json_max_depth,
    )


def enqueue(
    spec: ActorSpec,
    actor_id: str,
    operation: str,
    arguments: dict[str, Any],
    *,
    delivery_mode: str = "async",
    idempotency_key: str | None = None,
    available_at: datetime | None = None,
    using: str | None = None,
    lock_wait: float | None = None,
    then: Callable[[Any, Enqueued], Any] | None = None,
    prepared: str | None = None,
    committing: Callable[[], Any] | None = None,
    request_id: str | None = None,
    leasing: LeaseRequest | None = None,
) -> Enqueued:
    """Append a message; return where it is (the existing message for a key already used
    with the same operation and arguments).

    ``then(cursor, enqueued)`` runs inside the same transaction after the insert: a sync
    caller claims the actor there, saving a commit. ``prepared`` is the arguments JSON
    :func:`prepare` returned for exactly these arguments (a sync caller validates before it
    registers itself), so they are not checked and encoded twice. ``committing()`` is
    called just before the commit may be sent (at the end of the transaction, or before
    the one autocommit statement that is the whole write).

    ``request_id``: the new message's request id, chosen by a caller that runs the same
    enqueue again when its connection was lost. Written once, it makes the enqueue
    idempotent: run again after its commit, the unique request id finds the message
    written (so an autocommit write needs no ``committing()``).

    ``leasing`` (where ``dialect.lease_on_enqueue``, outside a transaction): the one
    autocommit statement of the enqueue also takes the actor's lease if it is free
    (``Enqueued.leased``); ``lock_wait`` then bounds its wait for the instance row inside it.
    """
    settings = get_settings()
    alias = using or database_for(spec.actor_type, actor_id)
    if inside_turn() and delivery_mode != "internal":
        raise ActorCallCycle(
            "actor code cannot call or enqueue to actors directly; use self.send_to(ref).op()"
        )
    require_joinable(alias, spec.actor_type, actor_id)
    connection = connections[alias]
    dialect = dialect_for(connection)
    if prepared is None:
        prepared = prepare(
            spec,
            actor_id,
            operation,
            arguments,
            delivery_mode=delivery_mode,
            idempotency_key=idempotency_key,
            available_at=available_at,
            dialect=dialect,
            settings=settings,
        )
    arguments_json = prepared
    outer = connection.in_atomic_block
    for attempt in range(5):
        try:
            enqueued = _write(
                connection,
                dialect,
                spec,
                actor_id,
                operation,
                arguments_json,
                delivery_mode,
                idempotency_key,
                available_at,
                settings,
                lock_wait,
                then,
                committing=committing,
                request_id=request_id,
                leasing=leasing,
            )
            break
        except IntegrityError:
            if idempotency_key is None:
                if request_id is None:
                    raise
                # Written by an earlier run of this enqueue whose reply was lost?
                with connection.cursor() as cursor:
                    found = dialect.find_message_by_request_id(cursor, request_id)
                if found is None:
                    raise
                message_id, sequence, instance_id = found
                enqueued = Enqueued(
                    message_id,
                    request_id,
                    sequence,
                    instance_id,
                    True,
                    spec.actor_type,
                    actor_id,
                    alias,
                    None if leasing else False,  # the lease too, maybe
                )
                break
            # A concurrent enqueue with the same key won: return its message.
            with connection.cursor() as cursor:
                existing = dialect.find_message_by_key(
                    cursor, spec.actor_type, actor_id, idempotency_key
                )
            if existing is None:
                raise
            enqueued = _same_or_conflict(
                existing,
                operation,
                arguments_json,
                delivery_mode,
                idempotency_key,
                spec,
                actor_id,
                alias,
            )
            break
        except OperationalError as exc:
            if lock_wait is not None and _is_timeout(exc):
                raise SyncTimeout(
                    f"{spec.actor_type}/{actor_id}: the instance row stayed locked longer "
                    f"than the deadline; nothing was enqueued",
                    message_reference=None,
                    actor_type=spec.actor_type,
                    actor_id=actor_id,
                    status="not enqueued",
                    waiting_on="instance lock",
                ) from exc
            if outer or not _is_deadlock(exc) or attempt == 4:
                raise
            time.sleep(0.005 * (attempt + 1))
    if enqueued.created:
        transaction.on_commit(lambda: _enqueued(spec, actor_id, enqueued), using=alias)
    return enqueued


def _write(
    connection: Any,
    dialect: Dialect,
    spec: ActorSpec,
    actor_id: str,
    operation: str,
    arguments_json: str,
    delivery_mode: str,
    idempotency_key: str | None,
    available_at: datetime | None,
    settings: Any,
    lock_wait: float | None,
    then: Callable[[Any, Enqueued], Any] | None = None,
    savepoint: bool = True,
    committing: Callable[[], Any] | None = None,
    request_id: str | None = None,
    leasing: LeaseRequest | None = None,
) -> Enqueued:
    leasing = leasing if dialect.lease_on_enqueue else None
    write = functools.partial(
        _write_rows,
        dialect=dialect,
        spec=spec,
        actor_id=actor_id,
        operation=operation,
        arguments_json=arguments_json,
        delivery_mode=delivery_mode,
        idempotency_key=idempotency_key,
        available_at=available_at,
        cap=settings.MAX_MAILBOX_LENGTH,
        alias=connection.alias,
        request_id=request_id,
    )
    if (
        leasing is not None
        and then is None
        and not connection.in_atomic_block
        and connection.get_autocommit()
    ):
        # One autocommit statement appends, takes the lease if it is free and bounds its
        # own lock wait.
        with connection.cursor() as cursor:
            return write(
                cursor,
                before_commit=None if request_id else committing,
                leasing=leasing,
                lock_wait=lock_wait,
            )
    if lock_wait is not None and dialect.lock_wait_before_begin:
        # SQLite's BEGIN IMMEDIATE itself waits for the write lock: bound it before.
        with connection.cursor() as cursor:
            token = dialect.bound_lock_wait(cursor, lock_wait)
        try:
            return _write(
                connection,
                dialect,
                spec,
                actor_id,
                operation,
                arguments_json,
                delivery_mode,
                idempotency_key,
                available_at,
                settings,
                None,
                then,
                committing=committing,
                request_id=request_id,
            )
        finally:
            with connection.cursor() as cursor:
                dialect.unbound(cursor, token)
    if (
        dialect.append_in_one_statement
        and lock_wait is None
        and then is None
        and not connection.in_atomic_block
        and connection.get_autocommit()
    ):
        # One statement is the whole write and its own commit: no transaction around it.
        # With the caller's request id running it again is safe, so the commit it sends
        # is not one that may not be retried.
        with connection.cursor() as cursor:
            return write(cursor, before_commit=None if request_id else committing)
    with (
        short_transaction(connection.alias, savepoint=savepoint),
        connection.cursor() as cursor,
    ):
        token = None
        if lock_wait is not None:
            token = dialect.bound_lock_wait(cursor, lock_wait)
        try:
            enqueued = write(cursor)
            if then is not None and enqueued.created:
                then(cursor, enqueued)
            if committing is not None and enqueued.created:
                committing()
        finally:
            if token is not None:
                dialect.unbound(cursor, token)
    return enqueued


def _write_rows(
    cursor: Any,
    *,
    dialect: Dialect,
    spec: ActorSpec,
    actor_id: str,
    operation: str,
    arguments_json: str,
    delivery_mode: str,
    idempotency_key: str | None,
    available_at: datetime | None,
    cap: int,
    alias: str,
    request_id: str | None = None,
    before_commit: Callable[[], Any] | None = None,
    leasing: LeaseRequest | None = None,
    lock_wait: float | None = None,
) -> Enqueued:
    """The statements of one enqueue; ``before_commit``: called before the statement that
    commits by itself (autocommit). ``leasing``: that statement also takes the lease if it
    is free, waiting at most ``lock_wait`` seconds for the instance row."""
    if idempotency_key is not None:
        existing = dialect.find_message_by_key(cursor, spec.actor_type, actor_id, idempotency_key)
        if existing is not None:
            return _same_or_conflict(
                existing,
                operation,
                arguments_json,
                delivery_mode,
                idempotency_key,
                spec,
                actor_id,
                alias,
            )
    request_id = request_id or str(uuid.uuid4())
    if dialect.append_in_one_statement and cap < 1:
        raise _full(spec.actor_type, actor_id, cap)  # (the statement checks a mailbox only)
    message = NewMessage(
        spec.actor_type,
        actor_id,
        spec.cls.state_version,
        operation,
        delivery_mode,
        arguments_json,
        spec.max_attempts(operation),
        request_id,
        idempotency_key,
        available_at,
    )
    if before_commit is not None:
        before_commit()
    if leasing is not None:
        leased = dialect.append_and_lease(
            cursor,
            message,
            cap,
            lock_wait=lock_wait,
            owner_id=leasing.owner_id,
            token=leasing.token,
            lease_seconds=leasing.seconds,
            cached=leasing.cached,
        )
        if isinstance(leased, MailboxFullAt):
            raise _full(spec.actor_type, actor_id, cap)
        message_id, instance_id, sequence = leased.message_id, leased.instance_id, leased.sequence
        generation, claimed = leased.generation, leased.claimed
    else:
        appended = dialect.append_message(cursor, message, cap)
        if isinstance(appended, MailboxFullAt):
            raise _full(spec.actor_type, actor_id, cap)
        ((message_id, instance_id, sequence),), generation = appended, None
        claimed = None
    return Enqueued(
        message_id,
        request_id,
        sequence,
        instance_id,
        True,
        spec.actor_type,
        actor_id,
        alias,
        generation is not None,
        generation or 0,
        claimed,
    )


def _full(actor_type: str, actor_id: str, cap: int) -> MailboxFull:
    return MailboxFull(f"{actor_type}/{actor_id} already has {cap} pending messages")


def _appended(appended: Appended, cap: int) -> list[tuple[int, int, int]]:
    """What :meth:`Dialect.append_messages` appended; :class:`MailboxFull` if it refused."""
    if isinstance(appended, MailboxFullAt):
        raise MailboxFull(
            f"{appended.actor_type}/{appended.actor_id} has no room for these messages: "
            f"at most {cap} may be pending"
        )
    return appended


@dataclass(frozen=True, slots=True)
class BatchItem:
    """One message of :func:`enqueue_many`: its actor, operation and bound arguments."""

    spec: ActorSpec
    actor_id: str
    operation: str
    arguments: dict[str, Any]
    idempotency_key: str | None = None
    available_at: datetime | None = None


def prepare_many(items: list[BatchItem], dialect: Dialect) -> list[str]:
    """Validate and encode every item of a batch (the typed error of the first bad one);
    :func:`enqueue_many` takes the result as ``encoded=`` so nothing is checked twice."""
    settings = get_settings()
    return [
        prepare(
            item.spec,
            item.actor_id,
            item.operation,
            item.arguments,
            delivery_mode="async",
            idempotency_key=item.idempotency_key,
            available_at=item.available_at,
            dialect=dialect,
            settings=settings,
        )
        for item in items
    ]


def enqueue_many(
    items: list[BatchItem],
    *,
    using: str | None = None,
    then: Callable[[Any, Enqueued], Any] | None = None,
    encoded: list[str] | None = None,
) -> list[Enqueued]:
    """Append many asynchronous messages in one transaction (one commit for the batch, no
    savepoint per message); return them in order (the existing message for a key already
    used with the same operation and arguments, as :func:`enqueue` does).

    Every item is validated and encoded before any SQL runs: one bad item raises its typed
    error and writes nothing. Inside the caller's ``transaction.atomic()`` the batch commits
    or rolls back with the caller's writes. A key raced by a concurrent enqueue makes the
    batch run again from the start (its keys then find the winner's messages).

    The statements are per batch, not per message: one lookup of all the keys, then per
    chunk of at most ``dialect.append_batch`` messages (and :data:`BATCH_BYTES` of
    arguments) one statement on PostgreSQL, a few multi-row ones elsewhere."""
    settings = get_settings()
    alias = using or (
        database_for(items[0].spec.actor_type, items[0].actor_id) if items else settings.DATABASE
    )
    if inside_turn():
        raise ActorCallCycle(
            "actor code cannot call or enqueue to actors directly; use self.send_to(ref).op()"
        )
    for item in items[:1]:
        require_joinable(alias, item.spec.actor_type, item.actor_id)
    connection = connections[alias]
    dialect = dialect_for(connection)
    if encoded is None:
        encoded = prepare_many(items, dialect)
    keys = [(i.spec.actor_type, i.actor_id, i.idempotency_key) for i in items if i.idempotency_key]
    if len(set(keys)) != len(keys):
        raise InvalidPayload("enqueue_many() got one idempotency key twice for the same actor")
    if not items:
        return []
    outer = connection.in_atomic_block
    for attempt in range(5):
        try:
            with short_transaction(alias, savepoint=outer), connection.cursor() as cursor:
                written = _append_batch(cursor, dialect, items, encoded, settings, alias)
                if then is not None:
                    then(None, written[-1])
            break
        except IntegrityError:
            if not keys or attempt == 4:
                raise
        except OperationalError as exc:
            if outer or not _is_deadlock(exc) or attempt == 4:
                raise
            time.sleep(0.005 * (attempt + 1))
    created = [enqueued for enqueued in written if enqueued.created]
    if created:
        transaction.on_commit(functools.partial(_enqueued_many, created), using=alias)
    return written


#: The most argument bytes one chunk of :func:`enqueue_many` sends in a statement (well
#: below MySQL's and MariaDB's default ``max_allowed_packet``).
BATCH_BYTES = 4 * 1024 * 1024


def _append_batch(
    cursor: Any,
    dialect: Dialect,
    items: list[BatchItem],
    encoded: list[str],
    settings: Any,
    alias: str,
) -> list[Enqueued]:
    """The writes of :func:`enqueue_many`, in the batch's transaction."""
    keys = [
        (item.spec.actor_type, item.actor_id, item.idempotency_key)
        for item in items
        if item.idempotency_key is not None
    ]
    existing = dialect.find_messages_by_keys(cursor, keys) if keys else {}
    written: list[Enqueued | None] = [None] * len(items)
    fresh: list[tuple[int, NewMessage]] = []
    counts: dict[tuple[str, str], int] = {}
    for index, (item, arguments_json) in enumerate(zip(items, encoded, strict=True)):
        actor_type = item.spec.actor_type
        if item.idempotency_key is not None:
            found = existing.get((actor_type, item.actor_id, item.idempotency_key))
            if found is not None:
                written[index] = _same_or_conflict(
                    found,
                    item.operation,
                    arguments_json,
                    "async",
                    item.idempotency_key,
                    item.spec,
                    item.actor_id,
                    alias,
                )
                continue
        counts[(actor_type, item.actor_id)] = counts.get((actor_type, item.actor_id), 0) + 1
        fresh.append(
            (
                index,
                NewMessage(
                    actor_type,
                    item.actor_id,
                    item.spec.cls.state_version,
                    item.operation,
                    "async",
                    arguments_json,
                    item.spec.max_attempts(item.operation),
                    str(uuid.uuid4()),
                    item.idempotency_key,
                    item.available_at,
                ),
            )
        )
    cap = settings.MAX_MAILBOX_LENGTH
    for (actor_type, actor_id), count in counts.items():
        if count > cap:  # more than an empty mailbox holds: refused before any write
            raise MailboxFull(
                f"{actor_type}/{actor_id}: {count} messages in one batch, "
                f"at most {cap} may be pending"
            )
    for chunk in _chunks(fresh, dialect.append_batch):
        appended = _appended(dialect.append_messages(cursor, [m for _, m in chunk], cap), cap)
        for (index, message), (message_id, instance_id, sequence) in zip(
            chunk, appended, strict=True
        ):
            written[index] = Enqueued(
                message_id,
                message.request_id,
                sequence,
                instance_id,
                True,
                message.actor_type,
                message.actor_id,
                alias,
            )
    return [enqueued for enqueued in written if enqueued is not None]


def _chunks(
    messages: list[tuple[int, NewMessage]], most: int
) -> list[list[tuple[int, NewMessage]]]:
    """``messages`` in runs of at most ``most`` messages and :data:`BATCH_BYTES` of
    arguments (a bigger message has a run of its own)."""
    chunks: list[list[tuple[int, NewMessage]]] = []
    size = 0
    for entry in messages:
        length = len(entry[1].arguments)
        if not chunks or len(chunks[-1]) >= most or size + length > BATCH_BYTES:
            chunks.append([])
            size = 0
        chunks[-1].append(entry)
        size += length
    return chunks


def _same_or_conflict(
    existing: tuple[Any, ...],
    operation: str,
    arguments_json: str,
    delivery_mode: str,
    idempotency_key: str,
    spec: ActorSpec,
    actor_id: str,
    alias: str,
) -> Enqueued:
    message_id, request_id, sequence, stored_operation, stored_arguments, stored_mode = existing[:6]
    differing = []
    if stored_operation != operation:
        differing.append("operation")
    # Compared decoded and type for type: jsonb rewrites key order and number formatting.
    if not payloads.same_json(stored_arguments, arguments_json):
        differing.append("arguments")
    if stored_mode != delivery_mode:
        differing.append("delivery_mode")
    if differing:
        raise IdempotencyConflict(
            f"idempotency key {idempotency_key!r} was already used with a different "
            f"{', '.join(differing)}",
            fields=differing,
        )
    instance_id = existing[6] if len(existing) > 6 else 0
    return Enqueued(
        int(message_id),
        request_id,
        int(sequence),
        int(instance_id),
        False,
        spec.actor_type,
        actor_id,
        alias,
    )


def _enqueued(spec: ActorSpec, actor_id: str, enqueued: Enqueued) -> None:
    notify_local("work")
    from .runtime.wakeup.hints import publish_work

    publish_work()
    signals.send(
        signals.message_enqueued,
        actor_type=spec.actor_type,
        actor_id=actor_id,
        message_id=enqueued.message_id,
        sequence=enqueued.sequence,
    )


def _enqueued_many(batch: list[Enqueued]) -> None:
    """:func:`_enqueued` for a batch: the workers are woken once, a signal per message."""
    notify_local("work")
    from .runtime.wakeup.hints import publish_work

    publish_work()
    for enqueued in batch:
        signals.send(
            signals.message_enqueued,
            actor_type=enqueued.actor_type,
            actor_id=enqueued.actor_id,
            message_id=enqueued.message_id,
            sequence=enqueued.sequence,
        )


def _is_deadlock(exc: BaseException) -> bool:
    code = getattr(exc, "args", [None])[0]
    text = str(exc).lower()
    return code in (1213, 1205) or "deadlock" in text or "database is locked" in text


def _is_timeout(exc: BaseException) -> bool:
    code = getattr(exc, "args", [None])[0]
    text = str(exc).lower()
    return (
        code in (1205, 1969, 3024)
        or "lock timeout" in text
        or "statement timeout" in text
        or "canceling statement" in text
        or "database is locked" in text
    )
