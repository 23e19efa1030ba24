"""SQLite 3.35+: writers are serialised by the database lock, so no row locks are needed.

Every write transaction should start with a write (``UPDATE``/``INSERT``) so a deferred
``BEGIN`` never has to upgrade a read lock; we recommend ``"transaction_mode": "IMMEDIATE"``.
"""

from __future__ import annotations

from typing import Any

from . import leases, mailbox
from .common import CommonDialect
from .dialect import Later

_FORMAT = "'%%Y-%%m-%%d %%H:%%M:%%f'"


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

    def interval(self, seconds: float) -> Any:
        return f"{seconds:+.6f} seconds"

    def now_plus(self, seconds: float) -> tuple[str, list[Any]]:
        return f"strftime({_FORMAT}, 'now', %s)", [self.interval(seconds)]

    def epoch(self, column: str) -> str:
        return f"((julianday({column}) - 2440587.5) * 86400.0)"  # text in UTC

    def bound_lock_wait(self, cursor: Any, seconds: float) -> Any:
        cursor.execute("PRAGMA busy_timeout", [])
        previous = cursor.fetchone()[0]
        cursor.execute(f"PRAGMA busy_timeout = {max(1, int(seconds * 1000))}", [])
        return previous

    def unbound(self, cursor: Any, token: Any) -> None:
        if token is not None:
            cursor.execute(f"PRAGMA busy_timeout = {int(token)}", [])

    allocate_sequence = mailbox.allocate_sequence_sqlite
    allocate_sequences = mailbox.allocate_sequences_sqlite
    acquire_lease = leases.acquire_lease_sqlite
