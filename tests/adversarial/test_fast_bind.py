"""Binding arguments without ``Signature.bind`` changes nothing but speed.

``Operation.bind`` takes a shortcut when the operation's parameters can all be passed by
keyword (positional arguments are named by the parameters they fill); these properties
compare it with the full ``Signature.bind`` path on generated calls: the same stored dict
(keys in the signature's order) or the same error.
"""

from __future__ import annotations

import inspect
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from solid_objects.spec import Operation
from tests.support.generated import InputCounter, examples

counter = InputCounter("fast binding")
_count_distinct_inputs = counter.fixture()


def plain(self, amount, note="", *, flag=False):  # type: ignore[no-untyped-def]
    pass


def required_only(self, a, b):  # type: ignore[no-untyped-def]
    pass


def nothing(self):  # type: ignore[no-untyped-def]
    pass


def keyword_only(self, *, x, y=1):  # type: ignore[no-untyped-def]
    pass


def with_kwargs(self, a, **rest):  # type: ignore[no-untyped-def]
    pass


def with_args(self, a, *more):  # type: ignore[no-untyped-def]
    pass


def positional_only(self, a, /, b=2):  # type: ignore[no-untyped-def]
    pass


FUNCTIONS = [plain, required_only, nothing, keyword_only, with_kwargs, with_args, positional_only]
NAMES = ["amount", "note", "flag", "a", "b", "x", "y", "self", "rest", "more", "other"]


def operation(function: Any) -> Operation:
    return Operation(function.__name__, function, signature=inspect.signature(function))


def outcome(op: Operation, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    try:
        return ("bound", list(op.bind(args, kwargs).items()))  # the order matters
    except TypeError as exc:
        return ("refused", str(exc))


def slow(function: Any) -> Operation:
    op = operation(function)
    op.__dict__["_keywords"] = None  # the full Signature.bind path
    return op


@examples(500)
@given(
    st.sampled_from(FUNCTIONS),
    st.lists(st.integers(), max_size=3).map(tuple),
    st.dictionaries(st.sampled_from(NAMES), st.integers() | st.text(max_size=3), max_size=5),
)
def test_the_same_binding_as_signature_bind(function, args, kwargs):
    counter.seen("test_the_same_binding_as_signature_bind", function.__name__, args, kwargs)
    assert outcome(operation(function), args, kwargs) == outcome(slow(function), args, kwargs)


@pytest.mark.parametrize(
    ("function", "args", "kwargs"),
    [
        (plain, (), {"note": "n", "amount": 1}),
        (keyword_only, (), {"y": 2, "x": 1}),
        (nothing, (), {}),
        (plain, (1,), {}),
        (plain, (1, "n"), {"flag": True}),
        (required_only, (1,), {"b": 2}),
    ],
)
def test_plain_calls_take_the_shortcut_in_signature_order(monkeypatch, function, args, kwargs):
    op = operation(function)
    calls: list[Any] = []
    real = inspect.Signature.bind

    def spy(self: inspect.Signature, *args: Any, **kw: Any) -> Any:
        calls.append(args)
        return real(self, *args, **kw)

    monkeypatch.setattr(inspect.Signature, "bind", spy)
    bound = op.bind(args, kwargs)
    assert calls == []
    expected = inspect.signature(function).bind(None, *args, **kwargs).arguments
    assert list(bound.items()) == [(n, v) for n, v in expected.items() if n != "self"]


@pytest.mark.parametrize("function", [with_kwargs, with_args, positional_only])
def test_other_signatures_never_take_it(function):
    assert operation(function)._keywords is None
