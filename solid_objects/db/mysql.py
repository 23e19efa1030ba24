"""MySQL 8 and MariaDB 10.6+: the common statements with the UTC database clock; the lease
found with a plain read and locked candidate by candidate, a new actor created under a named
lock (see ``mailbox.allocate_sequence_mysql``)."""

from __future__ import annotations

from typing import Any

from . import leases, mailbox
from .common import CommonDialect
from .dialect import Later


class MySQLDialect(CommonDialect):
    vendor = "mysql"
    # Django stores naive UTC datetimes on MySQL; NOW() would use the session time zone.
    now = "UTC_TIMESTAMP(6)"
    later = Later("(UTC_TIMESTAMP(6) + INTERVAL %({name})s MICROSECOND)")

    def __init__(self, connection: Any) -> None:
        super().__init__(connection)
        # MariaDB's JSON_VALID (the CHECK of every JSON column) refuses documents nested 32
        # levels or deeper; MySQL refuses a depth over 100 counting the innermost scalar.
        self.json_max_depth = 31 if connection.mysql_is_mariadb else 99
        # MariaDB 10.5+ returns rows from INSERT; MySQL does not.
        self.insert_returning = bool(connection.mysql_is_mariadb)

    def epoch(self, column: str) -> str:
        # DATETIME in UTC; TIMESTAMPDIFF ignores the session time zone.
        return f"(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', {column}) / 1000000.0)"

    def bound_lock_wait(self, cursor: Any, seconds: float) -> Any:
        """Bound InnoDB row-lock waits (whole seconds, at least 1) for this session."""
        cursor.execute("SELECT @@SESSION.innodb_lock_wait_timeout", [])
        previous = cursor.fetchone()[0]
        cursor.execute(
            "SET SESSION innodb_lock_wait_timeout = %(wait)s",
            {"wait": max(1, int(seconds + 0.999))},
        )
        return previous

    def unbound(self, cursor: Any, token: Any) -> None:
        if token is not None:
            cursor.execute("SET SESSION innodb_lock_wait_timeout = %(wait)s", {"wait": int(token)})

    allocate_sequence = mailbox.allocate_sequence_mysql
    allocate_sequences = mailbox.allocate_sequences_mysql
    append_message = mailbox.append_message_mysql
    acquire_lease = leases.acquire_lease_mysql
