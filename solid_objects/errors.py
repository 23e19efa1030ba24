"""Every error ``solid_objects`` raises (re-exported from the package)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django.core.exceptions import ImproperlyConfigured
from django.db import OperationalError

from tilttek_activity.errors import IdempotencyConflict as ActivityIdempotencyConflict
from tilttek_activity.errors import InvalidActivity

if TYPE_CHECKING:
    from .messages import MessageHandle

__all__ = [
    "ActorCallCycle",
    "ActorDefinitionError",
    "ActorDestroyed",
    "ApplicationWriteForbidden",
    "CrossShardTransaction",
    "DatabaseUnavailable",
    "IdempotencyConflict",
    "ImproperlyConfigured",
    "InvalidArguments",
    "InvalidPayload",
    "InvalidRejectionCode",
    "InvalidReshard",
    "LostActivation",
    "MailboxFull",
    "MessageFailed",
    "PayloadTooLarge",
    "Rejected",
    "ReshardRequired",
    "SolidObjectsError",
    "StateMigrationError",
    "SyncInsideTransaction",
    "SyncTimeout",
    "UnknownActorType",
    "UnknownDatabase",
    "UnknownOperation",
]


class SolidObjectsError(Exception):
    """Base class of every solid_objects error."""

    #: Errors raised from a handler with ``retryable = False`` dead-letter at once.
    retryable: bool = True


class Rejected(SolidObjectsError):
    """A terminal domain rejection (``self.reject(...)``): no retry, no dead letter."""

    retryable = False

    def __init__(self, code: str, message: str = "", details: Any = None) -> None:
        self.code = code
        self.message = message
        self.details = details
        super().__init__(f"{code}: {message}" if message else code)

    def as_dict(self) -> dict[str, Any]:
        return {"code": self.code, "message": self.message, "details": self.details}


class MessageFailed(SolidObjectsError):
    """The message became a dead letter; ``error`` holds class, message and backtrace."""

    def __init__(
        self, message: str, *, error: dict[str, Any] | None = None, message_id: int | None = None
    ) -> None:
        self.error = error or {}
        self.message_id = message_id
        super().__init__(message)


class SyncTimeout(SolidObjectsError, TimeoutError):
    """A synchronous call did not finish in time. The durable message is not cancelled.

    ``message_reference`` is ``None`` only when the deadline passed before the message was
    enqueued (``status`` ``"not enqueued"``): then nothing was written.
    """

    def __init__(
        self,
        message: str,
        *,
        message_reference: MessageHandle | None,
        actor_type: str,
        actor_id: str,
        status: str,
        waiting_on: str,
    ) -> None:
        self.message_reference = message_reference
        self.actor_type = actor_type
        self.actor_id = actor_id
        self.status = status
        self.waiting_on = waiting_on
        super().__init__(message)


class ActorDefinitionError(SolidObjectsError, TypeError):
    """An actor class that cannot work as declared, refused when the class is defined: an
    operation or attribute name taken by the reference or the snapshot, an attribute that
    clashes with a method, a missing ``@migrate_state`` step."""


class SyncInsideTransaction(SolidObjectsError):
    """A sync call was made inside ``transaction.atomic()``; nothing was written."""


class CrossShardTransaction(SolidObjectsError):
    """An enqueue inside ``transaction.atomic()`` on one database for an actor that lives on
    another shard (``SOLID_OBJECTS["DATABASES"]``): it could not commit or roll back with the
    caller's writes, so nothing was written. Enqueue after the commit
    (``transaction.on_commit``), or open the transaction on the actor's shard
    (``solid_objects.database_for(actor_type, actor_id)``)."""

    def __init__(self, message: str, *, alias: str, caller_alias: str) -> None:
        self.alias = alias
        self.caller_alias = caller_alias
        super().__init__(message)


class ReshardRequired(SolidObjectsError):
    """``SOLID_OBJECTS["DATABASES"]`` differs from the shard list the databases last agreed
    with, so some actors may live on a database that is no longer their home: workers
    refuse to start until ``manage.py solid_objects_reshard --execute`` has moved them."""


class InvalidReshard(SolidObjectsError, ValueError):
    """A ``solid_objects_reshard`` request that cannot run (an unknown ``--from`` alias, an
    alias that is still a shard, workers still running); nothing was written."""


class IdempotencyConflict(SolidObjectsError):
    """The idempotency key is already used by a different operation or payload."""

    def __init__(self, message: str, *, fields: list[str] | None = None) -> None:
        self.fields = fields or []
        super().__init__(message)


class MailboxFull(SolidObjectsError):
    """The actor has ``MAX_MAILBOX_LENGTH`` ready or claimed messages."""


class PayloadTooLarge(SolidObjectsError, ValueError):
    """Arguments, result or state exceed their configured size limit."""


class InvalidPayload(SolidObjectsError, ValueError):
    """A value is not strict JSON (sets, NaN, datetimes, non-string keys, deep nesting, NUL
    or lone surrogates in text, integers of more than 4,300 digits), or an identifier or
    option (actor id, idempotency key, timeout, ``available_at``) is not valid. Raised
    before anything is written; inside a turn it fails the turn without retry."""

    retryable = False


class InvalidArguments(InvalidPayload, TypeError):
    """The arguments do not match the operation's signature (also a ``TypeError``)."""


