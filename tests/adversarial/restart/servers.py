"""Private database servers for the restart tests: a PostgreSQL cluster (``initdb`` /
``pg_ctl``) or a MariaDB server (``mariadb-install-db`` / ``mariadbd``) in a temporary folder,
on a free port of 127.0.0.1, that the test may stop and start at will. Never the machine's
own services. A test may make it listen on more addresses of this machine (:attr:`addresses`,
e.g. the root-side ends of the partition test's veth pairs) and pass it server settings
(:attr:`settings`).

PostgreSQL refuses to run as root: when the tests run as root its commands run as the
``postgres`` OS user (``runuser``) in a folder that user owns; as any other user they run as
that user. MariaDB runs as the current user (``--user=root`` when that is root) with
``--skip-grant-tables``, so the test connects as root without a password.

:meth:`PrivateServer.destroy` stops the server whatever its state and removes its files; the
fixture calls it in a ``finally``. A missing server binary is an error, never a skip.
"""

from __future__ import annotations

import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

#: Upper bound of a server start or stop (seconds), including crash recovery.
START_TIMEOUT = 90.0
#: How often readiness is polled while a server starts (seconds).
POLL = 0.05
#: The OS user PostgreSQL runs as when the tests run as root.
POSTGRES_OS_USER = "postgres"


