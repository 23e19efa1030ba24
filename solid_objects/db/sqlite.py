"""SQLite 3.35+: writers are serialised by the database lock, so no row locks are needed.

Every write transaction should start with a write (``UPDATE``/``INSERT``) so a deferred
``BEGIN`` never has to upgrade a read lock; we recommend ``"transaction_mode": "IMMEDIATE"``.
"""

from __future__ import annotations

from typing import Any

from . import leases, mailbox
from .common import CommonDialect
from .dialect import Later

#: The text SQLite's clock is written in (``%`` doubled: the statements take parameters).
_FORMAT = "'%%Y-%%m-%%d %%H:%%M:%%f'"

#: Seconds since 1970 of the timestamp ``{column}`` (text in UTC).
EPOCH = "((julianday({column}) - 2440587.5) * 86400.0)"

#: How long a statement waits for the database lock (milliseconds).
BUSY_TIMEOUT = "PRAGMA busy_timeout"

#: Set it (``{milliseconds}``: a whole number, filled in: a ``PRAGMA`` takes no parameter).
SET_BUSY_TIMEOUT = "PRAGMA busy_timeout = {milliseconds}"


class SQLiteDialect(CommonDialect):
    vendor = "sqlite"
    write_lock_first = True
    #: BEGIN IMMEDIATE (the recommended transaction mode) waits for the database lock.
    lock_wait_before_begin = True
    insert_returning = True
    #: Django's SQLite backend allows 999 parameters per statement (11 per message).
    append_batch = 80

    now = f"strftime({_FORMAT}, 'now')"
    skip_locked = ""
    for_update = ""
    later = Later(f"strftime({_FORMAT}, 'now', %({{name}})s)")
    now_plus_positional = f"strftime({_FORMAT}, 'now', %s)"

    def interval(self, seconds: float) -> Any:
        return f"{seconds:+.6f} seconds"

    def epoch(self, column: str) -> str:
        return EPOCH.format(column=column)

    def bound_lock_wait(self, cursor: Any, seconds: float) -> Any:
        cursor.execute(BUSY_TIMEOUT, [])
        previous = cursor.fetchone()[0]
        cursor.execute(SET_BUSY_TIMEOUT.format(milliseconds=max(1, int(seconds * 1000))), [])
        return previous

    def unbound(self, cursor: Any, token: Any) -> None:
        if token is not None:
            cursor.execute(SET_BUSY_TIMEOUT.format(milliseconds=int(token)), [])

    allocate_sequence = mailbox.allocate_sequence_sqlite
    allocate_sequences = mailbox.allocate_sequences_sqlite
    acquire_lease = leases.acquire_lease_sqlite