class UnknownActorType(SolidObjectsError, LookupError):
    """No registered actor has this ``actor_type``."""


class UnknownDatabase(SolidObjectsError, LookupError):
    """An operator surface (``--database ALIAS``, the admin's shard choice, ``using=``) was
    given an alias that holds no ``solid_objects`` tables: neither ``DATABASE`` nor one of
    ``DATABASES``. Nothing was read or written."""

    def __init__(self, message: str, *, alias: str, known: tuple[str, ...]) -> None:
        self.alias = alias
        self.known = known
        super().__init__(message)


class UnknownOperation(SolidObjectsError, AttributeError):
    """The actor has no public method (message) of this name."""

    retryable = False


class InvalidRejectionCode(SolidObjectsError, ValueError):
    """A rejection code does not match ``[A-Za-z_][A-Za-z0-9_]*``."""

    retryable = False


class LostActivation(SolidObjectsError):
    """The fenced commit found the lease taken over, expired or released: nothing written."""


class ActorDestroyed(SolidObjectsError):
    """The actor incarnation was destroyed while the operation was in flight."""


class StateMigrationError(SolidObjectsError):
    """Stored state cannot be brought to the code's ``state_version``."""

    retryable = False


class ApplicationWriteForbidden(SolidObjectsError):
    """Handler code wrote to the database directly; use ``commit_action`` or ``emit``."""

    retryable = False


class ActorCallCycle(SolidObjectsError):
    """Actor code tried a synchronous call to an actor; use ``send_to``."""

    retryable = False


class DatabaseUnavailable(SolidObjectsError, OperationalError):
    """The database connection was lost (a restart, a failover, a killed session) and a
    fresh connection did not work either, or retrying was not safe. Raised, instead of the
    driver's error, by calls the library makes outside the caller's transaction; the
    driver's error is chained (``__cause__``). It is also a ``django.db.OperationalError``,
    so code that already handles database errors keeps working.

    ``committed`` says what happened to the call's write: ``False``, nothing was committed
    (calling again is safe); ``True``, it committed (a sync call's message was enqueued:
    ``message_reference.result()`` gets its outcome later); ``None``, unknown (the
    connection died during the commit; an idempotency key makes calling again safe).
    """

    def __init__(
        self,
        message: str,
        *,
        alias: str,
        committed: bool | None = False,
        message_reference: MessageHandle | None = None,
    ) -> None:
        self.alias = alias
        self.committed = committed
        self.message_reference = message_reference
        super().__init__(message)


#: Errors a retry meets again unchanged (the input itself is at fault): a turn or an effect
#: failing with one is dead at once, never retried. The journal's own input errors
#: (``self.record_activity`` in a turn) are among them.
NEVER_RETRYABLE: tuple[type[Exception], ...] = (
    InvalidPayload,
    PayloadTooLarge,
    IdempotencyConflict,
    UnknownOperation,
    InvalidActivity,
    ActivityIdempotencyConflict,
)


def is_retryable(exc: BaseException) -> bool:
    """The one retry policy of turns and effects: not for :data:`NEVER_RETRYABLE` errors;
    otherwise the exception's ``retryable`` attribute (``False`` on :class:`Rejected`, any
    exception may set it), retryable when it has none."""
    if isinstance(exc, NEVER_RETRYABLE):
        return False
    return bool(getattr(exc, "retryable", True))
