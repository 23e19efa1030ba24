"""Concurrent writers of one idempotency key, inside transactions that roll back.

§B1: a write is recorded once per key and never aborts the caller's transaction. The
dangerous interleaving (issue 9, defect 2): T1 records key K inside ``atomic()`` and keeps
its transaction open; T2..Tn record K inside their own ``atomic()`` blocks and wait on T1's
row; T1 rolls back. On InnoDB, every waiter then holds a gap lock where K was and each
one's insert waits for the others': a deadlock (1213) that rolls back a waiter's *whole*
transaction. The journal serialises writers of one key before the insert (see
:mod:`tilttek_activity.db.mysql`), so no waiter ever aborts.

Each round lines the threads up with barriers and, where the database can show it
(PostgreSQL's ``pg_stat_activity``, MariaDB's ``INNODB_TRX``/``PROCESSLIST``), waits until
every waiter is really blocked before T1 rolls back. SQLite serialises whole write
transactions, so there the waiters queue on the database lock (not observable; the barrier
only releases them together) and the same assertions hold.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable
from contextlib import nullcontext
from dataclasses import dataclass, field
from typing import Any

import pytest
from django.db import connection, connections, transaction

from tests.support.waiting import wait_until
from tilttek_activity import (
    ActivityNotFound,
    Recorded,
    cancel_activity,
    record_activities,
    record_activity,
)
from tilttek_activity.models import Entry

#: Upper bound of any wait (the machine is shared and slow); events end waits early.
PATIENCE = 30.0


@dataclass
class Waiter:
    """What one contending thread saw."""

    name: str
    #: end its own transaction with a rollback (after recording K)
    rolls_back: bool = False
    session: Any = None
    #: cancel_activity raised ActivityNotFound
    not_found: bool = False
    #: writes outside any transaction
    autocommit: bool = False
    recorded: Recorded | None = None
    before_key: str = ""
    after_key: str = ""
    error: BaseException | None = None
    done: threading.Event = field(default_factory=threading.Event)


def session_id() -> Any:
    """This thread's server session (the id the catalogue views show)."""
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute("SELECT pg_backend_pid()")
        elif connection.vendor == "mysql":
            cursor.execute("SELECT CONNECTION_ID()")
        else:
            return None
        return cursor.fetchone()[0]


def blocked(sessions: list[Any]) -> int:
    """How many of these sessions are waiting for a lock right now (0 where unknowable)."""
    if connection.vendor == "postgresql":
        sql = (
            "SELECT count(*) FROM pg_stat_activity "
            "WHERE pid = ANY(%s) AND wait_event_type IN ('Lock', 'LWLock')"
        )
        params: list[Any] = [sessions]
    elif connection.vendor == "mysql":
        marks = ", ".join(["%s"] * len(sessions))
        sql = (
            "SELECT count(*) FROM information_schema.PROCESSLIST p "
            "LEFT JOIN information_schema.INNODB_TRX t ON t.trx_mysql_thread_id = p.ID "
            f"WHERE p.ID IN ({marks}) AND (t.trx_state = 'LOCK WAIT' OR p.STATE = 'User lock')"
        )
        params = list(sessions)
    else:
        return 0
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return int(cursor.fetchone()[0])


def wait_for(predicate: Callable[[], Any], what: str) -> None:
    """:func:`wait_until` ``predicate``. On MySQL/MariaDB no faster than every 0.15 s:
    ``INNODB_TRX`` is a cache refreshed only after 0.1 s without readers, so a faster poll
    reads it stale forever."""
    interval = 0.15 if connection.vendor == "mysql" else 0.01
    wait_until(predicate, timeout=PATIENCE, interval=interval, what=what)


def payload(key: str) -> dict[str, Any]:
    return {
        "member": "tests.member:race",
        "verb": "race.won",
        "object": "tests.prize:1",
        "context": {"key": key},
        "idempotency_key": key,
    }


