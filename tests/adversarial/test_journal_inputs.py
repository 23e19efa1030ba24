"""Property-based bad input for every public entry point of the journal (issue 9).

Entry points: ``record_activity``, ``record_activities``, ``cancel_activity``, ``entries``
and each of its filters, and the projections' public API (``catch_up``, ``follow``,
``rebuild``, ``wait_until_projected``). The journal has no async names.

Properties:

- **bad input** (wrong types, NUL, lone surrogates, control characters, overlong strings,
  huge integers, NaN and infinities, deep nesting, oversized contexts, naive or
  unconvertible dates, unknown database aliases, bad filters and projection arguments)
  raises the documented typed error, a subclass of ``ActivityError`` (``InvalidActivity``
  naming the argument, or ``ActivityNotFound`` / ``UnknownProjection``), never a raw
  database, ``UnicodeEncodeError``, ``TypeError`` or ``ValueError``, and no row of either
  journal table changes;
- **valid edge values** (references and keys at their length limits or ending in spaces,
  any text but NUL, lone surrogates and control characters, 32-bit quantities at both ends,
  contexts with big integers, floats such as ``1e23`` and ``5e-324``, astral-plane text and
  nesting at the limit, dates from year 1000 to 9999 in any time zone) round-trip exactly
  through ``record_activity`` / ``record_activities`` -> ``entries``: equal and of the same
  type, recursively; an identical retry returns the kept entry; a key or reference that
  differs only by trailing spaces is another one;
- **valid filters** never raise and only return matching entries, in the asked order.

``max_examples`` keeps the module well under a minute per database. The number of distinct
generated inputs (by ``repr``) per test is printed at the end and merged into the JSON file
named by ``SOLID_HYPOTHESIS_COUNTS`` when it is set.
"""

from __future__ import annotations

import math
import threading
import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest
from django.db import connection
from hypothesis import HealthCheck, assume, given
from hypothesis import strategies as st

from tests.support.generated import InputCounter, examples
from tilttek_activity import (
    ActivityError,
    ActivityNotFound,
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
from tilttek_activity.limits import (
    CHECKPOINT_TABLE,
    ENTRY_TABLE,
    INT32_MAX,
    INT32_MIN,
    KEY_LENGTH,
    MAX_CONTEXT_BYTES,
    MAX_CONTEXT_DEPTH,
    PROJECTION_NAME_LENGTH,
    REFERENCE_LENGTH,
    VERB_LENGTH,
)

pytestmark = pytest.mark.django_db

#: A projection registered by the test app (catch-up and rebuild are only given bad input).
LEDGER = "tests.activity.ledger"


counter = InputCounter("tilttek_activity")
_count_distinct_inputs = counter.fixture()
seen = counter.seen


# -- rows --------------------------------------------------------------------------------------
def journal_rows() -> tuple[Any, ...]:
    """What any write to either journal table changes (both are append-only or advance)."""
    quote = connection.ops.quote_name
    entry, checkpoint = quote(ENTRY_TABLE), quote(CHECKPOINT_TABLE)
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT (SELECT COUNT(*) FROM {entry}), (SELECT MAX(position) FROM {entry}), "
            f"(SELECT COUNT(*) FROM {checkpoint}), (SELECT SUM(position) FROM {checkpoint}), "
            f"(SELECT MAX(updated_at) FROM {checkpoint})",
            [],
        )
        return tuple(cursor.fetchone())


def refused(
    call: Callable[[], Any], field: str | None, error: type[ActivityError] = InvalidActivity
) -> ActivityError:
    """``call()`` raises ``error`` (naming ``field``, for InvalidActivity) and writes nothing.
    Any other exception propagates and fails the test with the raw error."""
    before = journal_rows()
    try:
        call()
    except ActivityError as exc:
        assert isinstance(exc, error), f"{type(exc).__name__}: {exc} (expected {error.__name__})"
        if field is not None:
            assert getattr(exc, "field", None) == field, f"{exc} (expected field {field!r})"
        caught = exc
    else:
        raise AssertionError(f"accepted (expected {error.__name__} for {field!r})")
    assert journal_rows() == before, "bad input changed rows of the journal"
    return caught


