"""Writing once: record_activity, record_activities, cancel_activity."""

from __future__ import annotations

import math
import threading
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest
from django.db import connection, transaction

from tests.support.statements import capturing_statements
from tilttek_activity import (
    ActivityNotFound,
    IdempotencyConflict,
    InvalidActivity,
    activity_cancelled,
    activity_recorded,
    cancel_activity,
    entries,
    record_activities,
    record_activity,
    reference,
)
from tilttek_activity.models import Entry

from .conftest import in_thread, statements
from .factories import ActivityFactory, UserFactory

#: Statements for a duplicate: the insert-once statement, then the read of the kept row; on
#: MariaDB one compound statement does both (and serialises writers of the key). A new
#: entry is one statement everywhere.
DUPLICATE_STATEMENTS = {"postgresql": 2, "sqlite": 2, "mysql": 1}


def rows(key: str) -> int:
    return Entry.objects.filter(idempotency_key=key).count()


@pytest.mark.django_db
class TestRecordActivity:
    def test_records_an_entry_and_returns_it(self) -> None:
        moment = datetime(2024, 5, 1, 12, 30, 15, 987654, tzinfo=timezone(timedelta(hours=2)))
        recorded = record_activity(
            "auth.user:42",
            "order.placed",
            object="shop.order:7",
            quantity=3,
            context={"total": "19.90", "items": [1, 2]},
            occurred_at=moment,
            idempotency_key="order:7:placed",
        )
        assert recorded.created is True
        entry = recorded.entry
        assert entry.kind == "recorded"
        assert (entry.member, entry.verb, entry.object) == (
            "auth.user:42",
            "order.placed",
            "shop.order:7",
        )
        assert entry.quantity == 3
        assert entry.context == {"total": "19.90", "items": [1, 2]}
        # stored in UTC, truncated to the second
        assert entry.occurred_at == datetime(2024, 5, 1, 10, 30, 15, tzinfo=UTC)
        assert entry.recorded_at.microsecond == 0 and entry.recorded_at.tzinfo == UTC
        assert entries(member="auth.user:42") == [entry]

    def test_defaults(self) -> None:
        before = datetime.now(UTC).replace(microsecond=0)
        entry = record_activity("auth.user:1", "page.viewed").entry
        assert entry.object is None and entry.quantity == 1 and entry.context == {}
        assert before <= entry.occurred_at <= datetime.now(UTC)
        assert len(entry.idempotency_key) == 36  # a random UUID: every call records
        assert record_activity("auth.user:1", "page.viewed").created is True

    def test_model_instances_become_references(self) -> None:
        user = UserFactory()
        entry = record_activity(user, "profile.updated", object=user).entry
        assert entry.member == entry.object == f"auth.user:{user.pk}"
        assert reference(user) == f"auth.user:{user.pk}"
        assert entries(member=user) == [entry]

    def test_same_key_twice_keeps_one_row(self) -> None:
        item = ActivityFactory()
        first = record_activity(**item)
        second = record_activity(**item)
        assert first.created is True and second.created is False
        assert second.entry == first.entry
        assert rows(item["idempotency_key"]) == 1

    def test_a_defaulted_occurred_at_is_not_compared(self) -> None:
        item = ActivityFactory(occurred_at=datetime(2024, 1, 1, tzinfo=UTC))
        record_activity(**item)
        retry = {**item, "occurred_at": None}
        assert record_activity(**retry).created is False

    def test_the_same_payload_after_json_normalisation_is_a_duplicate(self) -> None:
        item = ActivityFactory(context={"tags": ("a", "b"), "n": 1.0})
        record_activity(**item)
        assert record_activity(**{**item, "context": {"n": 1, "tags": ["a", "b"]}}).created is False

    def test_mismatched_payload_raises_naming_the_fields_and_writes_nothing(self) -> None:
        item = ActivityFactory()
        kept = record_activity(**item).entry
        with pytest.raises(IdempotencyConflict) as caught:
            record_activity(**{**item, "verb": "order.paid", "quantity": 2})
        assert caught.value.fields == ("verb", "quantity")
        assert "verb" in str(caught.value) and "quantity" in str(caught.value)
        assert caught.value.kept == kept
        assert rows(item["idempotency_key"]) == 1
        assert entries(member=item["member"]) == [kept]

    def test_an_explicit_different_occurred_at_conflicts(self) -> None:
        item = ActivityFactory(occurred_at=datetime(2024, 1, 1, tzinfo=UTC))
        record_activity(**item)
        with pytest.raises(IdempotencyConflict) as caught:
            record_activity(**{**item, "occurred_at": datetime(2024, 1, 2, tzinfo=UTC)})
        assert caught.value.fields == ("occurred_at",)

    def test_statement_counts(self, vendor: str) -> None:
        item = ActivityFactory()
        with capturing_statements() as new:
            record_activity(**item)
        with capturing_statements() as duplicate:
            record_activity(**item)
        # MySQL (not MariaDB) has no compound statements: read, GET_LOCK, read, FOR UPDATE
        # read, INSERT, RELEASE_LOCK (see tilttek_activity.db.innodb).
        stepwise = vendor == "mysql" and not connection.mysql_is_mariadb
        assert len(statements(new)) == len(new) == (6 if stepwise else 1), new.captured_queries
        assert len(statements(duplicate)) == DUPLICATE_STATEMENTS[vendor], (
            duplicate.captured_queries
        )
        assert len(duplicate) == DUPLICATE_STATEMENTS[vendor]  # autocommit: no BEGIN/COMMIT


