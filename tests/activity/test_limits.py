"""Limits and bad arguments of every public entry point: typed errors, before any SQL.

The property-based versions of these checks (generated inputs, every database) are in
``tests/adversarial/test_journal_inputs.py``; these are the named regressions of issue 9.
"""

from __future__ import annotations

import math
import threading
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest

from tests.support.statements import capturing_statements
from tilttek_activity import (
    ActivityError,
    InvalidActivity,
    UnknownProjection,
    cancel_activity,
    catch_up,
    entries,
    follow,
    rebuild,
    record_activities,
    record_activity,
    wait_until_projected,
)
from tilttek_activity.limits import MAX_CONTEXT_BYTES
from tilttek_activity.models import Entry

from .factories import ActivityFactory

pytestmark = pytest.mark.django_db

MiB = 1024 * 1024


def _same(entry: Any) -> dict[str, Any]:
    return {
        "member": entry.member,
        "object": entry.object,
        "idempotency_key": entry.idempotency_key,
    }


def refused(call: Any, field: str) -> InvalidActivity:
    """``call()`` raises InvalidActivity naming ``field`` and sends no SQL at all."""
    before = Entry.objects.count()
    with capturing_statements() as queries, pytest.raises(InvalidActivity) as caught:
        call()
    assert caught.value.field == field, caught.value
    assert len(queries) == 0, queries.captured_queries
    assert Entry.objects.count() == before
    return caught.value


def context_of(size: int) -> dict[str, str]:
    """A context whose compact JSON is exactly ``size`` bytes of UTF-8."""
    return {"s": "x" * (size - len('{"s":""}'))}