def contend(
    waiters: int,
    *,
    holder_commits: bool = False,
    bulk: bool = False,
    rollers: int = 0,
    cancel: bool = False,
    autocommit: int = 0,
) -> tuple[str, list[Waiter]]:
    """One round: a holder records K and keeps its transaction open, ``waiters`` threads
    record K inside their own transactions (each also writing a row of its own before and
    after; with ``bulk`` all three in one ``record_activities`` call; with ``cancel`` they
    cancel K instead), the holder rolls back (or commits) once every waiter is blocked. The
    first ``rollers`` waiters roll their own transaction back too, so the writers queued
    behind them must go on after them. The last ``autocommit`` waiters open no transaction:
    each of their writes is its own (on MySQL/MariaDB a bare ``INSERT IGNORE`` whose
    deadlocks are retried, since they lose nothing)."""
    # The waiters' own keys sort next to K in the unique index, the later ones in the gap
    # just before K: where InnoDB's gap locks on K would make those inserts deadlock.
    round_id = uuid.uuid4()
    key = f"race:{round_id}:k"
    contenders = [
        Waiter(f"T{i + 2}", rolls_back=i < rollers, autocommit=i >= waiters - autocommit)
        for i in range(waiters)
    ]
    held = threading.Event()
    release = threading.Event()
    ready = threading.Barrier(waiters + 1, timeout=PATIENCE)
    holder_error: list[BaseException] = []

    def hold() -> None:
        try:
            with transaction.atomic():
                record_activity(**payload(key))
                held.set()
                release.wait(PATIENCE)
                if not holder_commits:
                    transaction.set_rollback(True)
        except BaseException as exc:
            holder_error.append(exc)
            held.set()
        finally:
            connections.close_all()

    def contend_as(waiter: Waiter) -> None:
        try:
            waiter.session = session_id()
            held.wait(PATIENCE)
            ready.wait()
            waiter.before_key = f"race:{round_id}:a:{waiter.name}"
            waiter.after_key = f"race:{round_id}:b:{waiter.name}"
            before = {"member": "tests.member:own", "verb": "race.before"}
            after = {"member": "tests.member:own", "verb": "race.after"}
            with nullcontext() if waiter.autocommit else transaction.atomic():
                if bulk:
                    results = record_activities(
                        [
                            {**before, "idempotency_key": waiter.before_key},
                            payload(key),
                            {**after, "idempotency_key": waiter.after_key},
                        ]
                    )
                    waiter.recorded = results[1]
                else:
                    record_activity(**before, idempotency_key=waiter.before_key)
                    if cancel:
                        try:
                            waiter.recorded = cancel_activity(key)
                        except ActivityNotFound:
                            waiter.not_found = True
                    else:
                        waiter.recorded = record_activity(**payload(key))
                    record_activity(**after, idempotency_key=waiter.after_key)
                if waiter.rolls_back:
                    transaction.set_rollback(True)
        except BaseException as exc:  # reported by the test
            waiter.error = exc
        finally:
            waiter.done.set()
            connections.close_all()

    holder = threading.Thread(target=hold, daemon=True)
    holder.start()
    threads = [threading.Thread(target=contend_as, args=(w,), daemon=True) for w in contenders]
    for thread in threads:
        thread.start()
    try:
        ready.wait()
        sessions = [w.session for w in contenders]
        if cancel and connection.vendor == "postgresql":
            # A PostgreSQL read never waits for the uncommitted recording: every canceller
            # must have finished before the holder ends, or a late one would find it.
            wait_for(
                lambda: all(w.done.is_set() for w in contenders),
                f"{waiters} cancellers of {key!r} to finish while the holder is open",
            )
        elif connection.vendor in ("postgresql", "mysql"):
            wait_for(
                lambda: blocked(sessions) == waiters or any(w.done.is_set() for w in contenders),
                f"{waiters} writers of {key!r} to block on the holder",
            )
    finally:
        release.set()
        holder.join(PATIENCE)
        for thread in threads:
            thread.join(PATIENCE)
    assert not holder_error, holder_error
    return key, contenders


