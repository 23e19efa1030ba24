"""Reading: entries() filters, exact verb prefixes, keyset pages, corrupt rows."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from django.db import connection

from tilttek_activity import (
    InvalidActivity,
    UnexpectedValueError,
    catch_up,
    entries,
    record_activities,
    record_activity,
)
from tilttek_activity.reading import prefix_successor

from .factories import ActivityFactory, EntryFactory

pytestmark = pytest.mark.django_db

T0 = datetime(2024, 3, 1, tzinfo=UTC)


def verbs_matching(prefix: str, member: str) -> list[str]:
    return [entry.verb for entry in entries(member=member, verb_prefix=prefix)]


def test_filters_compare_columns() -> None:
    member = "auth.user:filters"
    made = record_activities(
        [
            {"member": member, "verb": "order.placed", "object": "shop.order:1", "occurred_at": T0},
            {
                "member": member,
                "verb": "order.paid",
                "object": "shop.order:1",
                "occurred_at": T0 + timedelta(hours=1),
            },
            {
                "member": member,
                "verb": "order.placed",
                "object": "shop.order:2",
                "occurred_at": T0 + timedelta(days=1),
            },
            {
                "member": "auth.user:other",
                "verb": "order.placed",
                "object": "shop.order:1",
                "occurred_at": T0,
            },
        ]
    )
    placed, paid, second, other = (r.entry for r in made)
    assert entries(member=member) == [placed, paid, second]
    assert entries(object="shop.order:1") == [placed, paid, other]
    assert entries(member=member, verb="order.placed") == [placed, second]
    assert entries(member=member, since=T0 + timedelta(minutes=1)) == [paid, second]
    assert entries(member=member, until=T0 + timedelta(hours=1)) == [placed]
    assert entries(member=member, since=T0, until=T0 + timedelta(days=1)) == [placed, paid]
    assert entries(member=member, kind="cancelled") == []
    assert entries(member=member, kind=None) == [placed, paid, second]


def test_keyset_pagination_by_position() -> None:
    member = "auth.user:pages"
    made = [r.entry for r in record_activities(ActivityFactory.build_batch(5, member=member))]
    first = entries(member=member, limit=2)
    second = entries(member=member, limit=2, after_position=first[-1].position)
    third = entries(member=member, limit=2, after_position=second[-1].position)
    assert first + second + third == made
    assert entries(member=member, after_position=third[-1].position) == []


@pytest.mark.parametrize(
    ("prefix", "expected"),
    [
        ("a_b.", ["a_b.x"]),  # no LIKE: "_" is not a wildcard
        ("a%b.", ["a%b.y"]),
        ("Order.", ["Order.placed"]),  # case-sensitive on every database
        ("order.", ["order.placed", "order.paid"]),
        ("order.p", ["order.placed", "order.paid"]),
        ("order.placed", ["order.placed"]),
        ("orde", ["order.placed", "order.paid", "orders"]),
        ("é.", ["é.vu"]),  # no accent folding
        ("\U0010ffff", ["\U0010ffff.x"]),  # no upper bound needed
        ("\ud7ff", ["\ud7ff.z"]),  # successor skips the surrogates
    ],
)
def test_verb_prefix_is_exact(prefix: str, expected: list[str]) -> None:
    member = "auth.user:prefix"
    verbs = [
        "a_b.x",
        "aXb.x",
        "a%b.y",
        "aZb.y",
        "Order.placed",
        "order.placed",
        "order.paid",
        "orders",
        "ORDER.placed",
        "e.vu",
        "é.vu",
        "E.vu",
        "\U0010ffff.x",
        "\ud7ff.z",
        "\ue000.z",
    ]
    record_activities([{"member": member, "verb": verb} for verb in verbs])
    assert verbs_matching(prefix, member) == expected


def test_prefix_successor() -> None:
    assert prefix_successor("order.") == "order/"
    assert prefix_successor("a\U0010ffff") == "b"
    assert prefix_successor("\U0010ffff") is None
    assert prefix_successor("\ud7ff") == "\ue000"


def test_verb_prefix_range_lets_the_verb_index_serve_it() -> None:
    from tilttek_activity.models import Entry
    from tilttek_activity.reading import verb_prefix_q

    record_activities(ActivityFactory.build_batch(20, verb="order.placed"))
    queryset = Entry.objects.filter(verb_prefix_q("order.")).values("position")
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:  # a 20-row table is cheaper to scan
            cursor.execute("SET LOCAL enable_seqscan = off")
    plan = queryset.explain()
    assert "tilttek_activity_entry_verb" in plan, plan


def test_invalid_filters() -> None:
    with pytest.raises(InvalidActivity) as caught:
        entries(since=datetime(2024, 1, 1))
    assert caught.value.field == "since"
    with pytest.raises(InvalidActivity):
        entries(member="nope")
    with pytest.raises(InvalidActivity):
        entries(kind="deleted")
    with pytest.raises(InvalidActivity):
        entries(limit=0)
    with pytest.raises(InvalidActivity):
        entries(verb_prefix="")


def corrupt(position: int, column: str, sql_value: str) -> None:
    with connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE tilttek_activity_entry SET {column} = {sql_value} WHERE position = %s",
            [position],
        )


JSON_ARRAY = {"postgresql": "'[1, 2]'::jsonb", "mysql": "'[1, 2]'", "sqlite": "'[1, 2]'"}
JSON_SCALAR = {"postgresql": "'42'::jsonb", "mysql": "'42'", "sqlite": "'42'"}


@pytest.mark.parametrize("value", [JSON_ARRAY, JSON_SCALAR], ids=["array", "scalar"])
def test_a_context_that_is_not_an_object_raises_naming_column_and_position(
    value: dict[str, str],
) -> None:
    entry = record_activity("auth.user:corrupt", "order.placed").entry
    corrupt(entry.position, "context", value[connection.vendor])
    with pytest.raises(UnexpectedValueError) as caught:
        entries(member="auth.user:corrupt")
    assert caught.value.column == "context"
    assert caught.value.position == entry.position
    assert "context" in str(caught.value) and str(entry.position) in str(caught.value)


def test_corrupt_columns_raise_naming_them() -> None:
    entry = EntryFactory(member="auth.user:hand", verb="order.placed")
    corrupt(entry.position, "member", "'no-colon'")
    with pytest.raises(UnexpectedValueError) as caught:
        entries(verb="order.placed", kind=None, limit=10_000)
    assert (caught.value.column, caught.value.position) == ("member", entry.position)


@pytest.mark.db_vendor("sqlite")
def test_sqlite_wrong_types_raise_naming_the_column() -> None:
    """SQLite stores whatever it is given: a hand-written row can hold any type."""
    entry = EntryFactory(member="auth.user:typeless")
    corrupt(entry.position, "quantity", "'many'")
    with pytest.raises(UnexpectedValueError) as caught:
        entries(member="auth.user:typeless")
    assert caught.value.column == "quantity"
    corrupt(entry.position, "quantity", "1")
    corrupt(entry.position, "occurred_at", "'last tuesday'")
    with pytest.raises(UnexpectedValueError) as caught:
        entries(member="auth.user:typeless")
    assert caught.value.column == "occurred_at"


@pytest.mark.django_db(transaction=True)
def test_catch_up_raises_on_a_corrupt_row_and_applies_nothing(ledger: object) -> None:
    from tests.testapp.projections import Ledger

    good = record_activity("auth.user:x", "page.viewed").entry
    bad = record_activity("auth.user:x", "page.viewed").entry
    corrupt(bad.position, "context", JSON_ARRAY[connection.vendor])
    with pytest.raises(UnexpectedValueError) as caught:
        catch_up(Ledger.name)
    assert (caught.value.column, caught.value.position) == ("context", bad.position)
    assert Ledger.store.applied == []
    assert good.position < bad.position


def test_trailing_spaces_are_significant_in_member_and_object_filters() -> None:
    """On MySQL/MariaDB a PAD SPACE collation made ``member="user:x"`` match ``"user:x "``."""
    plain = record_activity("tests.user:x", "page.viewed", object="tests.page:1").entry
    spaced = record_activity("tests.user:x ", "page.viewed", object="tests.page:1 ").entry
    assert entries(member="tests.user:x") == [plain]
    assert entries(member="tests.user:x ") == [spaced]
    assert entries(object="tests.page:1") == [plain]
    assert entries(object="tests.page:1 ") == [spaced]
