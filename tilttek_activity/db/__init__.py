"""Vendor-specific SQL, one module per platform. Everything the journal sends to a database on
its hot paths (insert-once, kept-row reads, catch-up reads, checkpoint locks, running
transaction evidence) lives in these few files."""

from __future__ import annotations

from django.db import connections
from django.db.backends.base.base import BaseDatabaseWrapper

from .base import Backend, InsertOutcome, TransactionEvidence

__all__ = ["Backend", "InsertOutcome", "TransactionEvidence", "backend_for"]


def backend_for(alias: str) -> Backend:
    """The backend for this thread's connection to ``alias`` (made once per connection)."""
    connection = connections[alias]
    backend: Backend | None = getattr(connection, _ATTRIBUTE, None)
    if backend is None:
        backend = _make(connection)
        setattr(connection, _ATTRIBUTE, backend)
    return backend


#: The attribute of a Django connection holding its backend.
_ATTRIBUTE = "_tilttek_activity_backend"


def _make(connection: BaseDatabaseWrapper) -> Backend:
    vendor = connection.vendor
    if vendor == "postgresql":
        from .postgresql import PostgreSQLBackend

        return PostgreSQLBackend(connection)
    if vendor == "mysql":
        from .mysql import MySQLBackend

        return MySQLBackend(connection)
    if vendor == "sqlite":
        from .sqlite import SQLiteBackend

        return SQLiteBackend(connection)
    from .generic import GenericBackend

    return GenericBackend(connection)
