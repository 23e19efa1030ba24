"""Property-based bad input for every public entry point of ``solid_objects`` (issue 9).

Entry points: ``Actor.ref()`` and ``solid_objects.ref()`` (types and ids), sync calls and
``sync(timeout=, idempotency_key=)``, ``enqueue(available_at=, idempotency_key=)``, operation
arguments, ``find_message()``, ``snapshot()``, ``destroy()``,
``MessageReference.result(timeout=)`` and rejections raised by handlers.

Properties:

- **bad input** raises the documented typed error (a ``SolidObjectsError``, never a raw
  database, ``UnicodeEncodeError``, ``TypeError`` or ``ValueError``) and no row of any
  ``solid_objects`` table changes, not even this process's ``processes`` row;
- **a turn's bad output** (results, state, rejection details, staged effects, messages and
  reminders) fails that turn alone, at once, with a dead letter naming ``InvalidPayload``;
- **valid edge values** (floats such as ``1e23``, ``1e16``, ``5e-324`` and the largest
  float, integers up to 4,300 digits, any Unicode text outside NUL and lone surrogates,
  astral plane included, empty strings and containers, nesting at the database's limit)
  come back equal and of the same type, recursively: from a sync call that returns its
  argument, from the stored result, from the state (``snapshot()`` and a cold activation),
  from a rejection's details; an identical idempotent retry never conflicts.

``max_examples`` keeps the module well under two minutes per database. The number of
distinct generated inputs (by ``repr``) per test is printed at the end and merged into the
JSON file named by ``SOLID_HYPOTHESIS_COUNTS`` when it is set.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from datetime import UTC, datetime, timedelta, timezone, tzinfo
from decimal import Decimal
from typing import Any

import pytest
from django.db import connection, connections
from hypothesis import given
from hypothesis import strategies as st

import solid_objects
from solid_objects import (
    IdempotencyConflict,
    InvalidArguments,
    InvalidPayload,
    MessageFailed,
    Rejected,
    SolidObjectsError,
    SyncTimeout,
    UnknownActorType,
)
from solid_objects.actor import REJECTION_CODE
from solid_objects.conf import get_settings, table
from solid_objects.db.vendors import dialect_for
from solid_objects.models import DeadLetter, Message
from solid_objects.sync import caller_cache
from tests.conftest import SOLID_OBJECTS_DELETE_ORDER
from tests.support.generated import InputCounter, examples
from tests.testapp.actors.inputs import BAD_VALUES, Echo

pytestmark = pytest.mark.django_db(transaction=True)


counter = InputCounter("solid_objects")
_count_distinct_inputs = counter.fixture()
seen = counter.seen


# -- rows ----------------------------------------------------------------------------------------
def rows() -> tuple[int, ...]:
    """Rows per solid_objects table, plus sums that any write to an instance changes."""
    database = connections[get_settings().DATABASE]
    quote = database.ops.quote_name
    counts = [f"(SELECT COUNT(*) FROM {quote(table(name))})" for name in SOLID_OBJECTS_DELETE_ORDER]
    instances = quote(table("instances"))
    sums = [
        f"(SELECT COALESCE(SUM({column}), 0) FROM {instances})"
        for column in ("next_message_sequence", "state_revision", "activation_generation")
    ]
    with database.cursor() as cursor:
        cursor.execute(f"SELECT {', '.join(counts + sums)}", [])
        return tuple(int(value) for value in cursor.fetchone())


def refused(call: Callable[[], Any], error: type[SolidObjectsError] = InvalidPayload) -> Any:
    """``call()`` raises ``error`` (a SolidObjectsError) and writes nothing."""
    before = rows()
    with pytest.raises(error) as caught:
        call()
    assert isinstance(caught.value, SolidObjectsError)
    assert rows() == before, "bad input changed rows"
    return caught.value


def max_depth() -> int:
    return dialect_for(connection).json_max_depth


_ids = itertools.count()


def fresh_id(prefix: str) -> str:
    return f"{prefix}-{next(_ids)}"


# -- strategies -----------------------------------------------------------------------------------
#: Text every database stores as given: anything but NUL and lone surrogates.
good_text = st.text(st.characters(exclude_categories=("Cs",), exclude_characters="\x00"))
short_text = st.text(
    st.characters(exclude_categories=("Cs",), exclude_characters="\x00"), max_size=12
)
EDGE_FLOATS = [
    1e23,
    1e16,
    1e22,
    9999999999999998.0,
    5e-324,
    2.2250738585072014e-308,
    1.7976931348623157e308,
    -1.7976931348623157e308,
    1.5e300,
    123456789012345680000.0,
    1e-7,
    0.1,
    0.0,
    -1.0,
    2.0**53,
    2.0**63,
]
good_floats = st.sampled_from(EDGE_FLOATS) | st.floats(allow_nan=False, allow_infinity=False)
LIMIT_INT = 10**4300 - 1  # 4,300 digits: the largest accepted
good_ints = (
    st.integers(min_value=-(2**70), max_value=2**70)
    | st.sampled_from([LIMIT_INT, -LIMIT_INT, 2**63, -(2**63) - 1, 2**64, 10**4299])
    | st.integers(min_value=1, max_value=4300).map(lambda digits: 10 ** (digits - 1) + 7)
)
good_leaves = st.none() | st.booleans() | good_ints | good_floats | good_text
good_json = st.recursive(
    good_leaves,
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(short_text, children, max_size=4)
    ),
    max_leaves=12,
)


def nested(depth: int, leaf: Any, kinds: list[str]) -> Any:
    """``depth`` levels of arrays/objects (kinds[i] is "list" or "dict") around ``leaf``."""
    value = leaf
    for kind in kinds[:depth]:
        value = [value] if kind == "list" else {"k": value}
    return value


@st.composite
def deep_json(draw: Any, extra: int = 0) -> Any:
    """A value nested exactly at the database's limit for an argument (``extra`` more)."""
    depth = max_depth() - 1 + extra  # the arguments object adds one level
    kinds = draw(st.lists(st.sampled_from(["list", "dict"]), min_size=depth, max_size=depth))
    return nested(depth, draw(good_leaves), kinds)


