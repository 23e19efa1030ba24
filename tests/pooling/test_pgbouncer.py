"""PgBouncer in transaction-pooling mode in front of PostgreSQL (docs/scaling.md#pgbouncer).

A private PgBouncer (``pool_mode = transaction``, a server pool smaller than the clients)
stands between the test database and both a ``run_actor_worker`` subprocess and this
process's own calls (the alias ``pooled``). Behind it:

- the ``LISTEN`` wake-up probe fails and workers fall back to polling; enqueued messages
  still run, synchronous calls still return (also while a worker holds the actor);
- fencing still holds: a worker whose lease was taken over cannot commit;
- the Django settings the docs prescribe are the ones that work: server-side cursors off
  (``DISABLE_SERVER_SIDE_CURSORS``), no prepared statements (Django's default client-side
  binding), persistent connections allowed (``CONN_MAX_AGE``), since an idle client
  connection holds no server connection. Each is shown failing the other way.

PgBouncer is PostgreSQL's; a missing ``pgbouncer`` fails the test (``make sysdeps``
installs it).
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.db import DatabaseError, close_old_connections, connections
from django.utils import timezone

from solid_objects.lease import acquire
from solid_objects.models import Instance, Message
from solid_objects.passes import run_pass
from solid_objects.runtime import processes
from solid_objects.runtime.wakeup.transports import probe
from tests.factories import UserFactory
from tests.runtime.helpers import start_thread
from tests.support.pgbouncer import POOL_SIZE, PgBouncer
from tests.support.processes import Commands
from tests.support.processes import test_database_name as database_name
from tests.support.waiting import wait_until
from tests.testapp.actors.core import Blocker, Counter
from tests.wakeup.test_cross_process import SLOW_POLLING, measure

from .conftest import ALIASES, PREPARED, WITH_CURSORS

pytestmark = [
    pytest.mark.django_db(transaction=True, databases=ALIASES),
    pytest.mark.db_vendor("postgresql"),
    pytest.mark.slow,
]

#: The worker's database settings behind the pooler, as ``DATABASE_URL`` options.
CHILD_OPTIONS = {"disable_server_side_cursors": "True", "conn_max_age": "60"}


@pytest.fixture
def pooled_commands(tmp_path: Path, pgbouncer: PgBouncer) -> Iterator[Commands]:
    """Worker subprocesses whose ``default`` alias is the test database through PgBouncer
    (without the server-side binding a CI leg may switch on for direct connections)."""
    url = pgbouncer.url(database_name(), **CHILD_OPTIONS)
    started = Commands(
        tmp_path, extra_environment={"DATABASE_URL": url, "SOLID_TEST_PG_SERVER_BINDING": ""}
    )
    try:
        yield started
    finally:
        started.kill_all()


def entered(gate: Path) -> bool:
    return Path(f"{gate}.entered").exists()


def test_behind_transaction_pooling_workers_poll_and_everything_runs(
    pgbouncer, pooled, pooled_commands, solid_settings, tmp_path
):
    solid_settings(DATABASE=pooled)
    # The pooler is really in between: a direct session keeps its LISTEN, a pooled one not.
    assert probe("default").ok
    behind = probe(pooled)
    assert (behind.ok, behind.mode) == (False, "postgresql"), behind

    worker = pooled_commands.start("run_actor_worker", "--threads", "3")
    pooled_commands.wait_registered(worker, {"worker"})
    log = pooled_commands.log(worker)
    assert "wake-ups: the postgresql probe failed" in log, log
    assert "falling back to polling" in log

    # Enqueues of this process (through the pooler) run in the polling worker, in order.
    references = [Counter.ref(f"pooled-{n}") for n in range(4)]
    sent = [references[n % 4].enqueue().append(n) for n in range(20)]
    wait_until(
        lambda: all(message.outcome().status == "completed" for message in sent),
        what="the worker to run the enqueued messages",
        details=pooled_commands.logs,
    )
    assert [ref.snapshot().seen for ref in references] == [list(range(n, 20, 4)) for n in range(4)]

    # A synchronous call while the worker holds the actor: it waits (polling) for the
    # worker's commits and returns the durable result.
    gate = tmp_path / "gate"
    held = Blocker.ref("pooled-held")
    first = held.enqueue().hold_on_file(str(gate))
    wait_until(lambda: entered(gate), what="the worker to start the held turn")
    call = start_thread(lambda: held.sync(timeout=45).bump(), "sync-caller")
    wait_until(
        lambda: Message.objects.filter(instance_id=first.instance_id).count() == 2,
        what="the synchronous call's message",
    )
    gate.write_text("go")
    assert call.outcome() == 2
    assert first.outcome().result == 1
    # A synchronous call of an actor nobody holds (the caller runs it through the pooler).
    assert Counter.ref("pooled-sync").sync(timeout=30).add(5) == 5

    # Every worker session goes through the pooler, and the pooler serves them all with a
    # server pool smaller than the clients: idle persistent connections hold no server.
    database = database_name()
    names = {client["application_name"] for client in pgbouncer.clients(database)}
    assert {
        "solid_objects supervisor",
        "solid_objects worker actors-0",
        "solid_objects worker actors-2",
    } <= names, names
    assert len(pgbouncer.clients(database)) > POOL_SIZE
    assert 0 < len(pgbouncer.servers(database)) <= POOL_SIZE
    assert pooled_commands.terminate(worker) == 0


def test_a_direct_worker_hears_the_enqueues_sent_through_the_pooler(
    pooled, commands, solid_settings
):
    """Web processes behind the pooler, workers connected directly: the NOTIFY of an enqueue
    through the pooler reaches the workers' LISTEN (notifications are per database), so
    the workers keep their fast wake-ups. The worker polls every 5 s: only the hint can
    explain a turn that starts well before."""
    solid_settings(DATABASE=pooled)
    worker = commands.start("run_actor_worker", settings=SLOW_POLLING)
    commands.wait_registered(worker, {"worker"})
    assert "wake-ups: postgresql (probe" in commands.log(worker), commands.log(worker)
    measure(1, "pooled-warm-up", pause=0.0)
    latencies = measure(5, "pooled-notify")
    assert statistics.median(latencies) < SLOW_POLLING["IDLE_POLLING_INTERVAL"] / 2, latencies
    assert commands.terminate(worker) == 0


def test_fencing_holds_behind_transaction_pooling(
    pgbouncer, pooled, pooled_commands, solid_settings, tmp_path
):
    solid_settings(DATABASE=pooled)
    worker = pooled_commands.start("run_actor_worker")
    pooled_commands.wait_registered(worker, {"worker"})
    gate = tmp_path / "gate"
    ref = Blocker.ref("pooled-fenced")
    message = ref.enqueue().hold_on_file(str(gate))
    wait_until(lambda: entered(gate), what="the worker to start the turn")
    stale = Instance.objects.get(id=message.instance_id)
    assert stale.activation_owner_id is not None

    # The worker's lease runs out (its turn is still in flight) and this process takes the
    # actor over through the pooler: a new token, the next generation.
    Instance.objects.filter(id=message.instance_id).update(
        activation_expires_at=timezone.now() - timedelta(minutes=5)
    )
    owner = processes.register("worker", pooled)
    taken = wait_until(lambda: acquire(pooled, owner, [message.instance_id]), what="the takeover")
    fresh = Instance.objects.get(id=message.instance_id)
    assert fresh.activation_owner_id == owner != stale.activation_owner_id
    assert fresh.activation_generation == stale.activation_generation + 1

    gate.write_text("go")  # the stale turn returns and tries its fenced commit
    wait_until(
        lambda: "activation_lost" in pooled_commands.log(worker),
        what="the worker to lose its activation",
        details=pooled_commands.logs,
    )
    assert run_pass(taken).processed == 1  # attempt 2, here
    assert pooled_commands.terminate(worker) == 0  # any turn in flight has ended

    stored = Message.objects.get(id=message.id)
    assert (stored.attempt_count, stored.result) == (2, 1)
    assert ref.snapshot().hits == 1  # the stale commit changed nothing


def holding_the_server(bouncer: PgBouncer, read: Callable[[], Any]) -> Callable[[], Any]:
    """``read`` again while another client's open transaction keeps the server connection
    of the previous statement, so the pooler serves the next statement on another one."""

    def again() -> Any:
        with bouncer.connect(database_name()) as holder:
            holder.execute("SELECT 1")  # BEGIN: this client now holds that server
            try:
                return read()
            finally:
                holder.rollback()

    return again


def test_the_django_settings_transaction_pooling_needs(pgbouncer, pooled):
    import psycopg

    # An error of a server-side cursor's fetch is Django's; closing the cursor afterwards
    # fails the same way, raised by psycopg itself.
    errors = (DatabaseError, psycopg.Error)
    usernames = sorted(user.username for user in UserFactory.create_batch(3))

    # DISABLE_SERVER_SIDE_CURSORS: .iterator() outside a transaction opens a server-side
    # cursor WITH HOLD on one server connection; its next fetch may reach another.
    def iterate(alias: str) -> list[str]:
        rows = User.objects.using(alias).order_by("username").iterator(chunk_size=1)
        first = next(rows)
        rest = holding_the_server(pgbouncer, lambda: [user.username for user in rows])()
        return [first.username, *rest]

    assert connections[pooled].settings_dict["DISABLE_SERVER_SIDE_CURSORS"] is True
    assert iterate(pooled) == usernames
    with pytest.raises(errors, match=r"cursor .* does not exist"):
        iterate(WITH_CURSORS)

    # No prepared statements: Django's default (client-side binding, prepare_threshold
    # None). Prepared on one server connection, a statement is unknown on the others.
    def twice(alias: str) -> int:
        with connections[alias].cursor() as cursor:
            cursor.execute("SELECT %s::int", [7])
            cursor.fetchone()

        def second() -> int:
            with connections[alias].cursor() as cursor:
                cursor.execute("SELECT %s::int", [7])
                return int(cursor.fetchone()[0])

        return int(holding_the_server(pgbouncer, second)())

    assert twice(pooled) == 7
    assert connections[pooled].connection.prepare_threshold is None
    with pytest.raises(errors, match=r"prepared statement .* does not exist"):
        twice(PREPARED)

    # CONN_MAX_AGE: a persistent client connection is kept between requests and holds no
    # server connection while idle (SHOW CLIENTS: not linked to a server).
    connection = connections[pooled]
    assert connection.settings_dict["CONN_MAX_AGE"] == 60
    before = connection.connection
    close_old_connections()  # what Django does at the end of every request
    assert connection.connection is before
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")
    assert all(client["link"] == "" for client in pgbouncer.clients(database_name())), (
        pgbouncer.clients(database_name())
    )
