"""MySQL 8 and MariaDB 10.6+: the common statements with the UTC database clock; the lease
found with a plain read and locked candidate by candidate, a new actor created under a named
lock (see ``mailbox.allocate_sequence_mysql``)."""

from __future__ import annotations

from typing import Any

from . import leases, mailbox
from .common import CommonDialect
from .dialect import Later

#: Seconds since 1970 of the UTC ``DATETIME`` ``{column}`` (``TIMESTAMPDIFF`` ignores the
#: session time zone).
EPOCH = "(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', {column}) / 1000000.0)"

#: This session's bound on InnoDB row-lock waits (seconds).
LOCK_WAIT_TIMEOUT = "SELECT @@SESSION.innodb_lock_wait_timeout"

#: Set it (``wait``: whole seconds).
SET_LOCK_WAIT_TIMEOUT = "SET SESSION innodb_lock_wait_timeout = %(wait)s"


class MySQLDialect(CommonDialect):
    vendor = "mysql"
    # Django stores naive UTC datetimes on MySQL; NOW() would use the session time zone.
    now = "UTC_TIMESTAMP(6)"
    later = Later("(UTC_TIMESTAMP(6) + INTERVAL %({name})s MICROSECOND)")
    now_plus_positional = "(UTC_TIMESTAMP(6) + INTERVAL %s MICROSECOND)"

    def __init__(self, connection: Any) -> None:
        super().__init__(connection)
        # MariaDB's JSON_VALID (the CHECK of every JSON column) refuses documents nested 32
        # levels or deeper; MySQL refuses a depth over 100 counting the innermost scalar.
        self.json_max_depth = 31 if connection.mysql_is_mariadb else 99
        # MariaDB 10.5+ returns rows from INSERT; MySQL does not.
        self.insert_returning = bool(connection.mysql_is_mariadb)

    def epoch(self, column: str) -> str:
        return EPOCH.format(column=column)

    def bound_lock_wait(self, cursor: Any, seconds: float) -> Any:
        """Bound InnoDB row-lock waits (whole seconds, at least 1) for this session."""
        cursor.execute(LOCK_WAIT_TIMEOUT, [])
        previous = cursor.fetchone()[0]
        cursor.execute(SET_LOCK_WAIT_TIMEOUT, {"wait": max(1, int(seconds + 0.999))})
        return previous

    def unbound(self, cursor: Any, token: Any) -> None:
        if token is not None:
            cursor.execute(SET_LOCK_WAIT_TIMEOUT, {"wait": int(token)})

    allocate_sequence = mailbox.allocate_sequence_mysql
    allocate_sequences = mailbox.allocate_sequences_mysql
    append_message = mailbox.append_message_mysql
    acquire_lease = leases.acquire_lease_mysql