class Opaque:
    """An object that is not JSON (with a stable repr, so distinct inputs count right)."""

    def __repr__(self) -> str:
        return "Opaque()"


class NoOffset(tzinfo):
    """A tzinfo whose datetimes are naive after all (utcoffset() is None)."""

    def utcoffset(self, dt: datetime | None) -> timedelta | None:
        return None

    def __repr__(self) -> str:
        return "NoOffset()"


def _with(text: str, inserted: str, at: int) -> str:
    at = min(at, len(text))
    return text[:at] + inserted + text[at:]


nul_text = st.builds(_with, short_text, st.just("\x00"), st.integers(0, 12))
surrogate_text = st.builds(
    _with, short_text, st.integers(0xD800, 0xDFFF).map(chr), st.integers(0, 12)
)
bad_text = nul_text | surrogate_text
#: More than 4,300 digits, from exactly 10**4300 up (built lazily: hypothesis reprs constants).
huge_ints = st.integers(min_value=4300, max_value=4400).map(lambda exponent: 10**exponent)
bad_leaves = st.one_of(
    bad_text,
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
    st.dictionaries(bad_text, good_leaves, min_size=1, max_size=2),
    st.dictionaries(
        st.integers() | st.none() | st.booleans() | st.floats(allow_nan=False) | st.tuples(),
        good_leaves,
        min_size=1,
        max_size=2,
    ),
)


def _in_list(parts: tuple[list[Any], Any, list[Any]]) -> list[Any]:
    before, bad, after = parts
    return [*before, bad, *after]


def _in_dict(parts: tuple[dict[str, Any], str, Any]) -> dict[str, Any]:
    others, key, bad = parts
    return {**others, key: bad}


#: Valid JSON with one bad value somewhere inside (or too deep as a whole).
bad_json = st.recursive(
    bad_leaves,
    lambda inner: (
        st.tuples(st.lists(good_json, max_size=2), inner, st.lists(good_json, max_size=2)).map(
            _in_list
        )
        | st.tuples(st.dictionaries(short_text, good_json, max_size=2), short_text, inner).map(
            _in_dict
        )
    ),
    max_leaves=4,
) | deep_json(extra=1)