# -- strategies: text --------------------------------------------------------------------------
CONTROL = "".join(chr(code) for code in range(0x20)) + "\x7f"
#: What identifiers (references, verbs, keys) may hold: no control characters, no surrogates.
ident_chars = st.characters(exclude_categories=("Cs",), exclude_characters=CONTROL)
#: What context strings may hold: anything but NUL and lone surrogates.
text_chars = st.characters(exclude_categories=("Cs",), exclude_characters="\x00")
short_text = st.text(text_chars, max_size=10)


def _with(text: str, inserted: str, at: int) -> str:
    at = min(at, len(text))
    return text[:at] + inserted + text[at:]


controls = st.sampled_from(list(CONTROL))
surrogates = st.integers(0xD800, 0xDFFF).map(chr)
nul_text = st.builds(_with, short_text, st.just("\x00"), st.integers(0, 10))
surrogate_text = st.builds(_with, short_text, surrogates, st.integers(0, 10))


class Opaque:
    """An object that is no JSON, no string, no number (stable repr for the counts)."""

    def __repr__(self) -> str:
        return "Opaque()"


#: Values of the wrong type for a string argument (None excluded: it means "default").
not_strings = st.one_of(
    st.integers(),
    st.floats(),
    st.booleans(),
    st.binary(max_size=4),
    st.lists(st.integers(), max_size=2),
    st.dictionaries(st.text(max_size=2), st.integers(), max_size=1),
    st.decimals(allow_nan=False),
    st.dates(),
    st.builds(Opaque),
)


#: Anything but a mapping, for where a mapping is expected.
not_mappings = st.one_of(
    st.integers(),
    st.floats(),
    st.none(),
    st.text(max_size=3),
    st.binary(max_size=3),
    st.lists(st.text(max_size=2), max_size=2),
    st.builds(Opaque),
)


def bad_identifier(limit: int, *, prefix: str = "") -> st.SearchStrategy[Any]:
    """Strings an identifier of at most ``limit`` characters refuses, and non-strings."""
    base = st.text(ident_chars, min_size=1, max_size=8).map(lambda text: prefix + text)
    return st.one_of(
        not_strings,
        st.builds(_with, base, controls, st.integers(0, 12)),
        st.builds(_with, base, surrogates, st.integers(0, 12)),
        st.integers(limit + 1, limit + 40).map(lambda n: prefix + "x" * (n - len(prefix))),
    )


# -- strategies: valid values ------------------------------------------------------------------
reference_kinds = st.text(
    st.characters(exclude_categories=("Cs",), exclude_characters=CONTROL + ":"),
    min_size=1,
    max_size=12,
)
reference_ids = st.text(ident_chars, min_size=1, max_size=20)


def _padded(kind: str, identifier: str, spaces: int, full: bool) -> str:
    text = f"{kind}:{identifier}"
    if full:
        text += "x" * (REFERENCE_LENGTH - spaces - len(text))
    return (text + " " * spaces)[:REFERENCE_LENGTH]


#: ``kind:identifier`` references, up to exactly 320 characters, some ending in spaces.
good_references = st.builds(
    _padded, reference_kinds, reference_ids, st.integers(0, 3), st.booleans()
).filter(lambda text: text.partition(":")[2] != "" and len(text) <= REFERENCE_LENGTH)
good_verbs = st.text(ident_chars, min_size=1, max_size=VERB_LENGTH).filter(
    lambda verb: verb == verb.strip()
) | st.just("v" * VERB_LENGTH)
good_quantities = st.integers(INT32_MIN, INT32_MAX) | st.sampled_from([INT32_MIN, INT32_MAX, 0])


def _key(text: str, spaces: int) -> str:
    return text[: KEY_LENGTH - spaces] + " " * spaces


#: Keys up to exactly 255 characters, some ending in spaces (made unique per run by
#: :func:`fresh`, since hypothesis replays its examples).
good_keys = st.builds(
    _key,
    st.text(ident_chars, min_size=1, max_size=KEY_LENGTH) | st.just("k" * KEY_LENGTH),
    st.integers(0, 2),
)


