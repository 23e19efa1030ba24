"""The optional orjson encoder changes nothing but speed.

``payloads.encode`` writes with orjson (the ``orjson`` extra) only where orjson's text is
byte for byte the standard encoder's; these properties compare the two paths on every
value the other property tests generate (good and bad), on the subclasses and numbers where
the two encoders would differ, and with size limits: the same text, or the same error with
the same message.
"""

from __future__ import annotations

import enum
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from solid_objects import payloads
from solid_objects.errors import InvalidPayload, PayloadTooLarge
from tests.adversarial.test_actor_inputs import bad_json, good_json, short_text
from tests.support.generated import InputCounter, examples

orjson = pytest.importorskip("orjson")  # the dev extra installs it (and CI fails on a skip)

counter = InputCounter("fast JSON")
_count_distinct_inputs = counter.fixture()
seen = counter.seen


class Colour(enum.IntEnum):
    RED = 1


class Name(str):
    pass


class Ratio(float):
    pass


def _moved(value: dict[str, Any]) -> OrderedDict[str, Any]:
    """An OrderedDict whose order is not its underlying dict's (orjson reads the latter)."""
    ordered = OrderedDict(value)
    if ordered:
        ordered.move_to_end(next(iter(ordered)))
    return ordered


#: Values where orjson alone would write other text than the standard encoder.
tricky_leaves = st.one_of(
    st.floats(min_value=-1e-4, max_value=1e-4, allow_nan=False, exclude_min=True).filter(bool),
    st.sampled_from([1e-05, -9.99e-05, 5e-324, 0.0001, -0.0, 1e16, 2.0**64]),
    st.integers(min_value=2**63 - 2, max_value=2**64 + 2),
    st.just(Colour.RED),
    short_text.map(Name),
    st.floats(allow_nan=False, allow_infinity=False).map(Ratio),
)
tricky_json = st.recursive(
    good_json | tricky_leaves,
    lambda children: (
        st.lists(children, max_size=3)
        | st.lists(children, max_size=3).map(tuple)
        | st.dictionaries(short_text, children, max_size=3)
        | st.dictionaries(short_text, children, min_size=2, max_size=3).map(_moved)
        | st.dictionaries(short_text.map(Name), children, max_size=2)
    ),
    max_leaves=10,
)


def outcome(value: Any, limit: int | None = None, max_depth: int = payloads.MAX_DEPTH) -> Any:
    try:
        return payloads.encode(value, what="value", limit=limit, max_depth=max_depth)
    except (InvalidPayload, PayloadTooLarge) as exc:
        return type(exc), str(exc)


def both(value: Any, **options: Any) -> tuple[Any, Any]:
    """The outcome with orjson, then with the standard encoder alone."""
    fast = outcome(value, **options)
    saved = payloads._fast_dumps
    payloads._fast_dumps = None
    try:
        standard = outcome(value, **options)
    finally:
        payloads._fast_dumps = saved
    return fast, standard


@pytest.fixture(autouse=True)
def orjson_in_use() -> None:
    assert payloads._fast_dumps is orjson.dumps


def assert_same_text(value: Any) -> None:
    fast, standard = both(value)
    assert isinstance(standard, str)
    assert fast == standard


@examples(400)
@given(good_json)
def test_the_same_text_for_every_valid_value(value):
    seen("test_the_same_text_for_every_valid_value", value)
    assert_same_text(value)


@examples(400)
@given(tricky_json)
def test_the_same_text_where_orjson_alone_would_differ(value):
    seen("test_the_same_text_where_orjson_alone_would_differ", value)
    assert_same_text(value)


@examples(300)
@given(bad_json)
def test_the_same_error_for_every_refused_value(value):
    seen("test_the_same_error_for_every_refused_value", value)
    fast, standard = both(value)
    assert fast == standard  # refused (but for a value only too deep for the database)


@examples(300)
@given(good_json | tricky_json, st.integers(min_value=0, max_value=200))
def test_the_same_size_limit(value, limit):
    seen("test_the_same_size_limit", value, limit)
    fast, standard = both(value, limit=limit)
    assert fast == standard


@pytest.mark.parametrize(
    "value",
    [
        "\x00",
        {"a\x00": 1},
        ["\\u0000"],  # an escaped backslash followed by "u0000": stored as it is
        "\ud800",
        {"\udfff": 1},
        [[[[1]]]],
        10**4300,
        2**64,
        -(2**63) - 1,
        {"k": float("nan")},
        [1e-7, "é", {"ü": 2}],
    ],
    ids=payloads.short_repr,
)
def test_the_same_outcome_at_the_edges(value):
    for max_depth in (3, payloads.MAX_DEPTH):
        fast, standard = both(value, max_depth=max_depth)
        assert fast == standard


def test_nesting_past_orjsons_own_limit_takes_the_standard_path():
    value: Any = 1
    for _ in range(300):  # orjson refuses more than 254 levels
        value = [value]
    fast, standard = both(value, max_depth=400)
    assert isinstance(standard, str)
    assert fast == standard


def counting(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    calls: list[Any] = []
    real: Callable[[Any], bytes] = orjson.dumps

    def dumps(value: Any) -> bytes:
        calls.append(value)
        return real(value)

    monkeypatch.setattr(payloads, "_fast_dumps", dumps)
    return calls


def test_plain_values_are_written_by_orjson(monkeypatch):
    calls = counting(monkeypatch)
    state = {"items": [{"id": n, "price": n / 7, "tags": ["a", "é"], "ok": 1} for n in range(50)]}
    assert payloads.encode(state) == payloads._encoder.encode(state)
    assert len(calls) == 1


@pytest.mark.parametrize(
    "value",
    [[1e-05], {"k": Colour.RED}, [Name("x")], {Name("k"): 1}, _moved({"a": 1, "b": 2}), [1e17]],
    ids=repr,
)
def test_values_orjson_would_write_differently_never_reach_it(monkeypatch, value):
    calls = counting(monkeypatch)
    payloads.encode(value)
    assert calls == []
