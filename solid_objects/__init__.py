"""Durable, addressable actors on your Django database.

    from solid_objects import Actor, attribute, query, observable, migrate_state

See ``docs/actors.md``. Nothing here imports models, so the package can be imported while
Django loads its apps.
"""

from importlib.metadata import PackageNotFoundError
from importlib.metadata import version as _distribution_version

from .actor import Actor, attribute, migrate_state, observable, query
from .errors import (
    ActorCallCycle,
    ActorDefinitionError,
    ActorDestroyed,
    ApplicationWriteForbidden,
    CrossShardTransaction,
    DatabaseUnavailable,
    IdempotencyConflict,
    ImproperlyConfigured,
    InvalidArguments,
    InvalidPayload,
    InvalidRejectionCode,
    LostActivation,
    MailboxFull,
    MessageFailed,
    PayloadTooLarge,
    Rejected,
    SolidObjectsError,
    StateMigrationError,
    SyncInsideTransaction,
    SyncTimeout,
    UnknownActorType,
    UnknownDatabase,
    UnknownOperation,
)
from .references import (
    ActorReference,
    AsyncReference,
    MessageReference,
    Snapshot,
    enqueue_many,
    ref,
)
from .registry import commit_action, effect, register
from .retry_policy import retry
from .shards import database_for

try:
    #: The installed distribution's version (``django-solid-objects``, from its metadata).
    __version__: str = _distribution_version("django-solid-objects")
except PackageNotFoundError:  # imported from a checkout that was never installed
    __version__ = "0+unknown"

__all__ = [
    "Actor",
    "ActorCallCycle",
    "ActorDefinitionError",
    "ActorDestroyed",
    "ActorReference",
    "AsyncReference",
    "ApplicationWriteForbidden",
    "CrossShardTransaction",
    "DatabaseUnavailable",
    "IdempotencyConflict",
    "ImproperlyConfigured",
    "InvalidArguments",
    "InvalidPayload",
    "InvalidRejectionCode",
    "LostActivation",
    "MailboxFull",
    "MessageFailed",
    "MessageReference",
    "PayloadTooLarge",
    "Rejected",
    "Snapshot",
    "SolidObjectsError",
    "StateMigrationError",
    "SyncInsideTransaction",
    "SyncTimeout",
    "UnknownActorType",
    "UnknownDatabase",
    "UnknownOperation",
    "attribute",
    "commit_action",
    "database_for",
    "effect",
    "enqueue_many",
    "migrate_state",
    "observable",
    "query",
    "ref",
    "register",
    "retry",
]
