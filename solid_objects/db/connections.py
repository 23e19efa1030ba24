"""The library recovers its own database connections after an outage (a server restart, a
failover, a session killed by an administrator).

Django replaces a broken connection only at the start and end of a request
(``close_old_connections()``); a process whose connection died (a worker, a shell, a
management command, a long request) would otherwise fail every call until someone calls it.
Calls the library makes outside the caller's transaction (sync calls, ``snapshot()``,
``find_message()``, ``status()`` / ``outcome()`` / ``result()``, ``destroy()``, an enqueue
outside ``atomic()``) run through :func:`recovering`:

1. **Before use**, a connection Django saw fail is checked (``is_usable()``, one round trip,
   only after an error) and replaced when it is dead.
2. On a **connection-level error** (the connection cannot be used afterwards, or could not
   be opened) the connection is closed and the call runs **once more** on a fresh one, when
   that is safe: the call is a read, it is idempotent (an idempotency key; driving a
   message that is already enqueued is fenced), or it had not yet sent its commit.
3. Otherwise, or when the second try fails too,
   :class:`~solid_objects.errors.DatabaseUnavailable` is raised (with the driver's error as
   ``__cause__``) instead of the raw driver error; its ``committed`` attribute says whether
   the call's write committed (``False``), did (``True``) or may have (``None``).

Inside the caller's ``transaction.atomic()`` (or with autocommit turned off) none of this
applies: the transaction and its connection are the caller's, and Django's rules hold.

A lease whose activation lost its connection mid-pass is **abandoned** (:func:`abandon`): it
is given back, fenced by its token and generation, as soon as a connection of this process
works again (:func:`release_abandoned`), so the actor does not wait ``LEASE_DURATION`` for
it to expire. Its claimed turn, if any, is then recovered by the next lease like any stale
claim (its attempt stays counted). A lease taken by a statement whose reply was lost is not
known to the process and still waits for its expiry.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from django.db import InterfaceError, OperationalError, connections, transaction

from ..errors import DatabaseUnavailable
from .vendors import dialect_for

if TYPE_CHECKING:
    from ..messages import MessageHandle
    from .rows import LeaseRow

logger = logging.getLogger("solid_objects")

T = TypeVar("T")

#: The errors a lost connection surfaces as (Django's wrappers of the driver's errors).
CONNECTION_ERRORS = (OperationalError, InterfaceError)


@dataclass
class Attempt:
    """One try of a recovering call. The call marks :attr:`commit_sent` once its commit may
    have reached the server (after that, only an idempotent call is tried again), and may
    name the message it wrote (kept on the error when it cannot be retried)."""

    commit_sent: bool = False
    message_reference: MessageHandle | None = None

    def committing(self, *_: Any) -> None:
        """Mark the commit as possibly sent (usable as an enqueue's ``then`` callback)."""
        self.commit_sent = True


class _Depth(threading.local):
    value = 0


_depth = _Depth()


def inside_callers_transaction(alias: str) -> bool:
    """Whether the connection is in a transaction the caller opened (``atomic()``, or
    autocommit turned off): the library must neither close it nor retry in it."""
    connection = connections[alias]
    if connection.in_atomic_block:
        return True
    return connection.connection is not None and not connection.autocommit


def discard_broken(alias: str) -> None:
    """Before use: close the connection if Django saw it fail and it no longer answers (the
    next statement then opens a fresh one). Costs one round trip, and only after an error."""
    connection = connections[alias]
    if connection.connection is None or not connection.errors_occurred:
        return
    if inside_callers_transaction(alias):
        return
    if connection.is_usable():
        connection.errors_occurred = False
        return
    logger.info("database connection %r is broken: replacing it", alias)
    close_quietly(alias)


#: MySQL/MariaDB client and server error codes of a lost or refused connection: can't
#: connect (2002, 2003), server gone away (2006), lost during a query (2013, 2055), killed
#: (1927), shutdown in progress (1053), closed for inactivity (4031).
MYSQL_CONNECTION_CODES = frozenset({1053, 1927, 2002, 2003, 2006, 2013, 2055, 4031})
#: PostgreSQL SQLSTATEs of a lost connection besides class 08: the server shut down (fast or
#: immediate), or is starting up or shutting down and refuses connections.
PG_CONNECTION_STATES = frozenset({"57P01", "57P02", "57P03"})


def is_connection_error(exc: BaseException) -> bool:
    """Whether the driver's error behind ``exc`` (a Django database error) says the
    connection is lost or could not be opened, as opposed to an error of the statement
    itself (a lock timeout, a deadlock, a constraint)."""
    if not isinstance(exc, CONNECTION_ERRORS):
        return False
    driver = exc.__cause__ if exc.__cause__ is not None else exc
    module = type(driver).__module__
    if module.startswith("psycopg"):
        state = getattr(driver, "sqlstate", None) or getattr(driver, "pgcode", None)
        if state is None:  # raised by the client: connecting failed, or the socket closed
            return type(driver).__name__ == "OperationalError" or "closed" in str(driver)
        return state.startswith("08") or state in PG_CONNECTION_STATES
    if module.startswith("MySQLdb"):
        code = driver.args[0] if driver.args else None
        return code in MYSQL_CONNECTION_CODES or (
            type(driver).__name__ == "InterfaceError" and code in (0, None)
        )
    return False


def connection_lost(alias: str, exc: BaseException) -> bool:
    """After a database error outside the caller's transaction: whether the connection was
    lost (the driver says so, or the connection is closed or no longer answers). Django may
    already have opened a fresh one (an ``atomic()`` block that failed to roll back reopens
    the connection to restore autocommit), so the error itself is looked at first."""
    if is_connection_error(exc):
        return True
    connection = connections[alias]
    if connection.connection is None:
        return True
    try:
        return not connection.is_usable()
    except Exception:  # is_usable() catches the driver's errors; be safe with the rest
        return True


def close_quietly(alias: str) -> None:
    """Close the connection, ignoring the errors a dead connection raises on close."""
    try:
        connections[alias].close()
    except Exception:
        logger.debug("closing a broken connection failed", exc_info=True)


def recovering(
    alias: str,
    what: str,
    work: Callable[[Attempt], T],
    *,
    idempotent: bool = False,
    message_reference: MessageHandle | None = None,
) -> T:
    """Run ``work(attempt)`` on ``alias`` recovering the connection (see the module
    docstring); ``what`` names the call in the error. ``idempotent``: running it again after
    its commit may have been sent is safe. ``message_reference``: the call only drives a
    message already enqueued (its error then says ``committed=True``). Nested calls (a sync
    call reading its message's outcome) run as they are, inside the outer one's tries."""
    if _depth.value or inside_callers_transaction(alias):
        return work(Attempt())
    _depth.value += 1
    try:
        attempt = Attempt()
        try:
            return _try(alias, work, attempt)
        except CONNECTION_ERRORS as exc:
            if isinstance(exc, DatabaseUnavailable) or not connection_lost(alias, exc):
                raise
            close_quietly(alias)
            if attempt.commit_sent and not idempotent:
                raise _unavailable(
                    alias, what, exc, attempt, message_reference, retried=False
                ) from exc
            logger.info("%s: the database connection was lost (%s); retrying once", what, exc)
        attempt = Attempt()
        try:
            return _try(alias, work, attempt)
        except CONNECTION_ERRORS as exc:
            if isinstance(exc, DatabaseUnavailable) or not connection_lost(alias, exc):
                raise
            close_quietly(alias)
            raise _unavailable(alias, what, exc, attempt, message_reference, retried=True) from exc
    finally:
        _depth.value -= 1


#: How often a call the database chose as a deadlock victim is run again (before its commit
#: was sent, the victim's transaction was the library's own and rolled back whole).
DEADLOCK_RETRIES = 3


def is_deadlock(exc: BaseException) -> bool:
    """Whether the server rolled the transaction back to break a deadlock (or a
    serialization failure): PostgreSQL SQLSTATE 40P01/40001, MySQL/MariaDB error 1213."""
    for error in (exc, exc.__cause__):
        if error is None:
            continue
        if getattr(error, "sqlstate", None) in ("40P01", "40001"):
            return True
        args = getattr(error, "args", ())
        if args and args[0] == 1213:
            return True
    return False


def _try(alias: str, work: Callable[[Attempt], T], attempt: Attempt) -> T:
    for retry in range(DEADLOCK_RETRIES + 1):
        discard_broken(alias)
        release_abandoned(alias)
        try:
            return work(attempt)
        except OperationalError as exc:
            if retry == DEADLOCK_RETRIES or attempt.commit_sent or not is_deadlock(exc):
                raise
            logger.info("a deadlock rolled the library's transaction back; running it again")
            time.sleep(0.002 * (retry + 1))  # let the winner commit first
    raise AssertionError("unreachable")  # pragma: no cover


def _unavailable(
    alias: str,
    what: str,
    exc: BaseException,
    attempt: Attempt,
    message_reference: MessageHandle | None,
    *,
    retried: bool,
) -> DatabaseUnavailable:
    reference = message_reference or attempt.message_reference
    if message_reference is not None:
        committed: bool | None = True
        outcome = f"message {message_reference.id} is enqueued; its result() is available later"
    elif attempt.commit_sent:
        committed = None
        outcome = "the connection died during the commit: the write may have committed"
    else:
        committed = False
        outcome = "nothing was committed"
    how = "and a fresh connection failed too" if retried else "(not retried)"
    return DatabaseUnavailable(
        f"{what}: the connection to database {alias!r} was lost {how}; {outcome} ({exc})",
        alias=alias,
        committed=committed,
        message_reference=reference,
    )


# -- abandoned leases ----------------------------------------------------------------------------
class _Abandoned:
    """Leases whose activation lost its connection, per alias, until given back."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._leases: dict[str, list[LeaseRow]] = {}

    def add(self, alias: str, lease: LeaseRow) -> None:
        with self._lock:
            self._leases.setdefault(alias, []).append(lease)

    def take(self, alias: str) -> list[LeaseRow]:
        if not self._leases.get(alias):  # the common case, without the lock
            return []
        with self._lock:
            return self._leases.pop(alias, [])

    def put_back(self, alias: str, leases: list[LeaseRow]) -> None:
        with self._lock:
            self._leases.setdefault(alias, [])[:0] = leases

    def pending(self, alias: str) -> int:
        return len(self._leases.get(alias, ()))


abandoned = _Abandoned()


def abandon(alias: str, lease: LeaseRow) -> None:
    """The activation holding ``lease`` lost its connection (or its last commit's outcome is
    unknown): give the lease back once a connection works again."""
    abandoned.add(alias, lease)


def release_abandoned(alias: str) -> int:
    """Give back the abandoned leases of ``alias`` (fenced by token and generation: a lease
    that was released, expired and taken over meanwhile is left alone); returns how many
    were still held. A connection error keeps them for the next try and propagates."""
    leases = abandoned.take(alias)
    if not leases:
        return 0
    connection = connections[alias]
    dialect = dialect_for(connection)
    released = 0
    try:
        with transaction.atomic(using=alias), connection.cursor() as cursor:
            for lease in sorted(leases, key=lambda lease: lease.instance_id):
                released += bool(dialect.release(cursor, lease))
    except BaseException:
        abandoned.put_back(alias, leases)
        raise
    if released:
        logger.info("gave back %d lease(s) held when the database connection was lost", released)
    return released