bad_identifiers = st.one_of(
    st.just(""),
    st.text(min_size=192, max_size=200),
    bad_text.filter(bool),
    st.integers(),
    st.floats(allow_nan=False),
    st.binary(min_size=1, max_size=4),
    st.lists(short_text, max_size=2),
    st.booleans(),
)
good_identifiers = st.text(
    st.characters(exclude_categories=("Cs",), exclude_characters="\x00"),
    min_size=1,
    max_size=191,
)
bad_timeouts = st.one_of(
    st.just(math.nan),
    st.floats(max_value=0.0),  # zero, negatives, -inf
    st.integers(max_value=0),
    st.text(max_size=5),
    st.booleans(),
    st.lists(st.integers(), max_size=2),
    st.decimals(allow_nan=True),
    st.timedeltas(),
)
unconvertible_timeouts = st.one_of(
    st.just(math.nan),
    st.text(max_size=5),
    st.booleans(),
    st.lists(st.integers(), max_size=2),
    st.decimals(allow_nan=True),
    st.builds(Opaque),
)
bad_moments = st.one_of(
    st.datetimes(),  # naive
    st.datetimes(timezones=st.just(NoOffset())),
    st.dates(),
    st.text(max_size=10),
    st.integers(),
    st.floats(allow_nan=False),
    # Aware, but outside the datetime range once converted to UTC.
    st.datetimes(min_value=datetime(9999, 12, 31, 20)).map(
        lambda moment: moment.replace(tzinfo=timezone(timedelta(hours=-5)))
    ),
    st.datetimes(max_value=datetime(1, 1, 1, 3)).map(
        lambda moment: moment.replace(tzinfo=timezone(timedelta(hours=5)))
    ),
)


# -- the same value, type for type -----------------------------------------------------------------
def assert_same(got: Any, expected: Any, path: str = "value") -> None:
    """Equal and of the same type, recursively (``-0.0`` is stored as ``0.0``)."""
    assert type(got) is type(expected), f"{path}: {type(got).__name__} != {type(expected).__name__}"
    if isinstance(expected, dict):
        assert got.keys() == expected.keys(), path
        for key, item in expected.items():
            assert_same(got[key], item, f"{path}[{key!r}]")
    elif isinstance(expected, list):
        assert len(got) == len(expected), path
        for index, (left, right) in enumerate(zip(got, expected, strict=True)):
            assert_same(left, right, f"{path}[{index}]")
    else:
        assert got == expected, path


# -- references: actor types and ids ---------------------------------------------------------------
@examples(300)
@given(actor_id=bad_identifiers)
def test_bad_actor_ids_are_refused(actor_id):
    seen("test_bad_actor_ids_are_refused", actor_id)
    refused(lambda: Echo.ref(actor_id))
    refused(lambda: solid_objects.ref("tests.inputs.echo", actor_id))


@examples(120)
@given(actor_type=st.one_of(good_text, bad_text, st.integers(), st.none(), st.lists(st.none())))
def test_unknown_actor_types_are_refused(actor_type):
    seen("test_unknown_actor_types_are_refused", actor_type)
    if isinstance(actor_type, str) and actor_type in solid_objects.registry.actor_types():
        return
    refused(lambda: solid_objects.ref(actor_type, "x"), UnknownActorType)


@examples(60)
@given(actor_id=good_identifiers, key=good_identifiers)
def test_any_valid_actor_id_reads_as_absent_and_round_trips(actor_id, key):
    """Reads of an actor that does not exist write nothing; a call then creates exactly
    that actor (ids are compared byte for byte on every database)."""
    seen("test_any_valid_actor_id_reads_as_absent_and_round_trips", actor_id, key)
    actor_id = f"{actor_id[:180]}#{next(_ids)}"
    ref = Echo.ref(actor_id)
    before = rows()
    assert ref.snapshot().exists is False
    assert ref.find_message(key) is None
    assert ref.destroy() is False
    assert rows() == before
    assert ref.sync(idempotency_key=key).echo(actor_id) == actor_id
    assert ref.find_message(key).outcome().result == actor_id
    assert ref.snapshot().exists is True
    assert ref.destroy() is True
    assert ref.snapshot().exists is False