def fresh(activity: dict[str, Any]) -> dict[str, Any]:
    """The activity under a key never used before, of the same length and trailing spaces."""
    key = activity["idempotency_key"]
    core = key.rstrip(" ")
    spaces = len(key) - len(core)
    token = uuid.uuid4().hex
    return {
        **activity,
        "idempotency_key": (token + core)[: max(len(key), 32) - spaces] + " " * spaces,
    }


EDGE_FLOATS = [
    1e16,
    1e23,
    -1e22,
    9999999999999998.0,
    5e-324,
    2.2250738585072014e-308,
    1.7976931348623157e308,
    -1.7976931348623157e308,
    1.5e300,
    1e-7,
    0.1,
    0.0,
    100.0,
    2.0**53,
    2.0**63,
]
good_floats = st.sampled_from(EDGE_FLOATS) | st.floats(allow_nan=False, allow_infinity=False)
LIMIT_INT = 10**4300 - 1  # 4,300 digits: Python's default limit for int <-> str
good_ints = (
    st.integers(min_value=-(2**70), max_value=2**70)
    | st.sampled_from([2**63, -(2**63) - 1, 2**64, 10**4299])
    | st.integers(min_value=1, max_value=4300).map(lambda digits: 10 ** (digits - 1) + 7)
    | st.just(LIMIT_INT)
)
good_leaves = st.none() | st.booleans() | good_ints | good_floats | st.text(text_chars)
good_json = st.recursive(
    good_leaves,
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(short_text, children, max_size=4)
    ),
    max_leaves=12,
)


def nested(depth: int, leaf: Any, kinds: list[bool]) -> Any:
    """``depth`` levels of lists (True) or objects (False) around ``leaf``."""
    value = leaf
    for is_list in kinds[:depth]:
        value = [value] if is_list else {"k": value}
    return value


@st.composite
def deep_context(draw: Any, extra: int = 0) -> dict[str, Any]:
    """A context nested exactly at the limit (``extra`` levels more)."""
    depth = MAX_CONTEXT_DEPTH - 1 + extra  # the context object itself is the first level
    kinds = draw(st.lists(st.booleans(), min_size=depth, max_size=depth))
    return {"deep": nested(depth, draw(good_leaves), kinds)}


good_contexts = st.one_of(
    st.dictionaries(short_text, good_json, max_size=5),
    deep_context(),
    st.builds(lambda leaf: {"big": leaf}, st.sampled_from([LIMIT_INT, -LIMIT_INT, 1e23, -0.0])),
)
fixed_offsets = st.integers(-(23 * 60 + 59), 23 * 60 + 59).map(
    lambda minutes: timezone(timedelta(minutes=minutes))
)
#: Aware moments from year 1000 to 9999, in zones with real rules and in fixed offsets.
good_moments = st.datetimes(
    min_value=datetime(1000, 1, 2),
    max_value=datetime(9999, 12, 30),
    timezones=st.timezones() | fixed_offsets | st.just(UTC),
)


@st.composite
def good_activities(draw: Any) -> dict[str, Any]:
    activity: dict[str, Any] = {
        "member": draw(good_references),
        "verb": draw(good_verbs),
        "idempotency_key": draw(good_keys),
    }
    if draw(st.booleans()):
        activity["object"] = draw(good_references)
    if draw(st.booleans()):
        activity["quantity"] = draw(good_quantities)
    if draw(st.booleans()):
        activity["context"] = draw(good_contexts)
    if draw(st.booleans()):
        activity["occurred_at"] = draw(good_moments)
    return activity


def base_activity() -> dict[str, Any]:
    return {
        "member": "tests.member:1",
        "verb": "tests.input",
        "object": "tests.object:1",
        "quantity": 1,
        "context": {"a": 1},
        "idempotency_key": f"input:{uuid.uuid4()}",
    }


# -- strategies: bad values --------------------------------------------------------------------
huge_ints = st.integers(min_value=4300, max_value=4400).map(lambda exponent: 10**exponent)
bad_leaves = st.one_of(
    nul_text,
    surrogate_text,
    huge_ints,
    huge_ints.map(lambda n: -n),
    st.sampled_from([math.nan, math.inf, -math.inf]),
    st.sets(st.integers(), max_size=3),
    st.frozensets(short_text, max_size=2),
    st.binary(max_size=4),
    st.datetimes(),
    st.dates(),
    st.decimals(allow_nan=False),
    st.complex_numbers(allow_nan=False),
    st.builds(Opaque),
)
bad_keys_of_objects = st.one_of(
    st.integers(), st.none(), st.booleans(), st.tuples(st.integers()), nul_text, surrogate_text
)


