"""A private PgBouncer in transaction-pooling mode in front of the test's PostgreSQL server,
on a free port of 127.0.0.1, with its own configuration in the test's directory.

Clients connect without a password (``auth_type = trust``); PgBouncer connects to the real
server with the user and password of the ``default`` alias. Any database name is passed on
(``* = ...``), so the test database and the second shard's are both reachable. PgBouncer
refuses to run as root: as root it drops to the ``nobody`` user once its configuration is
read. A missing ``pgbouncer`` binary is an error, never a skip: ``make sysdeps`` installs it.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
from pathlib import Path
from typing import Any

from .waiting import wait_until

#: Debian installs the binary in /usr/sbin, which is not on every user's PATH.
SEARCH_PATH = os.pathsep.join([os.environ.get("PATH", ""), "/usr/sbin", "/usr/local/sbin"])
#: Server connections per (database, user) pair: fewer than the clients the tests open.
POOL_SIZE = 3
#: The OS user PgBouncer switches to when started as root.
UNPRIVILEGED_USER = "nobody"


class PgBouncerMissing(AssertionError):
    """``pgbouncer`` is not installed."""


def pgbouncer_binary() -> str:
    """The path of ``pgbouncer``; :class:`PgBouncerMissing` (a failure) when absent."""
    found = shutil.which("pgbouncer", path=SEARCH_PATH)
    if found is None:
        raise PgBouncerMissing(
            "pgbouncer is not installed: `make sysdeps` installs it (run as root, or "
            "`sudo apt-get install -y pgbouncer`); the PgBouncer tests never skip"
        )
    return found


def free_port() -> int:
    """A TCP port of 127.0.0.1 nothing listens on right now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _quote(value: str) -> str:
    return '"' + value.replace('"', '""') + '"'


class PgBouncer:
    """One PgBouncer process; :meth:`start` it, :meth:`stop` it in a ``finally``."""

    def __init__(self, directory: Path, upstream: dict[str, Any], pool_size: int = POOL_SIZE):
        self.directory = directory
        self.upstream = upstream
        self.pool_size = pool_size
        self.port = free_port()
        self.config = directory / "pgbouncer.ini"
        self.log = directory / "pgbouncer.log"
        self.process: subprocess.Popen[bytes] | None = None

    # -- configuration -----------------------------------------------------------------------
    def write_config(self) -> None:
        user = str(self.upstream.get("USER") or "postgres")
        server = [
            f"host={self.upstream.get('HOST') or '127.0.0.1'}",
            f"port={self.upstream.get('PORT') or 5432}",
            f"user={user}",
        ]
        if self.upstream.get("PASSWORD"):
            server.append(f"password={self.upstream['PASSWORD']}")
        (self.directory / "users.txt").write_text(f"{_quote(user)} {_quote('')}\n")
        self.config.write_text(
            "\n".join(
                [
                    "[databases]",
                    f"* = {' '.join(server)}",
                    "[pgbouncer]",
                    "listen_addr = 127.0.0.1",
                    f"listen_port = {self.port}",
                    "unix_socket_dir =",
                    "auth_type = trust",
                    f"auth_file = {self.directory / 'users.txt'}",
                    f"admin_users = {user}",
                    "pool_mode = transaction",
                    f"default_pool_size = {self.pool_size}",
                    "max_client_conn = 200",
                    "logfile =",
                    "pidfile =",
                    "",
                ]
            )
        )

    # -- life cycle -----------------------------------------------------------------------------
    def start(self) -> None:
        """Start PgBouncer and return once its admin console answers."""
        binary = pgbouncer_binary()
        self.write_config()
        command = [binary]
        if os.geteuid() == 0:
            command += ["-u", UNPRIVILEGED_USER]
        command.append(str(self.config))
        with self.log.open("wb") as out:
            self.process = subprocess.Popen(
                command, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
            )
        wait_until(
            self._answers, timeout=30, what="pgbouncer to accept connections", details=self.log_text
        )

    def _answers(self) -> bool:
        if self.process is not None and self.process.poll() is not None:
            raise AssertionError(
                f"pgbouncer exited with {self.process.returncode}:\n{self.log_text()}"
            )
        try:
            self.admin("SHOW VERSION")
        except Exception:
            return False
        return True

    def stop(self) -> None:
        process, self.process = self.process, None
        if process is None or process.poll() is not None:
            return
        process.send_signal(signal.SIGINT)  # safe shutdown: waits for no client
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(10)

    def log_text(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    # -- talking to it ----------------------------------------------------------------------------
    def dsn(self, database: str) -> str:
        user = self.upstream.get("USER") or "postgres"
        return f"host=127.0.0.1 port={self.port} dbname={database} user={user}"

    def url(self, database: str, **query: str) -> str:
        """A ``DATABASE_URL`` (django-environ syntax) to ``database`` through this PgBouncer."""
        user = self.upstream.get("USER") or "postgres"
        url = f"postgres://{user}@127.0.0.1:{self.port}/{database}"
        if query:
            url += "?" + "&".join(f"{key}={value}" for key, value in query.items())
        return url

    def connect(self, database: str, **options: Any) -> Any:
        """A raw psycopg connection to ``database`` through PgBouncer."""
        import psycopg

        return psycopg.connect(self.dsn(database), **options)

    def admin(self, command: str) -> list[dict[str, Any]]:
        """Run ``SHOW ...`` on the admin console; rows as dicts."""
        import psycopg
        from psycopg.rows import dict_row

        with (
            psycopg.connect(self.dsn("pgbouncer"), autocommit=True) as connection,
            connection.cursor(row_factory=dict_row) as cursor,
        ):
            cursor.execute(command)
            return list(cursor.fetchall())

    def clients(self, database: str) -> list[dict[str, Any]]:
        """Client connections to ``database`` (``SHOW CLIENTS``)."""
        return [row for row in self.admin("SHOW CLIENTS") if row["database"] == database]

    def servers(self, database: str) -> list[dict[str, Any]]:
        """Server connections PgBouncer keeps for ``database`` (``SHOW SERVERS``)."""
        return [row for row in self.admin("SHOW SERVERS") if row["database"] == database]