# -- arguments -----------------------------------------------------------------------------------
@examples(400)
@given(value=bad_json)
def test_bad_arguments_are_refused_by_sync_calls_and_enqueue(value):
    seen("test_bad_arguments_are_refused_by_sync_calls_and_enqueue", value)
    ref = Echo.ref("arguments")
    refused(lambda: ref.echo(value))
    refused(lambda: ref.sync(idempotency_key="bad-arguments").echo(value))
    refused(lambda: ref.enqueue().keep(value=value))
    refused(lambda: ref.enqueue(idempotency_key="bad-arguments").refuse(details=value))


@examples(100)
@given(
    args=st.lists(good_leaves, min_size=2, max_size=3),
    names=st.lists(short_text.filter(lambda name: name != "value"), min_size=1, max_size=2),
)
def test_arguments_that_do_not_match_the_operation_are_refused(args, names):
    seen("test_arguments_that_do_not_match_the_operation_are_refused", args, names)
    ref = Echo.ref("signature")
    kwargs = dict.fromkeys(names, 1)
    error = refused(lambda: ref.echo(*args), InvalidArguments)
    assert isinstance(error, TypeError)  # what Python itself raises for a bad call
    refused(lambda: ref.enqueue().echo(**kwargs), InvalidArguments)
    refused(lambda: ref.sync(timeout=5).refuse(1, 2), InvalidArguments)


# -- sync(...) and enqueue(...) options ------------------------------------------------------------
@examples(300)
@given(timeout=bad_timeouts, key=bad_identifiers)
def test_bad_sync_options_are_refused(timeout, key):
    seen("test_bad_sync_options_are_refused", timeout, key)
    ref = Echo.ref("sync-options")
    refused(lambda: ref.sync(timeout=timeout))
    refused(lambda: ref.sync(timeout=timeout).echo(1))
    refused(lambda: ref.sync(idempotency_key=key).echo(1))
    refused(lambda: ref.sync(timeout=1.0, idempotency_key=key))


@examples(30)
@given(
    timeout=st.floats(min_value=1.0, allow_nan=False) | st.integers(min_value=1) | st.just(math.inf)
)
def test_any_positive_sync_timeout_works(timeout):
    """Any positive number of seconds is a deadline (``math.inf``: none), however large:
    lock waits follow it up to a bound every database accepts."""
    seen("test_any_positive_sync_timeout_works", timeout)
    assert Echo.ref("timeouts").sync(timeout=timeout).echo("in time") == "in time"


@examples(300)
@given(available_at=bad_moments, key=bad_identifiers)
def test_bad_enqueue_options_are_refused(available_at, key):
    seen("test_bad_enqueue_options_are_refused", available_at, key)
    ref = Echo.ref("enqueue-options")
    refused(lambda: ref.enqueue(available_at=available_at))
    refused(lambda: ref.enqueue(available_at=available_at).echo(1))
    refused(lambda: ref.enqueue(idempotency_key=key).echo(1))


@examples(60)
@given(available_at=st.datetimes(timezones=st.timezones()).filter(lambda m: _in_utc_range(m)))
def test_any_aware_available_at_is_stored_as_given(available_at):
    seen("test_any_aware_available_at_is_stored_as_given", available_at)
    message = Echo.ref(fresh_id("later")).enqueue(available_at=available_at).echo(1)
    stored = Message.objects.get(id=message.id).available_at
    assert stored.astimezone(UTC) == available_at.astimezone(UTC)  # ambiguous local times too


def _in_utc_range(moment: datetime) -> bool:
    try:
        moment.astimezone(UTC)
    except OverflowError:
        return False
    return True


