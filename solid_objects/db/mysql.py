"""MySQL 8 and MariaDB 10.6+: the common statements with the UTC database clock; the lease
found with a plain read and locked candidate by candidate, a new actor created under a named
lock (see ``mailbox.allocate_sequence_mysql``)."""

from __future__ import annotations

import threading
from typing import Any

from . import leases, mailbox
from .common import CommonDialect
from .dialect import Later

#: Seconds since 1970 of the UTC ``DATETIME`` ``{column}`` (``TIMESTAMPDIFF`` ignores the
#: session time zone).
EPOCH = "(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', {column}) / 1000000.0)"

#: Bound this session's InnoDB row-lock waits (``wait``: whole seconds), the bound it had
#: kept in the session variable ``{keep}`` (the assignments run left to right).
BOUND_LOCK_WAIT = (
    "SET {keep} = @@SESSION.innodb_lock_wait_timeout, SESSION innodb_lock_wait_timeout = %(wait)s"
)

#: Put the kept bound back (the server's default if this session never kept one: it is not
#: the session that set the bound).
UNBOUND_LOCK_WAIT = (
    "SET SESSION innodb_lock_wait_timeout = COALESCE({keep}, @@GLOBAL.innodb_lock_wait_timeout)"
)


class MySQLDialect(CommonDialect):
    vendor = "mysql"
    # Django stores naive UTC datetimes on MySQL; NOW() would use the session time zone.
    now = "UTC_TIMESTAMP(6)"
    later = Later("(UTC_TIMESTAMP(6) + INTERVAL %({name})s MICROSECOND)")
    now_plus_positional = "(UTC_TIMESTAMP(6) + INTERVAL %s MICROSECOND)"
    commit_by_autocommit = True
    claim_moves_with_results = True

    def __init__(self, connection: Any) -> None:
        super().__init__(connection)
        # MariaDB's JSON_VALID (the CHECK of every JSON column) refuses documents nested 32
        # levels or deeper; MySQL refuses a depth over 100 counting the innermost scalar.
        self.json_max_depth = 31 if connection.mysql_is_mariadb else 99
        # MariaDB 10.5+ returns rows from INSERT; MySQL does not.
        self.insert_returning = bool(connection.mysql_is_mariadb)
        #: Open :meth:`bound_lock_wait` bounds of the calling thread's connection (the
        #: dialect is shared by the threads of one alias; each has its own session).
        self._bounds = threading.local()

    def epoch(self, column: str) -> str:
        return EPOCH.format(column=column)

    def bound_lock_wait(self, cursor: Any, seconds: float) -> Any:
        """Bound InnoDB row-lock waits (whole seconds, at least 1) for this session, in one
        statement that keeps the previous bound in a session variable (one per nesting
        level, so bounds nest)."""
        depth = getattr(self._bounds, "depth", 0)
        keep = f"@solid_lock_wait_{depth}"
        cursor.execute(BOUND_LOCK_WAIT.format(keep=keep), {"wait": max(1, int(seconds + 0.999))})
        self._bounds.depth = depth + 1
        return keep

    def unbound(self, cursor: Any, token: Any) -> None:
        if token is not None:
            self._bounds.depth -= 1
            cursor.execute(UNBOUND_LOCK_WAIT.format(keep=token), [])

    allocate_sequence = mailbox.allocate_sequence_mysql
    allocate_sequences = mailbox.allocate_sequences_mysql
    append_message = mailbox.append_message_mysql
    acquire_lease = leases.acquire_lease_mysql