def free_port() -> int:
    """A TCP port of 127.0.0.1 nothing listens on right now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _run(command: list[str], what: str, timeout: float = START_TIMEOUT) -> str:
    done = subprocess.run(command, capture_output=True, text=True, timeout=timeout, check=False)
    if done.returncode != 0:
        raise RuntimeError(
            f"{what} failed ({done.returncode}): {' '.join(command)}\n{done.stdout}\n{done.stderr}"
        )
    return done.stdout


def _wait(predicate: Any, what: str, timeout: float = START_TIMEOUT) -> None:
    deadline = time.monotonic() + timeout
    pause = threading.Event()
    while not predicate():
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out after {timeout:.0f}s waiting for {what}")
        pause.wait(POLL)


class PrivateServer:
    """One private server; subclasses know how to install, start, stop and connect."""

    vendor = ""
    #: Django's vendor name (the ``db_vendor`` marker).
    django_vendor = ""

    def __init__(
        self, addresses: tuple[str, ...] = ("127.0.0.1",), settings: dict[str, str] | None = None
    ) -> None:
        self.port = free_port()
        self.root = Path(tempfile.mkdtemp(prefix=f"solid-restart-{self.vendor}-"))
        self.running = False
        #: The addresses the server listens on; the test's own connections use the first.
        self.addresses = addresses
        #: Server settings beyond the defaults (PostgreSQL ``-c name=value``, MariaDB
        #: ``--name=value``).
        self.settings = dict(settings or {})

    # -- life cycle (subclasses) -------------------------------------------------------------
    def install(self) -> None:
        raise NotImplementedError

    def start(self) -> None:
        """Start and return once it accepts connections."""
        raise NotImplementedError

    def stop(self, mode: str) -> None:
        """``fast``: a clean shutdown (sessions are terminated); ``immediate``: the server
        dies at once, as in a crash (recovery runs at the next start)."""
        raise NotImplementedError

    def kill(self) -> None:
        """Best effort, for teardown: stop the server however it is."""
        raise NotImplementedError

    def connect(self, database: str) -> Any:
        """A raw DB-API connection (autocommit) to ``database``."""
        raise NotImplementedError

    def url(self, database: str, host: str | None = None) -> str:
        """A django-environ URL of ``database``, through ``host`` (one of :attr:`addresses`;
        by default the first)."""
        raise NotImplementedError

    def create_database(self, name: str) -> None:
        raise NotImplementedError

    # -- shared -------------------------------------------------------------------------------
    def accepts_connections(self, database: str) -> bool:
        try:
            connection = self.connect(database)
        except Exception:
            return False
        try:
            cursor = connection.cursor()
            cursor.execute("SELECT 1")
            cursor.fetchall()
            return True
        except Exception:
            return False
        finally:
            connection.close()

    def destroy(self) -> None:
        try:
            self.kill()
        finally:
            self.running = False
            shutil.rmtree(self.root, ignore_errors=True)

    def log_tail(self, lines: int = 40) -> str:
        return ""


class PrivatePostgres(PrivateServer):
    vendor = "postgresql"
    django_vendor = "postgresql"

    def __init__(
        self,
        addresses: tuple[str, ...] = ("127.0.0.1",),
        settings: dict[str, str] | None = None,
        clients: tuple[str, ...] = (),
    ) -> None:
        super().__init__(addresses, settings)
        #: Networks (CIDR) besides loopback whose clients may connect (trusted, no password).
        self.clients = clients
        self.bindir = postgres_bindir()
        self.data = self.root / "data"
        self.log = self.root / "server.log"
        self.as_root = os.geteuid() == 0
        if self.as_root:
            user = pwd.getpwnam(POSTGRES_OS_USER)
            os.chown(self.root, user.pw_uid, user.pw_gid)

    def _command(self, tool: str, *args: str) -> list[str]:
        command = [str(self.bindir / tool), *args]
        return ["runuser", "-u", POSTGRES_OS_USER, "--", *command] if self.as_root else command

    def install(self) -> None:
        _run(
            self._command(
                "initdb",
                "-D",
                str(self.data),
                "-U",
                "postgres",
                "--auth=trust",
                "-E",
                "UTF8",
                "--locale=C",
                "--no-sync",
            ),
            "initdb",
        )
        if self.clients:
            with (self.data / "pg_hba.conf").open("a") as hba:
                for network in self.clients:
                    hba.write(f"host all all {network} trust\n")

    def start(self) -> None:
        options = (
            f"-p {self.port} -c listen_addresses={','.join(self.addresses)} "
            f"-c unix_socket_directories={self.root} -c fsync=off -c max_connections=80"
        )
        for name, value in self.settings.items():
            options += f" -c {name}={value}"
        _run(
            self._command(
                "pg_ctl",
                "-D",
                str(self.data),
                "-l",
                str(self.log),
                "-w",
                "-t",
                str(int(START_TIMEOUT)),
                "-o",
                options,
                "start",
            ),
            "pg_ctl start",
        )
        self.running = True
        _wait(lambda: self.accepts_connections("postgres"), "PostgreSQL to accept connections")

    def stop(self, mode: str) -> None:
        _run(
            self._command(
                "pg_ctl",
                "-D",
                str(self.data),
                "-m",
                mode,
                "-w",
                "-t",
                str(int(START_TIMEOUT)),
                "stop",
            ),
            f"pg_ctl stop -m {mode}",
        )
        self.running = False

    def kill(self) -> None:
        pid_file = self.data / "postmaster.pid"
        if not pid_file.exists():
            return
        try:
            self.stop("immediate")
        except Exception:
            try:
                os.kill(int(pid_file.read_text().split()[0]), signal.SIGKILL)
            except (OSError, ValueError, IndexError):
                pass

    def connect(self, database: str) -> Any:
        import psycopg

        return psycopg.connect(
            host=self.addresses[0],
            port=self.port,
            user="postgres",
            dbname=database,
            autocommit=True,
            connect_timeout=2,
        )

    def url(self, database: str, host: str | None = None) -> str:
        return f"postgres://postgres@{host or self.addresses[0]}:{self.port}/{database}"

    def create_database(self, name: str) -> None:
        connection = self.connect("postgres")
        try:
            connection.execute(f'CREATE DATABASE "{name}"')
        finally:
            connection.close()

    def log_tail(self, lines: int = 40) -> str:
        if not self.log.exists():
            return ""
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])


def postgres_bindir() -> Path:
    """The newest ``/usr/lib/postgresql/<version>/bin``, else where ``pg_ctl`` is on PATH."""
    found = sorted(
        Path("/usr/lib/postgresql").glob("*/bin/pg_ctl"),
        key=lambda path: int(path.parent.parent.name) if path.parent.parent.name.isdigit() else 0,
    )
    if found:
        return found[-1].parent
    on_path = shutil.which("pg_ctl")
    if on_path:
        return Path(on_path).parent
    raise RuntimeError("PostgreSQL server binaries (initdb, pg_ctl) not found")


class PrivateMariaDB(PrivateServer):
    vendor = "mariadb"
    django_vendor = "mysql"

    def __init__(
        self, addresses: tuple[str, ...] = ("127.0.0.1",), settings: dict[str, str] | None = None
    ) -> None:
        super().__init__(addresses, settings)
        self.mariadbd = _binary("mariadbd", "/usr/sbin/mariadbd", "mysqld", "/usr/sbin/mysqld")
        self.install_db = _binary("mariadb-install-db", "mysql_install_db")
        self.data = self.root / "data"
        self.socket = self.root / "mysqld.sock"
        self.log = self.root / "error.log"
        self.user = pwd.getpwuid(os.geteuid()).pw_name
        self.process: subprocess.Popen[bytes] | None = None

    def install(self) -> None:
        _run(
            [
                self.install_db,
                "--no-defaults",
                f"--datadir={self.data}",
                f"--user={self.user}",
                "--auth-root-authentication-method=normal",
                "--skip-test-db",
            ],
            "mariadb-install-db",
        )

    def start(self) -> None:
        command = [
            self.mariadbd,
            "--no-defaults",
            f"--datadir={self.data}",
            f"--socket={self.socket}",
            f"--port={self.port}",
            f"--bind-address={','.join(self.addresses)}",
            f"--pid-file={self.root / 'mysqld.pid'}",
            f"--log-error={self.log}",
            f"--user={self.user}",
            "--skip-grant-tables",
            "--skip-log-bin",
            "--innodb-buffer-pool-size=64M",
            "--innodb-flush-log-at-trx-commit=2",
            "--character-set-server=utf8mb4",
            "--collation-server=utf8mb4_unicode_ci",
            "--max-connections=200",
            *(f"--{name}={value}" for name, value in self.settings.items()),
        ]
        self.process = subprocess.Popen(
            command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
        )
        self.running = True

        def ready() -> bool:
            if self.process is not None and self.process.poll() is not None:
                raise RuntimeError(
                    f"mariadbd exited with {self.process.returncode}:\n{self.log_tail()}"
                )
            return self.accepts_connections("mysql")

        _wait(ready, "MariaDB to accept connections")

    def stop(self, mode: str) -> None:
        process = self.process
        if process is None:
            return
        process.send_signal(signal.SIGTERM if mode == "fast" else signal.SIGKILL)
        try:
            process.wait(START_TIMEOUT)
        except subprocess.TimeoutExpired:
            raise RuntimeError(f"mariadbd did not stop ({mode}):\n{self.log_tail()}") from None
        self.process = None
        self.running = False

    def kill(self) -> None:
        process, self.process = self.process, None
        if process is not None and process.poll() is None:
            process.kill()
            process.wait(30)

    def connect(self, database: str) -> Any:
        import MySQLdb

        connection = MySQLdb.connect(
            host=self.addresses[0],
            port=self.port,
            user="root",
            database=database,
            charset="utf8mb4",
            connect_timeout=2,
        )
        connection.autocommit(True)
        return connection

    def url(self, database: str, host: str | None = None) -> str:
        return f"mysql://root@{host or self.addresses[0]}:{self.port}/{database}"

    def create_database(self, name: str) -> None:
        connection = self.connect("mysql")
        try:
            connection.cursor().execute(
                f"CREATE DATABASE `{name}` CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci"
            )
        finally:
            connection.close()

    def log_tail(self, lines: int = 40) -> str:
        if not self.log.exists():
            return ""
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])


def _binary(*candidates: str) -> str:
    for candidate in candidates:
        found = shutil.which(candidate) or (candidate if Path(candidate).is_file() else None)
        if found:
            return found
    raise RuntimeError(f"none of {candidates} found")