# -- find_message, result(timeout=) ----------------------------------------------------------------
@examples(300)
@given(key=bad_identifiers)
def test_bad_keys_are_refused_by_find_message(key):
    seen("test_bad_keys_are_refused_by_find_message", key)
    refused(lambda: Echo.ref("keys").find_message(key))


@examples(150)
@given(timeout=unconvertible_timeouts | st.floats(max_value=0.0) | st.integers(max_value=0))
def test_result_timeouts(timeout):
    """``result(timeout=)``: NaN and non-numbers are refused; zero or less does not wait
    (nor run the actor): ``SyncTimeout`` for a message still pending, the outcome of a
    finished one. Nothing is written either way."""
    seen("test_result_timeouts", timeout)
    pending = _message("pending", run=False)
    done = _message("done", run=True)
    bad = isinstance(timeout, bool) or not isinstance(timeout, int | float)
    if bad or math.isnan(timeout):
        refused(lambda: pending.result(timeout=timeout))
        refused(lambda: done.result(timeout=timeout))
        return
    refused(lambda: pending.result(timeout=timeout), SyncTimeout)
    before = rows()
    assert done.result(timeout=timeout) == "done"
    assert pending.status() == "ready"
    assert rows() == before


_messages: dict[str, Any] = {}


def _message(name: str, *, run: bool) -> Any:
    """One message per test (the tables are emptied after each test, not each example)."""
    message = _messages.get(name)
    if message is None or message.status() == "unknown":
        ref = Echo.ref(fresh_id(name))
        if run:
            ref.sync(idempotency_key=name).echo(name)
            message = ref.find_message(name)
        else:
            message = ref.enqueue().echo(name)
        _messages[name] = message
    return message


# -- a turn's output -------------------------------------------------------------------------------
def _bad_recipe(kind: str) -> st.SearchStrategy[Any]:
    marker = st.just({"__bad__": kind})
    return st.recursive(
        marker,
        lambda inner: (
            st.tuples(st.lists(good_json, max_size=2), inner, st.just([])).map(_in_list)
            | st.tuples(st.dictionaries(short_text, good_json, max_size=2), short_text, inner).map(
                _in_dict
            )
        ),
        max_leaves=3,
    )


bad_recipes = st.sampled_from(sorted(BAD_VALUES)).flatmap(_bad_recipe)
TURN_OUTPUTS = ["return_built", "keep_built", "refuse_built", "emit_built", "send_built"]


@examples(60)
@given(operation=st.sampled_from(TURN_OUTPUTS), recipe=bad_recipes)
def test_a_turn_whose_output_cannot_be_stored_fails_at_once(operation, recipe):
    """Results, state, rejection details, effect and actor-message arguments: the turn fails
    on its first attempt without retry, the caller gets ``MessageFailed`` naming
    ``InvalidPayload``, the state and the outbox are unchanged and the actor moves on."""
    seen("test_a_turn_whose_output_cannot_be_stored_fails_at_once", operation, recipe)
    ref = Echo.ref(fresh_id("output"))
    assert ref.keep("before") is True
    before = rows()
    with pytest.raises(MessageFailed) as caught:
        getattr(ref.sync(timeout=30), operation)(recipe)
    assert caught.value.error["class"] == "solid_objects.errors.InvalidPayload"
    dead = DeadLetter.objects.get(message_id=caught.value.message_id)
    assert dead.attempts == 1
    after = dict(zip(SOLID_OBJECTS_DELETE_ORDER, rows(), strict=False))
    expected = dict(zip(SOLID_OBJECTS_DELETE_ORDER, before, strict=False))
    expected["messages"] += 1
    expected["dead_letters"] += 1
    assert after == expected  # nothing else: no claim, no ready row, no outbox row
    assert ref.snapshot().data == "before"
    assert ref.echo("next") == "next"


@examples(40)
@given(delay=st.one_of(bad_recipes, st.sampled_from([1e12, -1e12, 10**30]), short_text))
def test_a_reminder_with_a_bad_delay_fails_the_turn_at_once(delay):
    seen("test_a_reminder_with_a_bad_delay_fails_the_turn_at_once", delay)
    ref = Echo.ref(fresh_id("delay"))
    with pytest.raises(MessageFailed) as caught:
        ref.sync(timeout=30).schedule_built(delay)
    assert caught.value.error["class"] == "solid_objects.errors.InvalidPayload"
    assert DeadLetter.objects.get(message_id=caught.value.message_id).attempts == 1
    assert ref.echo(1) == 1


