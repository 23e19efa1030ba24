"""MySQL/MariaDB: the write-once protocol of ``tilttek_activity.db.innodb`` in its corners.

Each test runs the MariaDB compound statement and the statement-by-statement version MySQL
uses (forced here with ``compound=False``). The races themselves are in
``tests/adversarial/test_journal_races.py``.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest
from django.db import OperationalError, connection, connections, transaction

from tilttek_activity import InvalidActivity, record_activities, record_activity
from tilttek_activity.db import backend_for
from tilttek_activity.db.innodb import lock_name
from tilttek_activity.db.mysql import MySQLBackend
from tilttek_activity.models import Entry
from tilttek_activity.validation import Draft, validate_activity

from .factories import ActivityFactory

pytestmark = [pytest.mark.db_vendor("mysql")]


@pytest.fixture(params=[True, False], ids=["compound", "stepwise"])
def compound(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> bool:
    monkeypatch.setattr(MySQLBackend, "compound", property(lambda self: request.param))
    return bool(request.param)


def draft(**changes: Any) -> Draft:
    now = datetime.now(UTC).replace(microsecond=0)
    fine = validate_activity(**ActivityFactory(), now=now, max_future=None)
    return dataclasses.replace(fine, **changes)


def rows(key: str) -> int:
    return Entry.objects.filter(idempotency_key=key).count()


def mutex(key: str, kind: str = "recorded") -> str:
    return lock_name(str(connection.settings_dict["NAME"]), kind, key)


@pytest.fixture
def held_mutex() -> Iterator[Any]:
    """``hold(key)`` takes that key's mutex on another connection until the test ends."""
    release = threading.Event()
    threads = []

    def hold(key: str) -> None:
        taken = threading.Event()

        def run() -> None:
            try:
                with connection.cursor() as cursor:
                    cursor.execute("SELECT GET_LOCK(%s, 10)", [mutex(key)])
                    assert cursor.fetchone()[0] == 1
                    taken.set()
                    release.wait(30)
                    cursor.execute("DO RELEASE_LOCK(%s)", [mutex(key)])
            finally:
                connections.close_all()

        thread = threading.Thread(target=run, daemon=True)
        thread.start()
        threads.append(thread)
        assert taken.wait(30)

    yield hold
    release.set()
    for thread in threads:
        thread.join(30)


@pytest.mark.django_db
@pytest.mark.parametrize("bulk", [False, True], ids=["single", "bulk"])
def test_a_value_insert_ignore_would_coerce_is_refused_and_undone(
    compound: bool, bulk: bool
) -> None:
    """IGNORE turns a data error into a warning and stores a coerced value: any warning
    but a duplicate undoes what the statement wrote and raises (these drafts skipped
    validation on purpose)."""
    fine, too_long = draft(), draft(verb="v" * 200)
    with pytest.raises(InvalidActivity) as caught:
        backend_for(connection.alias).insert_once([fine, too_long] if bulk else [too_long])
    assert caught.value.field == "verb"
    assert rows(fine.idempotency_key) == rows(too_long.idempotency_key) == 0
    assert backend_for(connection.alias).insert_once([fine]).created


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("bulk", [False, True], ids=["single", "bulk"])
def test_waiting_too_long_for_a_key_is_a_lock_wait_timeout_that_leaves_the_transaction_usable(
    compound: bool, bulk: bool, held_mutex: Any
) -> None:
    """Another session holds the key's mutex past ``innodb_lock_wait_timeout``: the write
    fails like an InnoDB lock wait (1205), wrote nothing, released every mutex it took, and
    the caller's transaction goes on."""
    contested, other = ActivityFactory(), ActivityFactory()
    held_mutex(contested["idempotency_key"])
    with connection.cursor() as cursor:
        cursor.execute("SET SESSION innodb_lock_wait_timeout = 1")
    try:
        with transaction.atomic():
            before = record_activity(**ActivityFactory())
            with pytest.raises(OperationalError) as caught:
                if bulk:
                    record_activities([other, contested])
                else:
                    record_activity(**contested)
            assert caught.value.args[0] == 1205
            after = record_activity(**other)
        assert before.created and after.created
        assert rows(contested["idempotency_key"]) == 0
        with connection.cursor() as cursor:  # no mutex left behind by the failed write
            cursor.execute(
                "SELECT IS_USED_LOCK(%s) = CONNECTION_ID()", [mutex(other["idempotency_key"])]
            )
            assert not cursor.fetchone()[0]
    finally:
        with connection.cursor() as cursor:
            cursor.execute("SET SESSION innodb_lock_wait_timeout = DEFAULT")


@pytest.mark.django_db(transaction=True)
def test_an_error_inside_the_compound_statement_releases_the_mutexes(compound: bool) -> None:
    """A lock wait timeout in the locking read (another transaction holds the row): the
    error is raised unchanged and the key's mutex is free again."""
    item = ActivityFactory()
    inserted, release = threading.Event(), threading.Event()

    def hold_the_row() -> None:
        try:
            with transaction.atomic():
                record_activity(**item)
                inserted.set()
                release.wait(30)
        finally:
            connections.close_all()

    thread = threading.Thread(target=hold_the_row, daemon=True)
    thread.start()
    assert inserted.wait(30)
    with connection.cursor() as cursor:
        cursor.execute("SET SESSION innodb_lock_wait_timeout = 1")
    try:
        with pytest.raises(OperationalError) as caught:
            record_activity(**item)
        assert caught.value.args[0] == 1205
        with connection.cursor() as cursor:
            cursor.execute("SELECT IS_FREE_LOCK(%s)", [mutex(item["idempotency_key"])])
            assert cursor.fetchone()[0] == 1
    finally:
        release.set()
        thread.join(30)
        with connection.cursor() as cursor:
            cursor.execute("SET SESSION innodb_lock_wait_timeout = DEFAULT")
    assert record_activity(**item).created is False  # the holder committed: it is kept


@pytest.mark.django_db
def test_mutex_names_fit_mysql_and_tell_databases_kinds_and_keys_apart() -> None:
    names = {
        lock_name("db", "recorded", "k"),
        lock_name("db", "recorded", "k "),
        lock_name("db", "cancelled", "k"),
        lock_name("other", "recorded", "k"),
        lock_name("db", "recorded", "k" * 255),
    }
    assert len(names) == 5
    assert all(len(name) <= 64 and name.startswith("tilttek_activity:") for name in names)


@pytest.mark.django_db
def test_a_row_written_without_the_mutex_is_returned_as_kept(monkeypatch: Any) -> None:
    """IGNORE is only the guard against writers that skip the mutex (an older version):
    when the insert meets such a writer's row, the kept row is read and returned. Simulated
    by hiding the row from the compound statement's reads."""
    from tilttek_activity.db import innodb

    item = ActivityFactory()
    kept = record_activity(**item).entry
    render = innodb._render_one

    def blind_reads() -> str:
        where = "`idempotency_key` = %s AND `kind` = %s"
        sql = render()
        sql = sql.replace(f"WHERE {where};", f"WHERE {where} AND 1 = 0;")
        return sql.replace(f"WHERE {where} FOR UPDATE;", f"WHERE {where} AND 1 = 0 FOR UPDATE;")

    monkeypatch.setattr(innodb, "_render_one", blind_reads)
    again = record_activity(**item)
    assert again.created is False and again.entry == kept
    assert rows(item["idempotency_key"]) == 1
