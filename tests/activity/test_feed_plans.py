"""Feeds read newest first from an index (§B3, issue 16): the query plan of
``entries(member=..., newest_first=True, before_position=...)`` on every database uses the
``(member, position)`` index backwards, with no sort of the member's entries."""

from __future__ import annotations

import json

import pytest
from django.db import connection

from tilttek_activity import entries, record_activities
from tilttek_activity.reading import entries_statement

pytestmark = pytest.mark.django_db(transaction=True)

MEMBERS = 400
PER_MEMBER = 50


@pytest.fixture
def journal() -> list[int]:
    """20,000 entries of 400 members and carts, interleaved (as a real journal is), analysed:
    enough that a planner prefers the narrow index to a backward scan of the whole table."""
    items = [
        {
            "member": f"user:{n}",
            "verb": "cart.item_added",
            "object": f"cart:{n}",
            "context": {"i": i},
        }
        for i in range(PER_MEMBER)
        for n in range(MEMBERS)
    ]
    positions = [r.entry.position for r in record_activities(items)]
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute("ANALYZE tilttek_activity_entry")
        elif connection.vendor == "mysql":
            cursor.execute("ANALYZE TABLE tilttek_activity_entry")
            cursor.fetchall()
        else:
            cursor.execute("ANALYZE")
    return positions


def plan(**filters: object) -> str:
    """The database's plan of the read ``entries(**filters)`` sends, as text."""
    _alias, sql, params = entries_statement(**filters)  # type: ignore[arg-type]
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute(f"EXPLAIN (FORMAT JSON) {sql}", params)
            return json.dumps(cursor.fetchone()[0])
        if connection.vendor == "mysql":
            cursor.execute(f"EXPLAIN FORMAT=JSON {sql}", params)
            return str(cursor.fetchone()[0])
        cursor.execute(f"EXPLAIN QUERY PLAN {sql}", params)
        return " | ".join(str(row[-1]) for row in cursor.fetchall())


def assert_index_backed(text: str, index: str) -> None:
    assert index in text, text
    if connection.vendor == "postgresql":
        node = json.loads(text)[0]["Plan"]
        while node["Node Type"] == "Limit":
            node = node["Plans"][0]
        assert node["Node Type"] == "Index Scan", text
        assert node["Index Name"] == index, text
        assert node["Scan Direction"] == "Backward", text
    elif connection.vendor == "mysql":
        assert "filesort" not in text, text
        assert '"key": "' + index + '"' in text, text
    else:
        assert "USING INDEX " + index in text, text
        assert "TEMP B-TREE" not in text, text


def test_a_feed_page_reads_its_index_backwards(journal):
    middle = journal[len(journal) // 2]
    for filters, index in (
        ({"member": "user:7"}, "tilttek_activity_entry_member"),
        ({"object": "cart:3"}, "tilttek_activity_entry_object"),
    ):
        assert_index_backed(plan(**filters, newest_first=True, limit=20), index)
        assert_index_backed(
            plan(**filters, newest_first=True, before_position=middle, limit=20), index
        )


def test_a_feed_pages_through_a_member_latest_first(journal):
    pages, before = [], None
    while True:
        page = entries(member="user:7", newest_first=True, before_position=before, limit=20)
        if not page:
            break
        pages.append([e.context["i"] for e in page])
        before = page[-1].position
    assert [i for page in pages for i in page] == list(reversed(range(PER_MEMBER)))
    assert [len(page) for page in pages] == [20, 20, 10]