class TestContextSize:
    def test_the_limit_itself_is_accepted_and_round_trips(self) -> None:
        context = context_of(MAX_CONTEXT_BYTES)
        entry = record_activity(**ActivityFactory(context=context)).entry
        assert entry.context == context
        assert entries(member=entry.member) == [entry]

    def test_one_byte_more_is_refused(self) -> None:
        error = refused(
            lambda: record_activity(**ActivityFactory(context=context_of(MAX_CONTEXT_BYTES + 1))),
            "context",
        )
        assert str(MAX_CONTEXT_BYTES) in str(error)

    def test_bytes_not_characters_are_counted(self) -> None:
        euro = "\u20ac"  # three bytes of UTF-8
        context = {"s": euro * (MAX_CONTEXT_BYTES // 3)}
        refused(lambda: record_activity(**ActivityFactory(context=context)), "context")

    @pytest.mark.parametrize("megabytes", [20, 70])
    def test_huge_contexts_are_refused_before_anything_is_sent(self, megabytes: int) -> None:
        """MariaDB answered 20 MB with a raw OperationalError 1153 and 70 MB by dropping the
        connection; now every database refuses both the same way, and the connection (and
        the test's transaction) stays usable."""
        big = ActivityFactory(context={"blob": "x" * (megabytes * MiB)})
        refused(lambda: record_activity(**big), "context")
        refused(lambda: record_activities([ActivityFactory(), big]), "items[1].context")
        assert record_activity(**ActivityFactory()).created

    def test_many_small_values_count_too(self) -> None:
        context = {"list": list(range(MAX_CONTEXT_BYTES // 2))}
        refused(lambda: record_activity(**ActivityFactory(context=context)), "context")


class TestContextNumbers:
    @pytest.mark.parametrize(
        "value",
        [1e16, -1e16, 1e23, 1.5e300, 1.7976931348623157e308, 9999999999999998.0, 1e-7, 5e-324],
    )
    def test_floats_come_back_equal_and_floats_from_every_writer(self, value: float) -> None:
        """PostgreSQL's jsonb kept ``1e+16`` as the exact decimal 10000000000000000, read
        back as an int: the journal writes such floats out in full with a ``.0``."""
        context = {"n": value, "l": [value]}
        single = record_activity(**ActivityFactory(context=context))
        bulk = record_activities([ActivityFactory(context=context) for _ in range(2)])
        cancelled = cancel_activity(single.entry.idempotency_key)
        written = [single.entry, *(r.entry for r in bulk), cancelled.entry]
        for entry in written:
            (read,) = entries(kind=entry.kind, after_position=entry.position - 1, limit=1)
            for found in (entry.context, read.context):
                assert found == context
                assert type(found["n"]) is float and type(found["l"][0]) is float
        again = record_activity(**ActivityFactory(context=context, **_same(single.entry)))
        assert again.created is False  # an identical retry never conflicts

    def test_negative_zero_is_stored_as_zero_everywhere(self) -> None:
        entry = record_activity(**ActivityFactory(context={"z": -0.0, "deep": [{"z": -0.0}]})).entry
        (read,) = entries(member=entry.member)
        for context in (entry.context, read.context):
            assert math.copysign(1.0, context["z"]) == 1.0
            assert math.copysign(1.0, context["deep"][0]["z"]) == 1.0

    @pytest.mark.parametrize("value", [2**63, -(2**64), 10**4000])
    def test_big_integers_come_back_exactly(self, value: int) -> None:
        entry = record_activity(**ActivityFactory(context={"n": value})).entry
        (read,) = entries(member=entry.member)
        assert read.context["n"] == value and type(read.context["n"]) is int

    def test_an_integer_python_cannot_print_is_refused(self) -> None:
        refused(lambda: record_activity(**ActivityFactory(context={"n": 10**5000})), "context")


class TestRecordActivities:
    @pytest.mark.parametrize("items", [5, None, 1.5, object(), {"member": "a:b"}, "ab", b"ab"])
    def test_items_must_be_an_iterable_of_mappings(self, items: Any) -> None:
        """``record_activities(5)`` raised a raw TypeError."""
        refused(lambda: record_activities(items), "items")

    @pytest.mark.parametrize("item", [5, None, "member", ["member", "verb"]])
    def test_each_item_must_be_a_mapping(self, item: Any) -> None:
        refused(lambda: record_activities([ActivityFactory(), item]), "items[1]")

    def test_unknown_fields_of_any_type_are_named(self) -> None:
        error = refused(lambda: record_activities([{**ActivityFactory(), 7: "x"}]), "items[0]")
        assert "7" in str(error)


@pytest.mark.parametrize("using", ["nope", 5, ["default"]])
def test_an_unknown_database_alias_is_a_typed_error(using: Any) -> None:
    refused(lambda: record_activity(**ActivityFactory(), using=using), "using")
    refused(lambda: record_activities([ActivityFactory()], using=using), "using")
    refused(lambda: entries(using=using), "using")


class TestEntriesFilters:
    @pytest.mark.parametrize(
        ("filters", "field"),
        [
            ({"after_position": 2**63}, "after_position"),
            ({"after_position": "3"}, "after_position"),
            ({"before_position": -(2**63) - 1}, "before_position"),
            ({"before_position": 1.0}, "before_position"),
            ({"newest_first": 1}, "newest_first"),
            ({"kind": ["recorded"]}, "kind"),
            ({"kind": "Recorded"}, "kind"),
            ({"since": datetime(2024, 1, 1)}, "since"),
            ({"until": datetime.min.replace(tzinfo=timezone(timedelta(hours=2)))}, "until"),
            ({"since": "2024-01-01"}, "since"),
            ({"limit": 0}, "limit"),
            ({"limit": True}, "limit"),
            ({"verb_prefix": ""}, "verb_prefix"),
            ({"verb": "a\x00b"}, "verb"),
            ({"member": "no-colon"}, "member"),
            ({"object": 42}, "object"),
        ],
        ids=lambda value: repr(value)[:30],
    )
    def test_bad_filters_are_refused(self, filters: dict[str, Any], field: str) -> None:
        refused(lambda: entries(**filters), field)

    def test_the_widest_filters_work_on_every_database(self) -> None:
        entry = record_activity(**ActivityFactory()).entry
        found = entries(
            member=entry.member,
            since=datetime.min.replace(tzinfo=UTC),
            until=datetime.max.replace(tzinfo=UTC),
            after_position=-(2**63),
            before_position=2**63 - 1,
            kind=None,
        )
        assert found == [entry]

    def test_a_feed_reads_newest_first_and_pages_by_position(self) -> None:
        member = "auth.user:feed"
        made = [r.entry for r in record_activities(ActivityFactory.build_batch(5, member=member))]
        first_page = entries(member=member, newest_first=True, limit=2)
        assert first_page == made[:-3:-1]
        second_page = entries(
            member=member, newest_first=True, before_position=first_page[-1].position, limit=2
        )
        assert second_page == [made[2], made[1]]
        assert entries(member=member, before_position=made[2].position) == made[:2]


class TestProjectionsAPI:
    @pytest.mark.parametrize("name", [5, None, ["x"], "", "x" * 65, "a\nb"])
    def test_catch_up_and_rebuild_refuse_what_cannot_be_a_name(self, name: Any) -> None:
        if name is None:  # catch_up(None) means every projection; rebuild needs one
            refused(lambda: rebuild(name), "name")
            return
        refused(lambda: catch_up(name), "name")
        refused(lambda: rebuild(name), "name")

    def test_an_unknown_name_is_unknown(self) -> None:
        with pytest.raises(UnknownProjection):
            catch_up("tests.activity.nobody")

    @pytest.mark.parametrize("batch_size", [0, -1, 10_001, 2.5, "10", True])
    def test_batch_sizes(self, batch_size: Any) -> None:
        refused(lambda: catch_up(batch_size=batch_size), "batch_size")

    @pytest.mark.parametrize(
        ("arguments", "field"),
        [
            ({"timeout": math.nan}, "timeout"),
            ({"timeout": math.inf}, "timeout"),
            ({"timeout": -1}, "timeout"),
            ({"timeout": "abc"}, "timeout"),
            ({"position": "3"}, "position"),
            ({"position": 2**64}, "position"),
            ({"name": 5}, "name"),
        ],
    )
    def test_wait_until_projected(self, arguments: dict[str, Any], field: str) -> None:
        """A NaN timeout used to wait forever; a string one raised a raw TypeError."""
        call = {"name": "tests.activity.ledger", "position": 1, "timeout": 0.0, **arguments}
        refused(lambda: wait_until_projected(**call), field)

    @pytest.mark.parametrize(
        ("arguments", "field"),
        [
            ({"stop": None}, "stop"),
            ({"stop": "yes"}, "stop"),
            ({"poll_interval": 0}, "poll_interval"),
            ({"poll_interval": math.nan}, "poll_interval"),
            ({"on_result": 5}, "on_result"),
            ({"name": 5}, "name"),
            ({"batch_size": 0}, "batch_size"),
        ],
    )
    def test_follow(self, arguments: dict[str, Any], field: str) -> None:
        call = {"stop": threading.Event(), **arguments}
        refused(lambda: follow(**call), field)

    def test_rebuild_checks_its_period_and_progress(self) -> None:
        from tests.testapp.projections import Ledger

        refused(lambda: rebuild(Ledger.name, since=datetime(2024, 1, 1)), "since")
        refused(lambda: rebuild(Ledger.name, progress="bar"), "progress")


def test_every_error_is_an_activity_error() -> None:
    assert issubclass(InvalidActivity, ActivityError) and issubclass(InvalidActivity, ValueError)
    assert issubclass(UnknownProjection, ActivityError)
