"""Numbers come back as they went in, on every database (issue 9, defect 4).

PostgreSQL's ``jsonb`` keeps numbers as ``numeric`` and writes them back without an
exponent: ``1e+23`` came back as the integer ``10**23`` and ``1e16`` as an int, ``-0.0`` as
``0.0``, and an identical idempotent retry of such a call raised ``IdempotencyConflict``
(the stored text no longer matched). Floats from ``1e16`` up are now written positionally
with a ``.0``, which every database returns as written; ``-0.0`` is written as ``0.0``
everywhere; retries are compared decoded, type for type.
"""

from __future__ import annotations

import math

import pytest
from django.db import connection

from solid_objects import IdempotencyConflict, Rejected, payloads
from solid_objects.db.vendors import dialect_for
from solid_objects.sync import caller_cache
from tests.testapp.actors.inputs import Echo

pytestmark = pytest.mark.django_db(transaction=True)

FLOATS = [
    1e23,
    1e16,
    1e22,
    123456789012345680000.0,
    2.0**63,
    1.7976931348623157e308,
    -1.5e300,
    5e-324,
    2.2250738585072014e-308,
    1e-7,
]


def stored_arguments(message_id: int) -> str:
    """The message's arguments as the database returns their text."""
    dialect = dialect_for(connection)
    column = "arguments::text" if connection.vendor == "postgresql" else "arguments"
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT {column} FROM {dialect.t_messages} WHERE id = %s", [message_id])
        value = cursor.fetchone()[0]
    return value.decode() if isinstance(value, bytes) else value


@pytest.mark.parametrize("value", FLOATS, ids=repr)
def test_a_float_comes_back_a_float_from_every_path(value):
    ref = Echo.ref(f"float-{value!r}")
    assert_float(ref.sync(idempotency_key="call").echo(value), value)
    message = ref.find_message("call")
    assert_float(message.outcome().result, value)
    assert_float(ref.keep(value) and ref.snapshot().data, value)
    caller_cache.clear()  # the next turn decodes the stored state
    assert_float(ref.current(), value)
    with pytest.raises(Rejected) as caught:
        ref.sync(idempotency_key="refused").refuse({"value": value})
    assert_float(caught.value.details["value"], value)
    with pytest.raises(Rejected) as caught:
        ref.find_message("refused").result(timeout=5)
    assert_float(caught.value.details["value"], value)


def assert_float(got: object, expected: float) -> None:
    assert type(got) is float, f"{got!r} is a {type(got).__name__}"
    assert got == expected


def test_large_floats_are_stored_positionally_with_a_fraction():
    """The form jsonb keeps as written (and the other databases store as text)."""
    message = Echo.ref("stored").enqueue().echo([1e23, 1e16, -1.5e20])
    text = stored_arguments(message.id)
    assert "100000000000000000000000.0" in text
    assert "10000000000000000.0" in text
    assert "-150000000000000000000.0" in text
    assert "e+" not in text.lower()
    assert payloads.encode(1.7976931348623157e308) == "17976931348623157" + "0" * 292 + ".0"


def test_negative_zero_is_zero_on_every_database():
    ref = Echo.ref("negative-zero")
    for got in (ref.echo(-0.0), ref.echo([-0.0])[0], ref.keep(-0.0) and ref.snapshot().data):
        assert type(got) is float and got == 0.0
        assert math.copysign(1.0, got) == 1.0  # documented: the sign of zero is not kept


def test_an_identical_retry_with_such_numbers_never_conflicts():
    ref = Echo.ref("retries")
    first = ref.enqueue(idempotency_key="k").echo({"b": 1e23, "a": [1e16, -0.0, 5e-324]})
    again = ref.enqueue(idempotency_key="k").echo({"a": [1e16, 0.0, 5e-324], "b": 1e23})
    assert again.id == first.id
    assert ref.sync(idempotency_key="s").echo(1e23) == 1e23
    assert ref.sync(idempotency_key="s").echo(1e23) == 1e23  # the same message's result


@pytest.mark.parametrize(
    ("first", "second"),
    [
        (1, 1.0),
        (1.0, 1),
        (True, 1),
        (0, False),
        (1e23, 10**23),
        ([1], [1.0]),
        ({"a": 0}, {"a": 0.0}),
    ],
    ids=repr,
)
def test_a_retry_with_values_of_another_type_conflicts(first, second):
    """Equal in Python is not the same JSON: ``1`` and ``1.0`` and ``True`` differ."""
    ref = Echo.ref("types")
    ref.enqueue(idempotency_key="k").echo(first)
    with pytest.raises(IdempotencyConflict) as caught:
        ref.enqueue(idempotency_key="k").echo(second)
    assert caught.value.fields == ["arguments"]
