"""Fixtures of the restart tests: one private server per test module (started in the test
session, never the machine's services) with the project's schema, and the processes of a
run, all torn down whatever happens."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from .harness import Run, migrate
from .servers import PrivateMariaDB, PrivatePostgres, PrivateServer


def _server(server: PrivateServer) -> Iterator[PrivateServer]:
    try:
        server.install()
        server.start()
        migrate(server)
        yield server
    finally:
        server.destroy()


@pytest.fixture(scope="module")
def private_postgres() -> Iterator[PrivateServer]:
    yield from _server(PrivatePostgres())


@pytest.fixture(scope="module")
def private_mariadb() -> Iterator[PrivateServer]:
    yield from _server(PrivateMariaDB())


def _run(server: PrivateServer, directory: Path) -> Iterator[Run]:
    run = Run(server, directory)
    try:
        yield run
    finally:
        run.kill_all()
        if not server.running:  # a failure in the middle of a restart: leave it usable
            server.start()


@pytest.fixture
def postgres_run(private_postgres: PrivateServer, tmp_path: Path) -> Iterator[Run]:
    yield from _run(private_postgres, tmp_path)


@pytest.fixture
def mariadb_run(private_mariadb: PrivateServer, tmp_path: Path) -> Iterator[Run]:
    yield from _run(private_mariadb, tmp_path)
