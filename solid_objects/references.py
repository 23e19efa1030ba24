"""References: cheap handles to actors and to messages. No database access until used.

The top of the core: the user's :class:`~solid_objects.actor.Actor` and the package's public
names build on these; below them the mailbox returns plain :class:`~solid_objects.mailbox.Enqueued`
values that :func:`message_reference` wraps, and the sync path waits on any
:class:`~solid_objects.messages.MessageHandle`.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db import connections, transaction

from . import payloads
from .conf import get_settings
from .db.connections import Attempt, recovering
from .db.dialect import as_datetime
from .db.vendors import dialect_for
from .errors import MessageFailed, Rejected, SyncTimeout
from .mailbox import Enqueued, bind, enqueue, validate_available_at, validate_identifier
from .messages import MessageOutcome
from .registry import get_spec
from .spec import ActorAddress, ActorSpec
from .sync import call_sync, sync_timeout, wait_for

__all__ = [
    "ActorReference",
    "MessageOutcome",
    "MessageReference",
    "Snapshot",
    "message_reference",
    "ref",
]


def ref(actor_type: str, actor_id: str) -> ActorReference:
    """``solid_objects.ref("shop.cart", "alice")``: resolves the type through the registry."""
    return ActorReference(get_spec(actor_type), actor_id)


class ActorReference(ActorAddress):
    """``Cart.ref("alice")``: call operations synchronously, enqueue them, snapshot, destroy."""

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

    def sync(self, timeout: float | None = None, idempotency_key: str | None = None) -> _SyncCalls:
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
    ) -> _EnqueueCalls:
        """Options of one enqueue (checked here, :class:`InvalidPayload` if bad):
        ``available_at`` a timezone-aware datetime, ``idempotency_key`` an identifier."""
        validate_available_at(available_at)
        if idempotency_key is not None:
            validate_identifier(idempotency_key, "idempotency_key")
        return _EnqueueCalls(self, available_at, idempotency_key)

    def snapshot(self, using: str | None = None) -> Snapshot:
        """The committed state (no message row; may race an in-flight turn)."""
        alias = using or get_settings().DATABASE
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
        alias = using or get_settings().DATABASE
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
    ) -> MessageReference | None:
        validate_identifier(idempotency_key, "idempotency_key")
        alias = using or get_settings().DATABASE
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


class _SyncCalls:
    __slots__ = ("_idempotency_key", "_ref", "_timeout")

    def __init__(
        self, reference: ActorReference, timeout: float | None, idempotency_key: str | None
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


class _EnqueueCalls:
    __slots__ = ("_available_at", "_idempotency_key", "_ref")

    def __init__(
        self, reference: ActorReference, available_at: datetime | None, idempotency_key: str | None
    ) -> None:
        self._ref = reference
        self._available_at = available_at
        self._idempotency_key = idempotency_key

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        operation = self._ref.spec.operation(name)

        def send(*args: Any, **kwargs: Any) -> MessageReference:
            arguments = bind(operation, args, kwargs)

            def write(attempt: Attempt) -> Enqueued:
                return enqueue(
                    self._ref.spec,
                    self._ref.actor_id,
                    operation.name,
                    arguments,
                    delivery_mode="async",
                    idempotency_key=self._idempotency_key,
                    available_at=self._available_at,
                    then=attempt.committing,
                )

            return message_reference(
                recovering(
                    get_settings().DATABASE,
                    "enqueue",
                    write,
                    idempotent=self._idempotency_key is not None,
                )
            )

        send.__name__ = name
        return send


class Snapshot:
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
class MessageReference:
    """A durable message. Status comes from table membership; reads bypass any ORM cache."""

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

    def result(self, timeout: float | None = None) -> Any:
        """Wait for the outcome: the result, or raise :class:`Rejected` /
        :class:`MessageFailed`; :class:`SyncTimeout` when ``timeout`` seconds pass first.

        When no other process holds the actor, the caller runs it itself (caller-assisted),
        exactly as a synchronous call does.
        """
        return wait_for(self, timeout)

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


def message_reference(enqueued: Enqueued) -> MessageReference:
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
