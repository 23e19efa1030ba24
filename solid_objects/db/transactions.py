"""The library's own short transactions (a fenced commit, a claim, a lease, an enqueue).

:func:`short_transaction` is ``transaction.atomic(using=alias)`` with one round trip fewer
on MySQL/MariaDB. There Django's outermost ``atomic()`` costs three: ``SET autocommit=0``
(logged as ``BEGIN``), ``COMMIT``, then ``SET autocommit=1``, which Django does not log, so
a count of the statements it logs misses one per transaction. Turning autocommit back on
commits the open transaction by itself, so the block ends with that one statement (logged
as ``COMMIT``): what is counted is what is sent.

Inside, Django's bookkeeping is the one of a manual transaction wrapped in an ``atomic()``
block: nested ``atomic()`` blocks are savepoints, ``transaction.on_commit()`` callbacks run
after the commit and are dropped by a rollback, and a block marked for rollback
(``needs_rollback``) is rolled back, as ``atomic()`` does. Inside the caller's
transaction, or on the other databases, it is ``atomic()`` itself.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from django.db import Error, connections, transaction
from django.db.backends.base import base as backend_base
from django.db.backends.base.base import BaseDatabaseWrapper

from .vendors import dialect_for


@contextmanager
def short_transaction(alias: str, *, savepoint: bool = True) -> Iterator[None]:
    """One transaction on ``alias`` around the block, committed when it ends without an
    exception and rolled back otherwise (inside the caller's transaction: a savepoint
    unless ``savepoint`` is false, as with ``atomic()``)."""
    connection = connections[alias]
    if (
        connection.in_atomic_block
        or not connection.get_autocommit()
        or not dialect_for(connection).commit_by_autocommit
    ):
        with transaction.atomic(using=alias, savepoint=savepoint):
            yield
        return
    connection.set_autocommit(False)  # logged as BEGIN
    try:
        # No savepoint: the block only gives Django its atomic state (on_commit, nesting).
        with transaction.atomic(using=alias, savepoint=False):
            yield
    except BaseException:
        _roll_back(connection)
        raise
    if connection.needs_rollback:
        # A nested block failed and its error was caught: atomic() rolls back.
        _roll_back(connection)
        return
    try:
        # Looked up where Django's own transaction control finds it, so whatever wraps
        # Django's logging of BEGIN and COMMIT sees this COMMIT too.
        with backend_base.debug_transaction(connection, "COMMIT"):  # type: ignore[attr-defined]
            connection.set_autocommit(True)  # commits the open transaction
    except Error:
        # The commit may or may not have happened; the session is not trusted again.
        connection.run_on_commit = []
        connection.close()
        raise
    connection.run_and_clear_commit_hooks()


def _roll_back(connection: BaseDatabaseWrapper) -> None:
    try:
        connection.rollback()  # drops the on_commit callbacks
        connection.set_autocommit(True)
    except Error:
        connection.close()
    finally:
        connection.needs_rollback = False