@st.composite
def context_with_a_bad_leaf(draw: Any) -> dict[str, Any]:
    depth = draw(st.integers(0, 4))
    kinds = draw(st.lists(st.booleans(), min_size=depth, max_size=depth))
    return {"ok": draw(good_leaves), "bad": nested(depth, draw(bad_leaves), kinds)}


@st.composite
def oversized_context(draw: Any) -> dict[str, Any]:
    """More than ``MAX_CONTEXT_BYTES`` of JSON, in one string of 1- to 4-byte characters or
    in many small values."""
    char = draw(st.sampled_from(["x", "\u00e9", "\u20ac", "\U0001f600"]))
    extra = draw(st.integers(1, 4096))
    if draw(st.booleans()):
        count = MAX_CONTEXT_BYTES // len(char.encode()) + extra
        return {"blob": char * count}
    return {"many": [char] * (MAX_CONTEXT_BYTES // (len(char.encode()) + 3) + extra)}


bad_contexts = st.one_of(
    st.lists(st.integers(), max_size=3),
    st.text(max_size=5),
    st.integers(),
    st.builds(Opaque),
    context_with_a_bad_leaf(),
    st.builds(lambda key, value: {key: value}, bad_keys_of_objects, st.integers()),
    st.integers(1, 8).flatmap(lambda extra: deep_context(extra=extra)),
    oversized_context(),
)
bad_references = st.one_of(
    bad_identifier(REFERENCE_LENGTH, prefix="k:"),
    st.text(st.characters(exclude_characters=":"), max_size=10),  # no colon (or empty)
    st.text(ident_chars, max_size=5).map(lambda text: ":" + text),  # no kind
    reference_kinds.map(lambda text: text + ":"),  # no identifier
)
bad_verbs = st.one_of(
    bad_identifier(VERB_LENGTH),
    st.just(""),
    st.text(ident_chars, min_size=1, max_size=5).flatmap(
        lambda text: st.sampled_from([" " + text, text + " ", "\u2003" + text, text + "\u00a0"])
    ),
)
bad_quantities = st.one_of(
    st.booleans(),
    st.floats(),
    st.text(max_size=3),
    st.decimals(allow_nan=False),
    st.integers(min_value=INT32_MAX + 1),
    st.integers(max_value=INT32_MIN - 1),
    huge_ints,
    st.builds(Opaque),
)
far_future = st.integers(1, 10**6).map(
    lambda minutes: datetime.now(UTC) + timedelta(minutes=6 + minutes)
)
bad_moments = st.one_of(
    st.datetimes(),  # naive
    st.dates(),
    st.text(max_size=20),
    st.integers(),
    st.floats(),
    st.datetimes(max_value=datetime(999, 12, 31), timezones=st.just(UTC)),
    far_future,
    st.builds(
        lambda minutes: datetime.min.replace(tzinfo=timezone(timedelta(minutes=minutes))),
        st.integers(1, 23 * 60),
    ),
    st.builds(
        lambda minutes: datetime.max.replace(tzinfo=timezone(timedelta(minutes=-minutes))),
        st.integers(1, 23 * 60),
    ),
)
bad_keys = st.one_of(bad_identifier(KEY_LENGTH), st.just(""))
bad_aliases = st.one_of(
    st.text(max_size=8).filter(lambda alias: alias != "default"),
    st.integers(),
    st.lists(st.just("default"), min_size=1, max_size=1),
)

BAD_ARGUMENTS = {
    "member": bad_references | st.none(),
    "verb": bad_verbs | st.none(),
    "object": bad_references,
    "quantity": bad_quantities,
    "context": bad_contexts,
    "occurred_at": bad_moments,
    "idempotency_key": bad_keys,
}


# -- record_activity ---------------------------------------------------------------------------
@examples(450, HealthCheck.filter_too_much)
@given(data=st.data())
def test_record_activity_refuses_bad_input(data: Any) -> None:
    field = data.draw(st.sampled_from([*BAD_ARGUMENTS, "using"]), label="field")
    if field == "using":
        value = data.draw(bad_aliases, label="value")
        call = {**base_activity(), "using": value}
    else:
        value = data.draw(BAD_ARGUMENTS[field], label="value")
        call = {**base_activity(), field: value}
    seen("test_record_activity_refuses_bad_input", field, value)
    member, verb = call.pop("member"), call.pop("verb")
    refused(lambda: record_activity(member, verb, **call), field)


@examples(200, HealthCheck.filter_too_much)
@given(data=st.data())
def test_record_activities_refuses_bad_input(data: Any) -> None:
    shape = data.draw(st.sampled_from(["container", "item", "field", "missing", "unknown"]))
    if shape == "container":
        items: Any = data.draw(
            st.one_of(
                st.integers(),
                st.floats(),
                st.none(),
                st.builds(Opaque),
                st.text(min_size=1, max_size=3),
                st.binary(min_size=1, max_size=3),
                st.dictionaries(st.sampled_from(["member", "verb"]), st.text(), max_size=2),
            )
        )
        expected = "items"
    else:
        items = [base_activity() for _ in range(data.draw(st.integers(1, 4)))]
        at = data.draw(st.integers(0, len(items)))
        if shape == "item":
            items.insert(at, data.draw(not_mappings))
            expected = f"items[{at}]"
        elif shape == "field":
            field = data.draw(st.sampled_from(list(BAD_ARGUMENTS)))
            items.insert(at, {**base_activity(), field: data.draw(BAD_ARGUMENTS[field])})
            expected = f"items[{at}].{field}"
        elif shape == "missing":
            field = data.draw(st.sampled_from(["member", "verb"]))
            item = base_activity()
            del item[field]
            items.insert(at, item)
            expected = f"items[{at}].{field}"
        else:
            name = data.draw(
                st.one_of(st.integers(), st.text(max_size=8)).filter(
                    lambda name: name not in {*BAD_ARGUMENTS, "using"}
                )
            )
            items.insert(at, {**base_activity(), name: 1})
            expected = f"items[{at}]"
    seen("test_record_activities_refuses_bad_input", shape, items)
    refused(lambda: record_activities(items), expected)


@examples(100, HealthCheck.filter_too_much)
@given(
    data=st.data(),
    field=st.sampled_from(["idempotency_key", "occurred_at", "using", "twin"]),
)
def test_cancel_activity_refuses_bad_input(data: Any, field: str) -> None:
    if field == "twin":  # a key that only differs from a recorded one by spaces was not recorded
        recorded = record_activity(**base_activity()).entry.idempotency_key
        key = recorded + " " * data.draw(st.integers(1, 3))
        seen("test_cancel_activity_refuses_bad_input", field, key)
        refused(lambda: cancel_activity(key), None, ActivityNotFound)
        return
    arguments: dict[str, Any] = {"idempotency_key": "input:never-recorded"}
    if field == "idempotency_key":
        arguments[field] = data.draw(bad_keys | st.none())
    elif field == "occurred_at":
        arguments[field] = data.draw(bad_moments)
    else:
        arguments[field] = data.draw(bad_aliases)
    seen("test_cancel_activity_refuses_bad_input", field, arguments)
    key = arguments.pop("idempotency_key")
    refused(lambda: cancel_activity(key, **arguments), field)


# -- entries -----------------------------------------------------------------------------------
BAD_FILTERS: dict[str, st.SearchStrategy[Any]] = {
    "member": bad_references,
    "object": bad_references,
    "verb": bad_verbs,
    "verb_prefix": bad_verbs,
    "since": bad_moments.filter(
        lambda value: not isinstance(value, datetime) or value.tzinfo is None
    )
    | st.builds(
        lambda minutes: datetime.min.replace(tzinfo=timezone(timedelta(minutes=minutes))),
        st.integers(1, 23 * 60),
    ),
    "until": st.one_of(st.datetimes(), st.dates(), st.text(max_size=5), st.integers()),
    "kind": st.one_of(
        st.text(max_size=10).filter(lambda kind: kind not in ("recorded", "cancelled")),
        st.integers(),
        st.lists(st.just("recorded"), max_size=1),
    ),
    "after_position": st.one_of(
        st.integers(min_value=2**63),
        st.integers(max_value=-(2**63) - 1),
        st.floats(),
        st.text(max_size=3),
        st.booleans(),
    ),
    "before_position": st.one_of(
        st.integers(min_value=2**63), st.decimals(allow_nan=False), st.booleans()
    ),
    "newest_first": st.one_of(st.integers(), st.text(max_size=2), st.floats()),
    "limit": st.one_of(
        st.integers(max_value=0),
        st.integers(min_value=10_001),
        st.booleans(),
        st.floats(),
        st.text(max_size=2),
    ),
    "using": bad_aliases,
}


@examples(250, HealthCheck.filter_too_much)
@given(data=st.data())
def test_entries_refuses_bad_filters(data: Any) -> None:
    field = data.draw(st.sampled_from(list(BAD_FILTERS)))
    value = data.draw(BAD_FILTERS[field])
    seen("test_entries_refuses_bad_filters", field, value)
    refused(lambda: entries(**{field: value}), field)


@examples(120, HealthCheck.filter_too_much)
@given(
    member=st.none() | good_references,
    verb=st.none() | good_verbs,
    prefix=st.none() | good_verbs.map(lambda verb: verb[:3].strip() or "v"),
    since=st.none() | good_moments,
    until=st.none() | good_moments,
    kind=st.sampled_from([None, "recorded", "cancelled"]),
    after=st.none() | st.integers(-(2**63), 2**63 - 1),
    before=st.none() | st.integers(-(2**63), 2**63 - 1),
    newest_first=st.booleans(),
    limit=st.integers(1, 10_000),
)
def test_entries_with_valid_filters_only_returns_what_matches(
    member: str | None,
    verb: str | None,
    prefix: str | None,
    since: datetime | None,
    until: datetime | None,
    kind: str | None,
    after: int | None,
    before: int | None,
    newest_first: bool,
    limit: int,
) -> None:
    filters = {
        "member": member,
        "verb": verb,
        "verb_prefix": prefix,
        "since": since,
        "until": until,
        "kind": kind,
        "after_position": after,
        "before_position": before,
        "newest_first": newest_first,
        "limit": limit,
    }
    seen("test_entries_with_valid_filters_only_returns_what_matches", filters)
    found = entries(**filters)
    assert len(found) <= limit
    positions = [entry.position for entry in found]
    assert positions == sorted(positions, reverse=newest_first)
    for entry in found:
        assert member is None or entry.member == member
        assert verb is None or entry.verb == verb
        assert prefix is None or entry.verb.startswith(prefix)
        assert since is None or entry.occurred_at >= since
        assert until is None or entry.occurred_at < until
        assert kind is None or entry.kind == kind
        assert after is None or entry.position > after
        assert before is None or entry.position < before


# -- projections -------------------------------------------------------------------------------
bad_names = st.one_of(
    not_strings,
    st.just(""),
    st.integers(PROJECTION_NAME_LENGTH + 1, PROJECTION_NAME_LENGTH + 20).map(lambda n: "p" * n),
    st.builds(_with, st.text(ident_chars, min_size=1, max_size=8), controls, st.integers(0, 8)),
    st.builds(_with, st.text(ident_chars, min_size=1, max_size=8), surrogates, st.integers(0, 8)),
)
bad_seconds = st.one_of(
    st.sampled_from([math.nan, math.inf, -math.inf]),
    st.floats(max_value=-1e-9),
    st.integers(max_value=-1),
    st.text(max_size=3),
    st.booleans(),
    st.builds(Opaque),
)
bad_positions = st.one_of(
    st.integers(min_value=2**63),
    st.integers(max_value=-(2**63) - 1),
    st.floats(),
    st.text(max_size=3),
    st.booleans(),
    st.none(),
)
bad_batch_sizes = st.one_of(
    st.integers(max_value=0), st.integers(min_value=10_001), st.floats(), st.booleans(), st.text()
)
naive_or_wrong_moments = st.one_of(st.datetimes(), st.dates(), st.text(max_size=5), st.integers())
unknown_names = st.text(ident_chars, min_size=1, max_size=PROJECTION_NAME_LENGTH).filter(
    lambda name: name != LEDGER and not name.startswith("tests.")
)


def _stopped() -> threading.Event:
    """A stop event already set: a call that wrongly accepted its arguments returns at once
    (and then fails the test) instead of following forever."""
    stop = threading.Event()
    stop.set()
    return stop


PROJECTION_CALLS: dict[str, tuple[st.SearchStrategy[Any], Callable[[Any], Any], str | None]] = {
    "catch_up.name": (bad_names, lambda v: catch_up(v), "name"),
    "catch_up.batch_size": (bad_batch_sizes, lambda v: catch_up(LEDGER, v), "batch_size"),
    "catch_up.stop": (
        st.one_of(st.integers(), st.text(max_size=2)),
        lambda v: catch_up(LEDGER, stop=v),
        "stop",
    ),
    "catch_up.using": (bad_aliases, lambda v: catch_up(LEDGER, using=v), "using"),
    "catch_up.unknown": (unknown_names, lambda v: catch_up(v), None),
    "rebuild.name": (bad_names | st.none(), lambda v: rebuild(v), "name"),
    "rebuild.since": (naive_or_wrong_moments, lambda v: rebuild(LEDGER, since=v), "since"),
    "rebuild.until": (naive_or_wrong_moments, lambda v: rebuild(LEDGER, until=v), "until"),
    "rebuild.progress": (
        st.one_of(st.integers(), st.text(max_size=2)),
        lambda v: rebuild(LEDGER, progress=v),
        "progress",
    ),
    "rebuild.unknown": (unknown_names, lambda v: rebuild(v), None),
    "wait_until_projected.name": (bad_names, lambda v: wait_until_projected(v, 1, 0), "name"),
    "wait_until_projected.position": (
        bad_positions,
        lambda v: wait_until_projected(LEDGER, v, 0),
        "position",
    ),
    "wait_until_projected.timeout": (
        bad_seconds,
        lambda v: wait_until_projected(LEDGER, 1, v),
        "timeout",
    ),
    "follow.stop": (
        st.one_of(st.none(), st.integers(), st.text(max_size=2)),
        lambda v: follow(stop=v),
        "stop",
    ),
    "follow.poll_interval": (
        bad_seconds | st.just(0),
        lambda v: follow(stop=_stopped(), poll_interval=v),
        "poll_interval",
    ),
    "follow.name": (bad_names, lambda v: follow(v, stop=_stopped()), "name"),
    "follow.batch_size": (
        bad_batch_sizes,
        lambda v: follow(batch_size=v, stop=_stopped()),
        "batch_size",
    ),
    "follow.on_result": (
        st.one_of(st.integers(), st.text(max_size=2)),
        lambda v: follow(stop=_stopped(), on_result=v),
        "on_result",
    ),
}


@examples(220, HealthCheck.filter_too_much)
@given(data=st.data())
def test_the_projection_api_refuses_bad_input(data: Any) -> None:
    name = data.draw(st.sampled_from(list(PROJECTION_CALLS)))
    strategy, call, field = PROJECTION_CALLS[name]
    value = data.draw(strategy)
    seen("test_the_projection_api_refuses_bad_input", name, value)
    error = UnknownProjection if name.endswith(".unknown") else InvalidActivity
    refused(lambda: call(value), field, error)


# -- valid edge values round-trip ----------------------------------------------------------------
def same(left: Any, right: Any) -> bool:
    """Equal and of the same type, recursively (so 1 is not 1.0 and True is not 1)."""
    if type(left) is not type(right):
        return False
    if isinstance(left, dict):
        return left.keys() == right.keys() and all(same(v, right[k]) for k, v in left.items())
    if isinstance(left, list):
        return len(left) == len(right) and all(same(a, b) for a, b in zip(left, right, strict=True))
    return bool(left == right)


def as_stored(context: Any) -> Any:
    """What a context is once stored: -0.0 is 0.0 (tuples would be lists)."""
    if isinstance(context, float) and context == 0:
        return 0.0
    if isinstance(context, dict):
        return {key: as_stored(value) for key, value in context.items()}
    if isinstance(context, list | tuple):
        return [as_stored(value) for value in context]
    return context


def expected_moment(activity: dict[str, Any], recorded_at: datetime) -> datetime:
    given_moment = activity.get("occurred_at")
    if given_moment is None:
        return recorded_at
    return given_moment.astimezone(UTC).replace(microsecond=0)


def check_round_trip(activity: dict[str, Any], entry: Any) -> None:
    (read,) = entries(kind=None, after_position=entry.position - 1, limit=1)
    assert read == entry
    for found in (entry, read):
        assert same(found.member, activity["member"])
        assert same(found.verb, activity["verb"])
        assert same(found.object, activity.get("object"))
        assert same(found.quantity, activity.get("quantity", 1))
        assert same(found.idempotency_key, activity["idempotency_key"])
        assert same(found.context, as_stored(activity.get("context", {}))), found.context
        assert same(found.occurred_at, expected_moment(activity, found.recorded_at))
        assert found.occurred_at.tzinfo is UTC and found.recorded_at.tzinfo is UTC


@pytest.fixture
def unbounded_future(settings: Any) -> None:
    """Dates up to year 9999 are valid edge values once ``MAX_FUTURE`` is None."""
    settings.TILTTEK_ACTIVITY = {**(settings.TILTTEK_ACTIVITY or {}), "MAX_FUTURE": None}


@examples(160, HealthCheck.filter_too_much)
@given(activity=good_activities())
def test_valid_edge_values_round_trip_through_record_activity(
    unbounded_future: None, activity: dict[str, Any]
) -> None:
    seen("test_valid_edge_values_round_trip_through_record_activity", activity)
    activity = fresh(activity)
    recorded = record_activity(**activity)
    assert recorded.created
    check_round_trip(activity, recorded.entry)
    retry = record_activity(**activity)  # identical: never a conflict, same kept entry
    assert retry.created is False and retry.entry == recorded.entry


@examples(40, HealthCheck.filter_too_much)
@given(activities=st.lists(good_activities(), min_size=1, max_size=6))
def test_valid_edge_values_round_trip_through_record_activities(
    unbounded_future: None, activities: list[dict[str, Any]]
) -> None:
    seen("test_valid_edge_values_round_trip_through_record_activities", activities)
    activities = [fresh(activity) for activity in activities]
    results = record_activities(activities)
    assert [result.created for result in results] == [True] * len(activities)
    for activity, result in zip(activities, results, strict=True):
        check_round_trip(activity, result.entry)
    assert [r.entry for r in record_activities(activities)] == [r.entry for r in results]


@examples(40, HealthCheck.filter_too_much)
@given(activity=good_activities(), spaces=st.integers(1, 3))
def test_trailing_spaces_make_other_keys_and_references(
    unbounded_future: None, activity: dict[str, Any], spaces: int
) -> None:
    seen("test_trailing_spaces_make_other_keys_and_references", activity, spaces)
    key = fresh(activity)["idempotency_key"].rstrip(" ")[: KEY_LENGTH - spaces]
    member = activity["member"].rstrip(" ")[: REFERENCE_LENGTH - spaces]
    assume(member.partition(":")[2] != "")
    plain = {**activity, "idempotency_key": key, "member": member}
    spaced = {**plain, "idempotency_key": key + " " * spaces, "member": member + " " * spaces}
    first = record_activity(**plain)
    second = record_activity(**spaced)
    assert first.created and second.created
    assert first.entry.position != second.entry.position
    assert entries(member=member, kind=None, after_position=first.entry.position - 1) == [
        first.entry
    ]
    assert entries(
        member=member + " " * spaces, kind=None, after_position=second.entry.position - 1
    ) == [second.entry]
    cancelled = cancel_activity(key + " " * spaces).entry
    assert cancelled.idempotency_key == key + " " * spaces and cancelled.member == spaced["member"]


def test_every_documented_error_is_an_activity_error() -> None:
    """The base class the properties above check for."""
    for error in (InvalidActivity, ActivityNotFound, UnknownProjection):
        assert issubclass(error, ActivityError)
    assert issubclass(InvalidActivity, ValueError)
    assert not issubclass(ActivityError, (TypeError, UnicodeError))
