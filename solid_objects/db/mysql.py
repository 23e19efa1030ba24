"""MySQL 8 and MariaDB 10.6+: the portable statements with the UTC database clock."""

from __future__ import annotations

import hashlib
import logging
from typing import Any

from .dialect import Dialect

logger = logging.getLogger("solid_objects")

#: Longest wait for the creation lock of a new actor (seconds); it is held only while one
#: creator's INSERT runs.
CREATION_LOCK_WAIT = 60


class MySQLDialect(Dialect):
    vendor = "mysql"
    # Django stores naive UTC datetimes on MySQL; NOW() would use the session time zone.
    now = "UTC_TIMESTAMP(6)"

    def __init__(self, connection: Any) -> None:
        super().__init__(connection)
        # MariaDB's JSON_VALID (the CHECK of every JSON column) refuses documents nested 32
        # levels or deeper; MySQL refuses a depth over 100 counting the innermost scalar.
        self.json_max_depth = 31 if connection.mysql_is_mariadb else 99

    def bound_lock_wait(self, cursor: Any, seconds: float) -> Any:
        """Bound InnoDB row-lock waits (whole seconds, at least 1) for this session."""
        cursor.execute("SELECT @@SESSION.innodb_lock_wait_timeout", [])
        previous = cursor.fetchone()[0]
        cursor.execute("SET SESSION innodb_lock_wait_timeout = %s", [max(1, int(seconds + 0.999))])
        return previous

    def unbound(self, cursor: Any, token: Any) -> None:
        if token is not None:
            cursor.execute("SET SESSION innodb_lock_wait_timeout = %s", [int(token)])

    def allocate_sequence(
        self, cursor: Any, actor_type: str, actor_id: str, state_version: int
    ) -> tuple[int, int, int]:
        """Lock the instance row and take the next sequence, creating the row if needed.

        An existing actor is one ``UPDATE`` (waiters queue on its record lock). Creating one
        is serialised by a named lock held only while the ``INSERT`` runs: InnoDB checks a
        duplicate key with a next-key lock, and when the creator that several sessions wait
        for rolls back, their locks become gap locks that block each other's inserts, a
        deadlock that would roll back a whole caller's transaction. With one waiter at a
        time on the new key there is no such cycle.
        """
        t = self.t_instances
        cursor.execute(
            f"UPDATE {t} SET next_message_sequence = next_message_sequence + 1, "
            "id = LAST_INSERT_ID(id) WHERE actor_type = %s AND actor_id = %s",
            [actor_type, actor_id],
        )
        if cursor.rowcount != 1:
            name = self._creation_lock(actor_type, actor_id)
            cursor.execute("SELECT GET_LOCK(%s, %s)", [name, CREATION_LOCK_WAIT])
            locked = cursor.fetchone()[0] == 1
            if not locked:
                logger.warning(
                    "creation lock of %s/%s not acquired; inserting anyway", actor_type, actor_id
                )
            try:
                n = self.now
                cursor.execute(
                    f"INSERT INTO {t} (actor_type, actor_id, state, state_version, "
                    "next_message_sequence, activation_generation, state_revision, "
                    f"created_at, updated_at) VALUES (%s, %s, '{{}}', %s, 2, 0, 0, {n}, {n}) "
                    "ON DUPLICATE KEY UPDATE next_message_sequence = next_message_sequence + 1, "
                    "id = LAST_INSERT_ID(id)",
                    [actor_type, actor_id, state_version],
                )
                created = cursor.rowcount == 1  # 2: another creator won meanwhile
            finally:
                if locked:
                    cursor.execute("SELECT RELEASE_LOCK(%s)", [name])
                    cursor.fetchone()
            if created:
                return int(cursor.lastrowid), 1, 0
        instance_id = int(cursor.lastrowid)
        cursor.execute(
            f"SELECT next_message_sequence - 1, state_revision FROM {t} WHERE id = %s",
            [instance_id],
        )
        sequence, revision = cursor.fetchone()
        return instance_id, int(sequence), int(revision)

    def _creation_lock(self, actor_type: str, actor_id: str) -> str:
        """A server-wide lock name (at most 64 characters) for one actor of one database."""
        key = "\0".join(
            [str(self.connection.settings_dict["NAME"]), self.t_instances, actor_type, actor_id]
        )
        return (
            "solid_objects:" + hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()[:48]
        )
