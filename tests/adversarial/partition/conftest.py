"""Fixtures of the partition test: the two hosts' network (namespaces and veth pairs), a
private server listening on their root-side addresses, and the run's processes; all torn
down whatever happens (processes, then the server, then the namespaces)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.adversarial.restart.harness import migrate
from tests.adversarial.restart.servers import PrivateMariaDB, PrivatePostgres, PrivateServer

from .harness import DATABASE, Partition, server_settings
from .network import Network, unavailable


@pytest.fixture
def network() -> Iterator[Network]:
    reason = unavailable()
    if reason:
        raise RuntimeError(reason)  # an error, never a skip: CI runs this as root
    network = Network()
    try:
        network.create()
        yield network
    finally:
        network.destroy()


def _server(server: PrivateServer) -> Iterator[PrivateServer]:
    try:
        server.install()
        server.start()
        migrate(server, DATABASE)
        yield server
    finally:
        server.destroy()


@pytest.fixture
def partition_postgres(network: Network) -> Iterator[PrivateServer]:
    addresses = ("127.0.0.1", *network.server_addresses)
    server = PrivatePostgres(addresses, server_settings("postgresql"), clients=(network.cidr,))
    yield from _server(server)


@pytest.fixture
def partition_mariadb(network: Network) -> Iterator[PrivateServer]:
    addresses = ("127.0.0.1", *network.server_addresses)
    yield from _server(PrivateMariaDB(addresses, server_settings("mariadb")))


def _run(server: PrivateServer, network: Network, directory: Path) -> Iterator[Partition]:
    run = Partition(server, network, directory)
    try:
        yield run
    finally:
        run.kill_all()


@pytest.fixture
def postgres_partition(
    partition_postgres: PrivateServer, network: Network, tmp_path: Path
) -> Iterator[Partition]:
    yield from _run(partition_postgres, network, tmp_path)


@pytest.fixture
def mariadb_partition(
    partition_mariadb: PrivateServer, network: Network, tmp_path: Path
) -> Iterator[Partition]:
    yield from _run(partition_mariadb, network, tmp_path)
