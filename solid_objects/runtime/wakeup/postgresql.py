"""The PostgreSQL transport: ``LISTEN`` on a dedicated psycopg connection built from the
alias's ``DATABASES`` entry, outside Django's connection handling and any pool (its
``application_name``: ``solid_objects listener``). Hints are
sent by enqueues and commits themselves (:mod:`solid_objects.db.notify`)."""

from __future__ import annotations

import logging
import time
import uuid
from typing import Any

from django.db import connections

from ...db import notify
from ...db.session_names import LISTENER_NAME, backend_pid
from .. import connection_names
from .doorbells import doorbell
from .listener import LISTEN_TICK, PROBE_PREFIX, PROBE_TIMEOUT, ListenerThread, ProbeResult, ring

logger = logging.getLogger("solid_objects")
#: The listener's entry among the process's sessions (``connection_names.sessions``).
LISTENER_ROLE = LISTENER_NAME.removeprefix(f"{connection_names.PREFIX} ")


class PostgreSQLListener(ListenerThread):
    """Probe: ``LISTEN``, ``pg_listening_channels()`` on the listener, and a ``NOTIFY`` sent
    through the application's own connection that must come back."""

    mode = "postgresql"

    def __init__(self, alias: str) -> None:
        super().__init__(alias)
        self._connection: Any = None

    def _connect(self) -> Any:
        import psycopg

        params = connections[self.alias].get_connection_params()
        for key in ("cursor_factory", "context", "prepare_threshold"):
            params.pop(key, None)
        params["application_name"] = LISTENER_NAME  # pg_stat_activity tells it apart
        connection = psycopg.connect(autocommit=True, **params)
        notify.listen(connection)
        self._connection = connection
        connection_names.record(self.alias, LISTENER_ROLE, backend_pid(connection))
        return connection

    def probe(self) -> ProbeResult:
        started = time.monotonic()
        try:
            connection = self._connection or self._connect()
            if notify.CHANNEL not in notify.listening_channels(connection):
                return ProbeResult(False, self.mode, "LISTEN did not stick (pooling proxy?)")
            token = f"{PROBE_PREFIX}{uuid.uuid4()}"
            sent_at = time.monotonic()
            with connections[self.alias].cursor() as cursor:  # autocommit: sent at once
                notify.send(cursor, payload_text=token)
            for received in connection.notifies(timeout=PROBE_TIMEOUT):
                if received.payload == token:
                    return ProbeResult(
                        True, self.mode, "LISTEN/NOTIFY round trip", time.monotonic() - sent_at
                    )
            return ProbeResult(
                False,
                self.mode,
                f"no NOTIFY arrived within {PROBE_TIMEOUT:.0f}s (transaction-pooling proxy?)",
            )
        except Exception as exc:
            self._close()
            return ProbeResult(
                False, self.mode, f"{type(exc).__name__}: {exc}", time.monotonic() - started
            )

    def _listen(self) -> None:
        connection = self._connection
        if connection is None:
            connection = self._connect()
            doorbell("work").ring()
        for received in connection.notifies(timeout=LISTEN_TICK):
            ring(received.payload, self.alias)
            if self._stop.is_set():
                break

    def _close(self) -> None:
        connection, self._connection = self._connection, None
        if connection is not None:
            connection_names.drop(self.alias, LISTENER_ROLE)
            try:
                connection.close()
            except Exception:
                logger.debug("closing the LISTEN connection failed", exc_info=True)