#: Outside any transaction MySQL/MariaDB send a bare INSERT IGNORE (a deadlock there loses
#: nothing and is retried): a duplicate is then the insert, SHOW WARNINGS and the read.
AUTOCOMMIT_DUPLICATE_STATEMENTS = {"postgresql": 2, "sqlite": 2, "mysql": 3}


@pytest.mark.django_db(transaction=True)
def test_statement_counts_outside_a_transaction(vendor: str) -> None:
    item = ActivityFactory()
    with capturing_statements() as new:
        record_activity(**item)
    with capturing_statements() as duplicate:
        record_activity(**item)
    assert len(statements(new)) == 1, new.captured_queries
    assert len(statements(duplicate)) == AUTOCOMMIT_DUPLICATE_STATEMENTS[vendor], (
        duplicate.captured_queries
    )


INVALID = [
    ({"verb": "v" * 129}, "verb"),
    ({"verb": ""}, "verb"),
    ({"verb": " order.placed"}, "verb"),
    ({"verb": "order\x00placed"}, "verb"),
    ({"verb": 12}, "verb"),
    ({"member": "user42"}, "member"),
    ({"member": "user:"}, "member"),
    ({"member": ":42"}, "member"),
    ({"member": "auth.user:" + "9" * 311}, "member"),
    ({"member": None}, "member"),
    ({"object": "order"}, "object"),
    ({"occurred_at": datetime(2024, 1, 1, 12, 0)}, "occurred_at"),
    ({"occurred_at": "2024-01-01T00:00:00Z"}, "occurred_at"),
    ({"occurred_at": datetime(999, 12, 31, tzinfo=UTC)}, "occurred_at"),
    ({"occurred_at": datetime.now(UTC) + timedelta(hours=1)}, "occurred_at"),
    ({"context": ["not", "an", "object"]}, "context"),
    ({"context": "{}"}, "context"),
    ({"context": {"n": math.nan}}, "context"),
    ({"context": {"n": math.inf}}, "context"),
    ({"context": {1: "non-string key"}}, "context"),
    ({"context": {"when": datetime(2024, 1, 1, tzinfo=UTC)}}, "context"),
    ({"context": {"nul": "a\x00b"}}, "context"),
    (
        {"context": {"deep": [[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]}},
        "context",
    ),
    ({"quantity": 2**31}, "quantity"),
    ({"quantity": -(2**31) - 1}, "quantity"),
    ({"quantity": True}, "quantity"),
    ({"quantity": 1.5}, "quantity"),
    ({"idempotency_key": "k" * 256}, "idempotency_key"),
    ({"idempotency_key": ""}, "idempotency_key"),
    ({"idempotency_key": "line\nbreak"}, "idempotency_key"),
]


@pytest.mark.django_db
@pytest.mark.parametrize(("change", "field"), INVALID, ids=[f for _, f in INVALID])
def test_invalid_input_is_refused_before_any_sql(change: dict[str, Any], field: str) -> None:
    before = Entry.objects.count()
    item = {**ActivityFactory(), **change}
    with capturing_statements() as queries, pytest.raises(InvalidActivity) as caught:
        record_activity(**item)
    assert isinstance(caught.value, ValueError)
    assert caught.value.field == field
    assert str(caught.value).startswith(f"{field}:")
    assert len(queries) == 0
    with pytest.raises(InvalidActivity):
        record_activities([ActivityFactory(), item])
    assert Entry.objects.count() == before


@pytest.mark.django_db
def test_the_largest_values_are_accepted() -> None:
    entry = record_activity(
        "k:" + "i" * 318,
        "v" * 128,
        object="o:" + "i" * 318,
        quantity=-(2**31),
        idempotency_key="k" * 255,
        context={"deep": [[[[[[[[[[[[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]]]]]]]]]]]]},
    ).entry
    assert entries(verb="v" * 128) == [entry]


@pytest.mark.django_db
def test_max_future_is_a_setting(activity_settings: Any) -> None:
    later = datetime.now(UTC) + timedelta(days=2)
    activity_settings(MAX_FUTURE=timedelta(days=3))
    assert record_activity("auth.user:1", "trip.booked", occurred_at=later).created
    activity_settings(MAX_FUTURE=None)
    assert record_activity("auth.user:1", "trip.booked", occurred_at=later + timedelta(days=900))


@pytest.mark.django_db(transaction=True)
def test_a_duplicate_inside_an_outer_transaction_does_not_break_it() -> None:
    item = ActivityFactory()
    record_activity(**item)  # committed by an earlier request
    with transaction.atomic():
        again = record_activity(**item)
        fresh = record_activity(**ActivityFactory())
        with pytest.raises(IdempotencyConflict):
            record_activity(**{**item, "quantity": 5})
        # the transaction is still usable
        assert Entry.objects.filter(idempotency_key=item["idempotency_key"]).count() == 1
        assert record_activity(**item).created is False
    assert again.created is False and fresh.created is True
    assert rows(fresh.entry.idempotency_key) == 1


@pytest.mark.django_db(transaction=True)
def test_a_duplicate_written_in_the_same_transaction_does_not_break_it() -> None:
    item = ActivityFactory()
    with transaction.atomic():
        first = record_activity(**item)
        second = record_activity(**item)
        assert Entry.objects.count() >= 1
    assert first.created and not second.created and second.entry == first.entry


@pytest.mark.django_db(transaction=True)
def test_concurrent_writers_of_one_key_keep_one_row() -> None:
    item = ActivityFactory()
    barrier = threading.Barrier(4)
    results = []
    lock = threading.Lock()

    def write() -> None:
        barrier.wait()
        recorded = record_activity(**item)
        with lock:
            results.append(recorded)

    threads = [in_thread(write) for _ in range(4)]
    for thread, errors in threads:
        thread.join()
        assert not errors, errors
    assert sorted(r.created for r in results) == [False, False, False, True]
    assert len({r.entry for r in results}) == 1
    assert rows(item["idempotency_key"]) == 1


@pytest.mark.django_db(transaction=True)
@pytest.mark.db_vendor("mysql")
def test_mysql_reads_back_a_winner_its_repeatable_read_snapshot_cannot_see() -> None:
    """The kept row is read with a locking read: under REPEATABLE READ a plain SELECT would
    miss a row committed after the caller's snapshot was taken."""
    item = ActivityFactory()
    snapshot_taken = threading.Event()
    winner_committed = threading.Event()
    outcome: list[Any] = []

    def late_writer() -> None:
        with connection.cursor() as cursor:
            cursor.execute("SET SESSION TRANSACTION ISOLATION LEVEL REPEATABLE READ")
        with transaction.atomic():
            Entry.objects.count()  # the snapshot
            snapshot_taken.set()
            winner_committed.wait()
            assert not Entry.objects.filter(idempotency_key=item["idempotency_key"]).exists()
            outcome.append(record_activity(**item))

    thread, errors = in_thread(late_writer)
    snapshot_taken.wait()
    winner = record_activity(**item)
    winner_committed.set()
    thread.join()
    assert not errors, errors
    assert outcome[0].created is False and outcome[0].entry == winner.entry


@pytest.mark.django_db
class TestRecordActivities:
    def test_one_result_per_item_in_order(self) -> None:
        existing = record_activity(**ActivityFactory())
        items = ActivityFactory.build_batch(5)
        duplicate_of_existing = {
            "member": existing.entry.member,
            "verb": existing.entry.verb,
            "object": existing.entry.object,
            "context": existing.entry.context,
            "idempotency_key": existing.entry.idempotency_key,
        }
        results = record_activities([*items, duplicate_of_existing, items[0]])
        assert [r.created for r in results] == [True] * 5 + [False, False]
        positions = [r.entry.position for r in results[:5]]
        assert positions == sorted(positions) and len(set(positions)) == 5
        assert results[5].entry == existing.entry
        assert results[6].entry == results[0].entry
        for item, result in zip(items, results, strict=False):
            assert result.entry.idempotency_key == item["idempotency_key"]
            assert rows(item["idempotency_key"]) == 1

    def test_many_rows_in_few_statements(self, activity_settings: Any) -> None:
        activity_settings(BULK_BATCH_SIZE=100)
        items = ActivityFactory.build_batch(250)
        with capturing_statements() as queries:
            results = record_activities(items)
        assert all(r.created for r in results)
        inserts = [q for q in queries.captured_queries if "INSERT" in q["sql"].upper()]
        assert len(inserts) == 3
        # one INSERT per chunk (+ a read of the keys per chunk on MySQL)
        assert len(statements(queries)) <= 3 * 2

    def test_big_contexts_split_the_statements(self, monkeypatch: Any) -> None:
        monkeypatch.setattr("tilttek_activity.journal.MAX_STATEMENT_BYTES", 60_000)
        items = ActivityFactory.build_batch(6, context={"blob": "x" * 5_000})
        with capturing_statements() as queries:
            results = record_activities(items)
        assert all(r.created for r in results)
        assert results[0].entry.context == {"blob": "x" * 5_000}
        inserts = [q for q in queries.captured_queries if "INSERT" in q["sql"].upper()]
        assert len(inserts) == 3  # two rows (2 x 4 x 5 KB + overhead) per statement

    def test_a_conflict_writes_nothing(self) -> None:
        existing = ActivityFactory()
        record_activity(**existing)
        before = Entry.objects.count()
        items = [*ActivityFactory.build_batch(3), {**existing, "quantity": 9}]
        with pytest.raises(IdempotencyConflict) as caught:
            record_activities(items)
        assert caught.value.fields == ("quantity",)
        assert Entry.objects.count() == before

    def test_two_items_disagreeing_on_a_key_conflict_before_any_sql(self) -> None:
        item = ActivityFactory()
        with capturing_statements() as queries, pytest.raises(IdempotencyConflict):
            record_activities([item, {**item, "verb": "order.other"}])
        assert not [q for q in queries.captured_queries if "INSERT" in q["sql"].upper()]

    def test_items_are_checked(self) -> None:
        with pytest.raises(InvalidActivity) as caught:
            record_activities([ActivityFactory(), {"member": "auth.user:1"}])
        assert caught.value.field == "items[1].verb"
        with pytest.raises(InvalidActivity) as caught:
            record_activities([{**ActivityFactory(), "colour": "red"}])
        assert caught.value.field == "items[0]"
        with pytest.raises(InvalidActivity) as caught:
            record_activities([ActivityFactory(), ActivityFactory(verb="x" * 200)])
        assert caught.value.field == "items[1].verb"

    def test_empty(self) -> None:
        assert record_activities([]) == []


@pytest.mark.django_db
class TestCancelActivity:
    def test_cancel_unknown_raises(self) -> None:
        with pytest.raises(ActivityNotFound):
            cancel_activity("never:recorded")
        assert not Entry.objects.filter(idempotency_key="never:recorded").exists()

    def test_cancel_copies_the_entry_once(self) -> None:
        item = ActivityFactory(quantity=4, context={"reason": "test"})
        recorded = record_activity(**item).entry
        first = cancel_activity(item["idempotency_key"])
        second = cancel_activity(item["idempotency_key"])
        assert first.created is True and second.created is False
        assert second.entry == first.entry
        cancelled = first.entry
        assert cancelled.kind == "cancelled" and cancelled.is_cancellation
        assert cancelled.position > recorded.position
        for field in ("idempotency_key", "member", "verb", "object", "quantity", "context"):
            assert getattr(cancelled, field) == getattr(recorded, field)
        assert Entry.objects.filter(idempotency_key=item["idempotency_key"]).count() == 2
        assert entries(kind="cancelled", member=item["member"]) == [cancelled]
        assert entries(member=item["member"]) == [recorded]

    def test_a_cancelled_key_stays_recorded_once(self) -> None:
        item = ActivityFactory()
        record_activity(**item)
        cancel_activity(item["idempotency_key"])
        assert record_activity(**item).created is False


@pytest.mark.django_db(transaction=True)
def test_signals_are_sent_after_commit_for_written_entries_only() -> None:
    seen: list[tuple[str, int]] = []

    def on_recorded(sender: Any, entry: Any, **kwargs: Any) -> None:
        seen.append(("recorded", entry.position))

    def on_cancelled(sender: Any, entry: Any, **kwargs: Any) -> None:
        seen.append(("cancelled", entry.position))

    activity_recorded.connect(on_recorded)
    activity_cancelled.connect(on_cancelled)
    try:
        item = ActivityFactory()
        with transaction.atomic():
            recorded = record_activity(**item).entry
            record_activity(**item)
            assert seen == []
        assert seen == [("recorded", recorded.position)]
        with transaction.atomic():
            record_activity(**ActivityFactory())
            transaction.set_rollback(True)
        assert len(seen) == 1
        cancelled = cancel_activity(item["idempotency_key"]).entry
        cancel_activity(item["idempotency_key"])
        bulk = record_activities(ActivityFactory.build_batch(2))
        assert seen == [
            ("recorded", recorded.position),
            ("cancelled", cancelled.position),
            *[("recorded", r.entry.position) for r in bulk],
        ]
    finally:
        activity_recorded.disconnect(on_recorded)
        activity_cancelled.disconnect(on_cancelled)


@pytest.mark.django_db
def test_references() -> None:
    user = UserFactory()
    assert reference(user) == f"auth.user:{user.pk}"
    assert reference("shop.order:7") == "shop.order:7"
    with pytest.raises(InvalidActivity):
        reference(type(user)(username="unsaved"))
    with pytest.raises(InvalidActivity):
        reference(42)  # type: ignore[arg-type]


@pytest.mark.django_db(transaction=True)
def test_the_generic_backend_uses_a_savepoint_per_insert(monkeypatch: Any) -> None:
    """Other databases: a plain INSERT in a savepoint; a unique violation means "already
    there" and, thanks to the savepoint, leaves the surrounding transaction usable."""
    from django.db import connections

    from tilttek_activity.db.generic import GenericBackend

    monkeypatch.setattr(
        "tilttek_activity.journal.backend_for", lambda alias: GenericBackend(connections[alias])
    )
    item = ActivityFactory()
    with transaction.atomic():
        first = record_activity(**item)
        second = record_activity(**item)
        with pytest.raises(IdempotencyConflict):
            record_activity(**{**item, "verb": "order.other"})
        bulk = record_activities([item, *ActivityFactory.build_batch(2)])
        assert Entry.objects.filter(idempotency_key=item["idempotency_key"]).count() == 1
    assert first.created and not second.created and second.entry == first.entry
    assert [r.created for r in bulk] == [False, True, True]
    cancelled = cancel_activity(item["idempotency_key"])
    assert cancelled.created and cancel_activity(item["idempotency_key"]).created is False


@pytest.mark.django_db
@pytest.mark.db_vendor("mysql")
def test_mysql_without_returning_replays_an_ambiguous_bulk_row_by_row(monkeypatch: Any) -> None:
    """MySQL 8 has no INSERT ... RETURNING (nor compound statements): a multi-row INSERT
    IGNORE that wrote only some rows is rolled back to a savepoint and replayed one row at a
    time. (Forced here on MariaDB.)"""
    from tilttek_activity.db.mysql import MySQLBackend

    monkeypatch.setattr(MySQLBackend, "compound", property(lambda self: False))
    monkeypatch.setattr(MySQLBackend, "returning", property(lambda self: False))
    items = ActivityFactory.build_batch(3)
    results = record_activities(items)
    assert [r.created for r in results] == [True, True, True]
    assert record_activities([*items, ActivityFactory()])[-1].created is True

    # A writer that does not take the key's mutex wins one key between the reads and the
    # insert: simulate it by hiding that key from the reads (the insert then writes 2 of 3
    # rows: ambiguous).
    contested, *others = ActivityFactory.build_batch(3)
    winner = record_activity(**contested).entry
    original_read = MySQLBackend.read_kept
    original_for_update = MySQLBackend._read_for_update

    def hide(found: dict[Any, Any]) -> dict[Any, Any]:
        return {k: v for k, v in found.items() if k[0] != contested["idempotency_key"]}

    def read_missing_the_winner(self: Any, identities: Any, *, lock: bool = True) -> Any:
        found = original_read(self, identities, lock=lock)
        return found if lock else hide(found)

    monkeypatch.setattr(MySQLBackend, "read_kept", read_missing_the_winner)
    monkeypatch.setattr(
        MySQLBackend,
        "_read_for_update",
        lambda self, identities: hide(original_for_update(self, identities)),
    )
    results = record_activities([contested, *others])
    assert [r.created for r in results] == [False, True, True]
    assert results[0].entry == winner
    for item in others:
        assert rows(item["idempotency_key"]) == 1


@pytest.mark.django_db
def test_a_trailing_space_makes_another_key() -> None:
    """On MySQL/MariaDB a PAD SPACE collation made ``"k "`` the same key as ``"k"``: the
    same payload came back as a duplicate of ``"k"`` and another payload raised."""
    item = ActivityFactory()
    key = item["idempotency_key"]
    first = record_activity(**item)
    same_payload = record_activity(**{**item, "idempotency_key": key + " "})
    other_payload = record_activity(**{**item, "idempotency_key": key + "  ", "quantity": 9})
    assert first.created and same_payload.created and other_payload.created
    assert same_payload.entry.idempotency_key == key + " "
    assert other_payload.entry.idempotency_key == key + "  "
    assert (
        len({first.entry.position, same_payload.entry.position, other_payload.entry.position}) == 3
    )
    assert record_activity(**{**item, "idempotency_key": key + " "}).entry == same_payload.entry
    assert cancel_activity(key + " ").entry.member == item["member"]
    assert Entry.objects.filter(idempotency_key=key, kind="cancelled").count() == 0
    with pytest.raises(ActivityNotFound):
        cancel_activity(key + "   ")
