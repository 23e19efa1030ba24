"""References: cheap handles to actors and to messages. No database access until used.

The top of the core: the user's :class:`~solid_objects.actor.Actor` and the package's public
names build on these; below them the mailbox returns plain :class:`~solid_objects.mailbox.Enqueued`
values that :func:`message_reference` wraps, and the sync path waits on any
:class:`~solid_objects.messages.MessageHandle`.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Generic, TypeVar

from asgiref.sync import sync_to_async
from django.db import connections, transaction

from . import aio, payloads
from .db.connections import Attempt, recovering
from .db.dialect import as_datetime
from .db.vendors import dialect_for
from .errors import InvalidPayload, MessageFailed, Rejected, SyncTimeout
from .mailbox import (
    BatchItem,
    Enqueued,
    bind,
    enqueue,
    prepare_many,
    validate_available_at,
    validate_identifier,
)
from .mailbox import enqueue_many as _enqueue_many
from .messages import MessageOutcome
from .registry import get_spec
from .shards import database_for, require_joinable
from .spec import ActorAddress, ActorSpec
from .sync import call_sync, sync_timeout, wait_for

__all__ = [
    "ActorReference",
    "AsyncReference",
    "MessageOutcome",
    "MessageReference",
    "Snapshot",
    "message_reference",
    "ref",
]


#: The actor class a reference addresses (what the mypy plugin checks calls against).
A = TypeVar("A")
#: The result type of a message.
R = TypeVar("R")


def ref(actor_type: str, actor_id: str) -> ActorReference[Any]:
    """``solid_objects.ref("shop.cart", "alice")``: resolves the type through the registry."""
    return ActorReference(get_spec(actor_type), actor_id)


class ActorReference(ActorAddress, Generic[A]):
    """``Cart.ref("alice")``: call operations synchronously, enqueue them, snapshot, destroy.
    ``ref.aio`` is the same reference for async code."""

    __slots__ = ("actor_id", "spec")

    def __init__(self, spec: ActorSpec, actor_id: str) -> None:
        self.spec = spec
        self.actor_id = validate_identifier(actor_id, "actor_id")

    @property
    def actor_type(self) -> str:
        return self.spec.actor_type

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        return self.sync().__getattr__(name)

    @property
    def aio(self) -> AsyncReference[A]:
        """The awaitable face of this reference (``await ref.aio.add_item(...)``)."""
        return AsyncReference(self)

    def sync(
        self, timeout: float | None = None, idempotency_key: str | None = None
    ) -> _SyncCalls[A]:
        """Options of one sync call (checked here, :class:`InvalidPayload` if bad):
        ``timeout`` positive seconds (``None``: ``SYNC_TIMEOUT``, ``math.inf``: no
        deadline), ``idempotency_key`` an identifier."""
        if timeout is not None:
            sync_timeout(timeout)
        if idempotency_key is not None:
            validate_identifier(idempotency_key, "idempotency_key")
        return _SyncCalls(self, timeout, idempotency_key)

    def enqueue(
        self, available_at: datetime | None = None, idempotency_key: str | None = None
    ) -> _EnqueueCalls[A]:
        """Options of one enqueue (checked here, :class:`InvalidPayload` if bad):
        ``available_at`` a timezone-aware datetime, ``idempotency_key`` an identifier."""
        validate_available_at(available_at)
        if idempotency_key is not None:
            validate_identifier(idempotency_key, "idempotency_key")
        return _EnqueueCalls(self, available_at, idempotency_key)

    def snapshot(self, using: str | None = None) -> Snapshot[A]:
        """The committed state (no message row; may race an in-flight turn)."""
        alias = using or database_for(self.actor_type, self.actor_id)
        connection = connections[alias]
        dialect = dialect_for(connection)

        def read(attempt: Attempt) -> Any:
            with connection.cursor() as cursor:
                return dialect.committed_state(cursor, self.actor_type, self.actor_id)

        row = recovering(alias, "snapshot()", read)
        if row is None:
            return Snapshot(
                self.spec,
                self.actor_id,
                exists=False,
                revision=0,
                state={},
                instance_id=None,
                state_version=self.spec.cls.state_version,
            )
        state = payloads.decode(row[1]) or {}
        state = self.spec.migrate(state, int(row[2]), self.actor_id)
        version = self.spec.cls.state_version
        return Snapshot(
            self.spec,
            self.actor_id,
            exists=True,
            revision=int(row[3]),
            state=state,
            instance_id=int(row[0]),
            state_version=version,
        )

    def destroy(self, using: str | None = None) -> bool:
        """Lock and delete the instance; the database cascades everything it owns."""
        alias = using or database_for(self.actor_type, self.actor_id)
        connection = connections[alias]
        dialect = dialect_for(connection)

        def delete(attempt: Attempt) -> bool:
            with transaction.atomic(using=alias), connection.cursor() as cursor:
                if not dialect.destroy_instance(cursor, self.actor_type, self.actor_id):
                    return False
                attempt.committing()  # a retry could destroy a newer incarnation
                return True

        return recovering(alias, "destroy()", delete)

    def find_message(
        self, idempotency_key: str, using: str | None = None
    ) -> MessageReference[Any] | None:
        validate_identifier(idempotency_key, "idempotency_key")
        alias = using or database_for(self.actor_type, self.actor_id)
        connection = connections[alias]

        def read(attempt: Attempt) -> Any:
            with connection.cursor() as cursor:
                return dialect_for(connection).find_message_by_key(
                    cursor, self.actor_type, self.actor_id, idempotency_key
                )

        row = recovering(alias, "find_message()", read)
        if row is None:
            return None
        return MessageReference(
            id=int(row[0]),
            request_id=row[1],
            sequence=int(row[2]),
            actor_type=self.actor_type,
            actor_id=self.actor_id,
            instance_id=int(row[6]),
            using=alias,
        )

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, ActorReference)
            and other.actor_type == self.actor_type
            and other.actor_id == self.actor_id
        )

    def __hash__(self) -> int:
        return hash((self.actor_type, self.actor_id))

    def __repr__(self) -> str:
        return f"<ActorReference {self.actor_type}/{self.actor_id}>"


class _SyncCalls(Generic[A]):
    __slots__ = ("_idempotency_key", "_ref", "_timeout")

    def __init__(
        self, reference: ActorReference[A], timeout: float | None, idempotency_key: str | None
    ) -> None:
        self._ref = reference
        self._timeout = timeout
        self._idempotency_key = idempotency_key

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        operation = self._ref.spec.operation(name)

        def call(*args: Any, **kwargs: Any) -> Any:
            return call_sync(
                self._ref,
                operation.name,
                bind(operation, args, kwargs),
                timeout=self._timeout,
                idempotency_key=self._idempotency_key,
                wrap=message_reference,
            )

        call.__name__ = name
        return call


class _EnqueueCalls(Generic[A]):
    __slots__ = ("_available_at", "_idempotency_key", "_ref")

    def __init__(
        self,
        reference: ActorReference[A],
        available_at: datetime | None,
        idempotency_key: str | None,
    ) -> None:
        self._ref = reference
        self._available_at = available_at
        self._idempotency_key = idempotency_key

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        operation = self._ref.spec.operation(name)

        def send(*args: Any, **kwargs: Any) -> MessageReference[Any]:
            arguments = bind(operation, args, kwargs)
            request_id = str(uuid.uuid4())  # the same if the write runs again

            def write(attempt: Attempt) -> Enqueued:
                return enqueue(
                    self._ref.spec,
                    self._ref.actor_id,
                    operation.name,
                    arguments,
                    delivery_mode="async",
                    idempotency_key=self._idempotency_key,
                    available_at=self._available_at,
                    committing=attempt.committing,
                    request_id=request_id,
                )

            return message_reference(
                recovering(
                    database_for(self._ref.actor_type, self._ref.actor_id),
                    "enqueue",
                    write,
                    idempotent=self._idempotency_key is not None,
                )
            )

        send.__name__ = name
        return send


def enqueue_many(
    messages: Iterable[tuple[Any, str, dict[str, Any]]], *, using: str | None = None
) -> list[MessageReference[Any]]:
    """Enqueue many asynchronous messages in one transaction (one per shard when the
    messages' actors live on several, see docs/scaling.md); return their references in
    order. Each message is ``(target, operation, kwargs)``: ``target`` a reference
    (``Cart.ref("alice")``) or its enqueue options (``Cart.ref("alice").enqueue(
    idempotency_key="k", available_at=when)``). Every message is checked first (the same
    typed errors as ``ref.enqueue().op(...)``); one bad message writes nothing."""
    items = []
    for message in messages:
        if not isinstance(message, tuple) or len(message) != 3:
            raise InvalidPayload(
                "enqueue_many() takes (reference, operation, kwargs) tuples, got "
                f"{payloads.short_repr(message)}"
            )
        target, operation_name, kwargs = message
        available_at = idempotency_key = None
        if isinstance(target, _EnqueueCalls):
            available_at = target._available_at
            idempotency_key = target._idempotency_key
            target = target._ref
        if not isinstance(target, ActorReference):
            raise InvalidPayload(
                f"enqueue_many(): {payloads.short_repr(target)} is not an actor reference"
            )
        if not isinstance(kwargs, dict):
            raise InvalidPayload("enqueue_many(): the arguments must be a dict of keywords")
        operation = target.spec.operation(operation_name)
        items.append(
            BatchItem(
                target.spec,
                target.actor_id,
                operation.name,
                bind(operation, (), kwargs),
                idempotency_key,
                available_at,
            )
        )
    # One transaction per shard (one in all without DATABASES), in order of first use.
    groups: dict[str, list[int]] = {}
    for index, item in enumerate(items):
        shard = using or database_for(item.spec.actor_type, item.actor_id)
        groups.setdefault(shard, []).append(index)
    if not groups:
        return []
    # Every message of every shard is checked before the first is written.
    encoded: dict[str, list[str]] = {}
    for shard, indexes in groups.items():
        first = items[indexes[0]]
        require_joinable(shard, first.spec.actor_type, first.actor_id)
        batch = [items[index] for index in indexes]
        encoded[shard] = prepare_many(batch, dialect_for(connections[shard]))
    written: list[Enqueued | None] = [None] * len(items)
    for shard, indexes in groups.items():
        batch = [items[index] for index in indexes]

        def write(attempt: Attempt, batch: list[BatchItem] = batch, shard: str = shard) -> Any:
            return _enqueue_many(
                batch, using=shard, then=attempt.committing, encoded=encoded[shard]
            )

        keyed = all(item.idempotency_key is not None for item in batch)
        for index, enqueued in zip(
            indexes, recovering(shard, "enqueue_many", write, idempotent=keyed), strict=True
        ):
            written[index] = enqueued
    return [message_reference(enqueued) for enqueued in written if enqueued is not None]


class AsyncReference(Generic[A]):
    """``ref.aio``: every call of :class:`ActorReference`, awaitable. Same semantics, errors
    and limits; the database work runs in a worker thread (``sync_to_async``), waiting for
    a result is an ``await`` (see :mod:`solid_objects.aio`)."""

    __slots__ = ("reference",)

    def __init__(self, reference: ActorReference[A]) -> None:
        self.reference = reference

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        return self.sync().__getattr__(name)

    def sync(
        self, timeout: float | None = None, idempotency_key: str | None = None
    ) -> _AsyncSyncCalls[A]:
        """Options of one awaited sync call, checked here as :meth:`ActorReference.sync`."""
        self.reference.sync(timeout, idempotency_key)
        return _AsyncSyncCalls(self.reference, timeout, idempotency_key)

    def enqueue(
        self, available_at: datetime | None = None, idempotency_key: str | None = None
    ) -> _AsyncEnqueueCalls[A]:
        """Options of one awaited enqueue, checked here as :meth:`ActorReference.enqueue`."""
        return _AsyncEnqueueCalls(self.reference.enqueue(available_at, idempotency_key))

    async def snapshot(self, using: str | None = None) -> Snapshot[A]:
        return await sync_to_async(self.reference.snapshot)(using)

    async def destroy(self, using: str | None = None) -> bool:
        return await sync_to_async(self.reference.destroy)(using)

    async def find_message(
        self, idempotency_key: str, using: str | None = None
    ) -> MessageReference[Any] | None:
        validate_identifier(idempotency_key, "idempotency_key")
        return await sync_to_async(self.reference.find_message)(idempotency_key, using)

    def __repr__(self) -> str:
        return f"<AsyncReference {self.reference.actor_type}/{self.reference.actor_id}>"


class _AsyncSyncCalls(Generic[A]):
    __slots__ = ("_idempotency_key", "_ref", "_timeout")

    def __init__(
        self, reference: ActorReference[A], timeout: float | None, idempotency_key: str | None
    ) -> None:
        self._ref = reference
        self._timeout = timeout
        self._idempotency_key = idempotency_key

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        operation = self._ref.spec.operation(name)

        async def call(*args: Any, **kwargs: Any) -> Any:
            return await aio.call(
                self._ref,
                operation.name,
                bind(operation, args, kwargs),
                timeout=self._timeout,
                idempotency_key=self._idempotency_key,
                wrap=message_reference,
            )

        call.__name__ = name
        return call


class _AsyncEnqueueCalls(Generic[A]):
    __slots__ = ("_calls",)

    def __init__(self, calls: _EnqueueCalls[A]) -> None:
        self._calls = calls

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        send = self._calls.__getattr__(name)

        async def asend(*args: Any, **kwargs: Any) -> MessageReference[Any]:
            reference: MessageReference[Any] = await sync_to_async(send)(*args, **kwargs)
            return reference

        asend.__name__ = name
        return asend


class Snapshot(Generic[A]):
    """Committed state read without a message; attributes fall back to their defaults."""

    def __init__(
        self,
        spec: ActorSpec,
        actor_id: str,
        *,
        exists: bool,
        revision: int,
        state: dict[str, Any],
        instance_id: int | None,
        state_version: int,
    ) -> None:
        self._spec = spec
        self.actor_id = actor_id
        self.exists = exists
        self.revision = revision
        self.state = state
        self.instance_id = instance_id
        self.state_version = state_version

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        if name in self.state:
            return self.state[name]
        attribute = self._spec.attributes.get(name)
        if attribute is None:
            raise AttributeError(f"{self._spec.actor_type} has no attribute {name!r}")
        return attribute.initial()

    def __repr__(self) -> str:
        return (
            f"<Snapshot {self._spec.actor_type}/{self.actor_id} exists={self.exists} "
            f"revision={self.revision}>"
        )


@dataclass(frozen=True)
class MessageReference(Generic[R]):
    """A durable message. Status comes from table membership; reads bypass any ORM cache.
    ``aoutcome()``, ``astatus()`` and ``aresult()`` are the awaitable forms."""

    id: int
    request_id: str
    sequence: int
    actor_type: str
    actor_id: str
    instance_id: int = 0
    using: str = "default"

    def outcome(self) -> MessageOutcome:
        connection = connections[self.using]

        def read(attempt: Attempt) -> Any:
            with connection.cursor() as cursor:
                return dialect_for(connection).message_outcome(cursor, self.id)

        row = recovering(self.using, "outcome()", read)
        if row is None:
            return MessageOutcome(status="unknown", sequence=self.sequence)
        (
            completed_at,
            rejected_at,
            result,
            rejection,
            error,
            in_ready,
            in_claimed,
            dead,
            attempts,
            sequence,
            _instance_id,
        ) = row
        if in_claimed:
            status = "claimed"
        elif in_ready:
            status = "ready"
        elif dead:
            status = "dead"
        elif rejected_at is not None:
            status = "rejected"
        elif completed_at is not None:
            status = "completed"
        else:
            status = "unknown"
        return MessageOutcome(
            status=status,
            result=payloads.decode(result),
            rejection=payloads.decode(rejection),
            error=payloads.decode(error),
            attempts=int(attempts),
            sequence=int(sequence),
            completed_at=as_datetime(completed_at),
        )

    def status(self) -> str:
        return self.outcome().status

    async def aoutcome(self) -> MessageOutcome:
        outcome: MessageOutcome = await sync_to_async(self.outcome)()
        return outcome

    async def astatus(self) -> str:
        return (await self.aoutcome()).status

    async def aresult(self, timeout: float | None = None) -> R:
        """:meth:`result`, awaited: the waiting happens on the event loop."""
        result: R = await aio.await_result(self, timeout)
        return result

    def result(self, timeout: float | None = None) -> R:
        """Wait for the outcome: the result, or raise :class:`Rejected` /
        :class:`MessageFailed`; :class:`SyncTimeout` when ``timeout`` seconds pass first.

        When no other process holds the actor, the caller runs it itself (caller-assisted),
        exactly as a synchronous call does.
        """
        result: R = wait_for(self, timeout)
        return result

    def raise_or_return(self, outcome: MessageOutcome) -> Any:
        if outcome.status == "completed":
            return outcome.result
        if outcome.status == "rejected":
            rejection = outcome.rejection or {}
            raise Rejected(
                rejection.get("code", "rejected"),
                rejection.get("message", ""),
                rejection.get("details"),
            )
        if outcome.status == "dead":
            error = outcome.error or {}
            raise MessageFailed(
                f"{self.actor_type}/{self.actor_id} message {self.id} failed: "
                f"{error.get('class', 'error')}: {error.get('message', '')}",
                error=error,
                message_id=self.id,
            )
        raise SyncTimeout(
            f"{self.actor_type}/{self.actor_id} message {self.id} is {outcome.status}",
            message_reference=self,
            actor_type=self.actor_type,
            actor_id=self.actor_id,
            status=outcome.status,
            waiting_on="result",
        )


def message_reference(enqueued: Enqueued) -> MessageReference[Any]:
    """The reference to a message :func:`~solid_objects.mailbox.enqueue` wrote or found."""
    return MessageReference(
        id=enqueued.message_id,
        request_id=enqueued.request_id,
        sequence=enqueued.sequence,
        actor_type=enqueued.actor_type,
        actor_id=enqueued.actor_id,
        instance_id=enqueued.instance_id,
        using=enqueued.using,
    )