def check_round(key: str, contenders: list[Waiter], *, holder_commits: bool = False) -> list[str]:
    """Every violation of §B1 this round showed (empty when none): a waiter whose
    transaction failed, lost its own writes (or kept them after rolling back), not exactly
    one entry for the key, not exactly one committed writer reporting ``created`` (none when
    the holder committed), a committed writer handed another entry than the kept one."""
    problems = []
    for waiter in contenders:
        if waiter.error is not None:
            problems.append(f"{waiter.name}: {type(waiter.error).__name__}: {waiter.error}")
            continue
        expected = 0 if waiter.rolls_back else 1
        for own in (waiter.before_key, waiter.after_key):
            if Entry.objects.filter(idempotency_key=own).count() != expected:
                problems.append(f"{waiter.name}: its own write {own!r} is not as it ended")
    stored = list(Entry.objects.filter(idempotency_key=key).values_list("position", flat=True))
    if len(stored) != 1:
        problems.append(f"{len(stored)} entries stored for {key!r}")
    committed = [w.recorded for w in contenders if w.recorded is not None and not w.rolls_back]
    created = [r for r in committed if r.created]
    if len(created) != (0 if holder_commits else 1):
        problems.append(f"{len(created)} committed writers of {key!r} report created=True")
    if stored and any(r.entry.position != stored[0] for r in committed):
        problems.append(f"a writer of {key!r} returned an entry that is not the kept one")
    return problems


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(
    ("rounds", "waiters", "options"),
    [
        (8, 2, {}),
        (6, 6, {}),
        (4, 5, {"bulk": True}),
        (4, 5, {"rollers": 2}),
        (4, 5, {"autocommit": 5}),
        (4, 5, {"autocommit": 5, "bulk": True}),
        (4, 6, {"autocommit": 3}),
    ],
    ids=[
        "pairs",
        "crowds",
        "bulk-writers",
        "waiters-rolling-back-too",
        "autocommit-writers",
        "bulk-writers-outside-transactions",
        "mixed",
    ],
)
def test_waiters_on_a_rolled_back_writer_of_their_key_never_abort(
    rounds: int, waiters: int, options: dict[str, Any]
) -> None:
    problems = []
    for number in range(rounds):
        key, contenders = contend(waiters, **options)
        problems.extend(f"round {number}: {p}" for p in check_round(key, contenders))
    assert not problems, "\n".join(problems)


@pytest.mark.django_db(transaction=True)
def test_waiters_on_a_committed_writer_of_their_key_get_its_entry() -> None:
    """The same crowd when the holder commits: every waiter gets the holder's entry
    (``created=False``) and its transaction goes on (on InnoDB a duplicate's gap lock used
    to deadlock the waiters' next inserts)."""
    problems = []
    for number in range(3):
        key, contenders = contend(4, holder_commits=True)
        problems.extend(
            f"round {number}: {p}" for p in check_round(key, contenders, holder_commits=True)
        )
    assert not problems, "\n".join(problems)


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("holder_commits", [False, True], ids=["rolled-back", "committed"])
def test_cancellers_waiting_on_an_uncommitted_recording_never_abort(holder_commits: bool) -> None:
    """``cancel_activity(K)`` while K's recording is still uncommitted: on MySQL/MariaDB and
    SQLite it waits for it, so when it rolls back every canceller gets ActivityNotFound and
    when it commits exactly one writes the cancellation; on PostgreSQL a read does not wait
    for an uncommitted row, so every canceller finds nothing recorded yet. Either way each
    canceller's transaction goes on and commits its own writes (on MariaDB a shared-lock
    wait there left gap locks that deadlocked them)."""
    found = holder_commits and connection.vendor != "postgresql"
    problems = []
    for number in range(4):
        key, contenders = contend(4, holder_commits=holder_commits, cancel=True)
        for waiter in contenders:
            if waiter.error is not None:
                problems.append(
                    f"{number}: {waiter.name}: {type(waiter.error).__name__}: {waiter.error}"
                )
                continue
            if waiter.not_found == found:
                problems.append(f"{number}: {waiter.name}: not_found={waiter.not_found}")
            for own in (waiter.before_key, waiter.after_key):
                if Entry.objects.filter(idempotency_key=own).count() != 1:
                    problems.append(f"{number}: {waiter.name}: its own write {own!r} is lost")
        kinds = sorted(Entry.objects.filter(idempotency_key=key).values_list("kind", flat=True))
        recorded = ["recorded"] if holder_commits else []
        if kinds != (["cancelled", *recorded] if found else recorded):
            problems.append(f"{number}: {key!r} is stored as {kinds}")
        created = [w for w in contenders if w.recorded is not None and w.recorded.created]
        if len(created) != (1 if found else 0):
            problems.append(f"{number}: {len(created)} cancellers report created=True")
    assert not problems, "\n".join(problems)


@pytest.mark.django_db(transaction=True)
@pytest.mark.db_vendor("mysql")
@pytest.mark.parametrize("holder_commits", [False, True], ids=["rolled-back", "committed"])
def test_mysql_statement_by_statement_protocol_never_aborts_either(
    monkeypatch: pytest.MonkeyPatch, holder_commits: bool
) -> None:
    """MySQL has no compound statements: the same protocol runs one statement per step
    (forced here on MariaDB)."""
    from tilttek_activity.db.mysql import MySQLBackend

    monkeypatch.setattr(MySQLBackend, "compound", property(lambda self: False))
    problems = []
    for number in range(4):
        key, contenders = contend(4, holder_commits=holder_commits)
        problems.extend(
            f"round {number}: {p}"
            for p in check_round(key, contenders, holder_commits=holder_commits)
        )
    assert not problems, "\n".join(problems)
