"""Gap safety: catch-up never passes a position whose transaction may still commit.

Real threads with their own connections, synchronised with events: writer 1 takes a position
in an open transaction and waits; writer 2 commits a higher one; catch-up runs in between.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator
from contextlib import nullcontext
from typing import Any

import pytest
from django.db import connection, connections, transaction

from tests.testapp.projections import Ledger
from tilttek_activity import ActivityEntry, catch_up, entries, record_activity
from tilttek_activity.db.generic import GenericBackend
from tilttek_activity.models import Checkpoint

from .conftest import in_thread
from .factories import ActivityFactory

pytestmark = pytest.mark.django_db(transaction=True)


class OpenWriter:
    """A writer holding a position in an open transaction until told to commit or roll back."""

    def __init__(self, *, commit: bool = True) -> None:
        self.took = threading.Event()
        self.release = threading.Event()
        self.entry: ActivityEntry | None = None
        self.commit = commit
        self.thread, self.errors = in_thread(self._run)

    def _run(self) -> None:
        with transaction.atomic():
            self.entry = record_activity(**ActivityFactory()).entry
            self.took.set()
            self.release.wait()
            if not self.commit:
                transaction.set_rollback(True)

    @property
    def position(self) -> int:
        self.took.wait()
        assert self.entry is not None, self.errors
        return self.entry.position

    def finish(self) -> None:
        self.release.set()
        self.thread.join()
        assert not self.errors, self.errors


@pytest.fixture
def open_writer(transactional_db: None) -> Iterator[Callable[..., OpenWriter]]:
    """Start ``OpenWriter`` threads; any still open are released (and joined) at teardown,
    before the database is flushed, even when the test failed half-way."""
    writers: list[OpenWriter] = []

    def start(*, commit: bool = True) -> OpenWriter:
        writer = OpenWriter(commit=commit)
        writers.append(writer)
        return writer

    yield start
    for writer in writers:
        writer.release.set()
        writer.thread.join()


def checkpoint() -> int:
    return Checkpoint.objects.get(projection=Ledger.name).position


@pytest.mark.db_vendor("postgresql", "mysql")
def test_out_of_order_commits_are_never_skipped(
    ledger: Ledger,
    skipped_holes: list[dict[str, Any]],
    activity_settings: Any,
    caplog: Any,
    open_writer: Callable[..., OpenWriter],
) -> None:
    activity_settings(GAP_WARN_SECONDS=1e-6)
    writer1 = open_writer()
    first = writer1.position
    second = record_activity(**ActivityFactory()).entry  # writer 2 commits a higher position
    assert second.position > first
    try:
        for _ in range(3):  # however often it runs, catch-up waits for writer 1
            with caplog.at_level(logging.WARNING, logger="tilttek_activity"):
                result = catch_up(Ledger.name)[Ledger.name]
            assert result.waiting_on == (first, first)
            assert result.applied == 0 and result.skipped == []
            assert Ledger.store.applied == []
            assert checkpoint() < first
        assert f"position {first} has been missing" in caplog.text
    finally:
        writer1.finish()  # commits
    result = catch_up(Ledger.name)[Ledger.name]
    assert result.waiting_on is None
    assert Ledger.store.applied == [first, second.position]
    assert skipped_holes == []


@pytest.mark.db_vendor("sqlite")
def test_sqlite_writers_take_positions_in_commit_order(
    ledger: Ledger, skipped_holes: list[dict[str, Any]], open_writer: Callable[..., OpenWriter]
) -> None:
    """SQLite serialises writers: writer 2 cannot take a position until writer 1 has ended,
    so positions are committed in order and a catch-up can never see an open hole."""
    writer1 = open_writer()
    first = writer1.position
    started = threading.Event()
    second: list[ActivityEntry] = []

    def writer2() -> None:
        started.set()
        second.append(record_activity(**ActivityFactory()).entry)

    thread, errors = in_thread(writer2)
    started.wait()
    assert entries(kind=None, after_position=first - 1) == []  # writer 1 is not visible yet
    writer1.finish()
    thread.join()
    assert not errors, errors
    assert second[0].position > first
    catch_up(Ledger.name)
    assert Ledger.store.applied == [first, second[0].position]
    assert skipped_holes == []


def test_a_rolled_back_position_is_passed_once_provably_dead(
    ledger: Ledger,
    skipped_holes: list[dict[str, Any]],
    vendor: str,
    caplog: Any,
    open_writer: Callable[..., OpenWriter],
) -> None:
    writer1 = open_writer(commit=False)
    first = writer1.position
    if vendor == "sqlite":
        writer1.finish()  # writers serialise: writer 2 can only write once writer 1 is done
        second = record_activity(**ActivityFactory()).entry
        # SQLite rolls sqlite_sequence back with the insert: the position is reused, no hole.
        assert second.position == first
        catch_up(Ledger.name)
        assert Ledger.store.applied == [second.position]
        assert skipped_holes == []
        return
    second = record_activity(**ActivityFactory()).entry
    assert catch_up(Ledger.name)[Ledger.name].waiting_on == (first, first)  # still alive
    writer1.finish()  # rolls back: the hole can never fill
    with caplog.at_level(logging.INFO, logger="tilttek_activity"):
        result = catch_up(Ledger.name)[Ledger.name]
    assert result.skipped == [(first, first)] and result.waiting_on is None
    assert Ledger.store.applied == [second.position]
    assert [(s["projection"], s["start"], s["end"]) for s in skipped_holes] == [
        (Ledger.name, first, first)
    ]
    assert "ended" in skipped_holes[0]["reason"]
    assert f"passed missing journal position(s) {first}" in caplog.text


@pytest.mark.db_vendor("postgresql", "mysql")
def test_a_hole_waits_only_for_transactions_running_when_it_was_seen(
    ledger: Ledger, skipped_holes: list[dict[str, Any]], open_writer: Callable[..., OpenWriter]
) -> None:
    """Under continuous load some transaction is always running: a hole must not wait for
    transactions that started after it was seen (they cannot hold it)."""
    writer1 = open_writer(commit=False)
    first = writer1.position
    second = record_activity(**ActivityFactory()).entry
    assert catch_up(Ledger.name)[Ledger.name].waiting_on == (first, first)
    writer3 = open_writer()  # starts after the hole was seen, takes a higher position
    third = writer3.position
    try:
        writer1.finish()
        result = catch_up(Ledger.name)[Ledger.name]
        assert result.skipped == [(first, first)]
        assert Ledger.store.applied == [second.position]
    finally:
        writer3.finish()
    catch_up(Ledger.name)
    assert Ledger.store.applied == [second.position, third]


def test_a_deleted_row_leaves_a_hole_that_is_passed_and_reported(
    ledger: Ledger, skipped_holes: list[dict[str, Any]]
) -> None:
    a, b, c = (record_activity(**ActivityFactory()).entry for _ in range(3))
    with connection.cursor() as cursor:
        cursor.execute("DELETE FROM tilttek_activity_entry WHERE position = %s", [b.position])
    result = catch_up(Ledger.name)[Ledger.name]
    assert result.skipped == [(b.position, b.position)]
    assert Ledger.store.applied == [a.position, c.position]
    assert [(s["start"], s["end"]) for s in skipped_holes] == [(b.position, b.position)]


@pytest.mark.parametrize("in_transaction", [False, True], ids=["autocommit", "atomic"])
def test_a_duplicate_costs_no_position_or_its_hole_is_passed(
    ledger: Ledger, skipped_holes: list[dict[str, Any]], vendor: str, in_transaction: bool
) -> None:
    item = ActivityFactory()
    first = record_activity(**item).entry
    with transaction.atomic() if in_transaction else nullcontext():
        assert record_activity(**item).created is False
    following = record_activity(**ActivityFactory()).entry
    # InnoDB allocates the auto-increment before the unique check: an autocommit duplicate
    # (a bare INSERT IGNORE) burns a position. Inside a transaction the key is read first.
    burnt = vendor == "mysql" and not in_transaction
    assert following.position == first.position + (2 if burnt else 1)
    result = catch_up(Ledger.name)[Ledger.name]
    assert Ledger.store.applied == [first.position, following.position]
    expected = [(first.position + 1, first.position + 1)] if burnt else []
    assert result.skipped == expected
    assert [(s["start"], s["end"]) for s in skipped_holes] == expected


def test_without_evidence_a_hole_is_passed_after_the_settle_time(
    ledger: Ledger,
    skipped_holes: list[dict[str, Any]],
    activity_settings: Any,
    monkeypatch: Any,
    caplog: Any,
) -> None:
    """Backends that cannot tell which transactions run (other databases, MySQL without the
    PROCESS privilege) pass a hole once it has been missing for GAP_SETTLE_SECONDS."""
    monkeypatch.setattr(
        "tilttek_activity.catchup.backend_for", lambda alias: GenericBackend(connections[alias])
    )
    a, b, c = (record_activity(**ActivityFactory()).entry for _ in range(3))
    with connection.cursor() as cursor:
        cursor.execute("DELETE FROM tilttek_activity_entry WHERE position = %s", [b.position])
    activity_settings(GAP_SETTLE_SECONDS=3600)
    result = catch_up(Ledger.name)[Ledger.name]
    assert result.waiting_on == (b.position, b.position)
    assert Ledger.store.applied == [a.position]
    activity_settings(GAP_SETTLE_SECONDS=0)
    with caplog.at_level(logging.WARNING, logger="tilttek_activity"):
        result = catch_up(Ledger.name)[Ledger.name]
    assert result.skipped == [(b.position, b.position)]
    assert Ledger.store.applied == [a.position, c.position]
    assert "GAP_SETTLE_SECONDS" in skipped_holes[0]["reason"]
    assert "GAP_SETTLE_SECONDS" in caplog.text


@pytest.mark.db_vendor("postgresql", "mysql")
def test_no_evidence_inside_a_transaction_falls_back_to_settling(
    ledger: Ledger, activity_settings: Any, vendor: str
) -> None:
    """MySQL cannot prove its INNODB_TRX view fresh from inside an older transaction."""
    from tilttek_activity.db import backend_for

    backend = backend_for("default")
    with transaction.atomic():
        evidence = backend.transaction_evidence(set())
    assert (evidence is None) == (vendor == "mysql")
    assert backend.transaction_evidence(set()) is not None