rejection_codes = st.from_regex(r"[A-Za-z_][A-Za-z0-9_]*", fullmatch=True) | short_text


@examples(80)
@given(code=rejection_codes, details=good_json)
def test_rejection_codes_raised_by_handlers(code, details):
    """A valid code reaches the caller as raised; any other string fails the turn at once
    (``InvalidRejectionCode``), through ``reject()`` or a ``Rejected`` raised directly."""
    seen("test_rejection_codes_raised_by_handlers", code, details)
    ref = Echo.ref(fresh_id("codes"))
    if REJECTION_CODE.match(code):
        with pytest.raises(Rejected) as caught:
            ref.raise_rejected(code)
        assert caught.value.code == code
        with pytest.raises(Rejected) as caught:
            ref.refuse_with(code, details)
        assert (caught.value.code, caught.value.message) == (code, "generated")
        assert_same(caught.value.details, details)
        return
    for call in (lambda: ref.raise_rejected(code), lambda: ref.refuse_with(code, details)):
        with pytest.raises(MessageFailed) as failed:
            call()
        assert failed.value.error["class"] == "solid_objects.errors.InvalidRejectionCode"
        assert DeadLetter.objects.get(message_id=failed.value.message_id).attempts == 1


# -- valid values come back exactly ----------------------------------------------------------------
def round_trip(test: str, value: Any) -> None:
    seen(test, value)
    ref = Echo.ref(fresh_id("round-trip"))
    key = fresh_id("key")
    # From the caller's own run of the turn, from the stored result, and on a retry.
    assert_same(ref.sync(idempotency_key=key).echo(value), value)
    message = ref.find_message(key)
    assert_same(message.outcome().result, value)
    assert_same(message.result(timeout=5), value)
    assert_same(ref.sync(idempotency_key=key).echo(value), value)  # no IdempotencyConflict
    # Through the state: the snapshot, and a cold activation reading it back.
    assert ref.keep(value) is True
    assert_same(ref.snapshot().data, value)
    caller_cache.clear()  # the next turn decodes the stored state
    assert_same(ref.current(), value)
    # A rejection's details, raised to the caller and read back from the message.
    with pytest.raises(Rejected) as caught:
        ref.sync(idempotency_key=f"{key}-refused").refuse(value)
    assert_same(caught.value.details, value)
    with pytest.raises(Rejected) as caught:
        ref.find_message(f"{key}-refused").result(timeout=5)
    assert_same(caught.value.details, value)


@examples(100)
@given(value=good_json)
def test_valid_values_come_back_equal_and_of_the_same_type(value):
    round_trip("test_valid_values_come_back_equal_and_of_the_same_type", value)


@examples(20)
@given(value=deep_json())
def test_values_nested_at_the_database_limit_come_back_exactly(value):
    round_trip("test_values_nested_at_the_database_limit_come_back_exactly", value)


@examples(50)
@given(value=good_floats | st.just(-0.0))
def test_identical_retries_of_any_float_never_conflict(value):
    """jsonb normalises numbers; the retry is compared decoded, type for type."""
    seen("test_identical_retries_of_any_float_never_conflict", value)
    ref = Echo.ref("retries")
    key = fresh_id("float")
    first = ref.enqueue(idempotency_key=key).echo({"b": [value], "a": value})
    again = ref.enqueue(idempotency_key=key).echo({"a": value, "b": [value]})
    assert again.id == first.id
    with pytest.raises(IdempotencyConflict):
        ref.enqueue(idempotency_key=key).echo({"a": value, "b": [int(value)]})


def test_decimal_and_other_numbers_are_not_silently_converted():
    """A Decimal (or any other non-JSON number) is refused rather than rounded to a float."""
    refused(lambda: Echo.ref("decimal").echo(Decimal("0.1")))
