"""Options and keys of the public calls (issue 9, defect 8 in part).

- The first sync call of a process registered its ``processes`` row before validating its
  input: bad input now writes nothing at all.
- ``find_message()`` with a key that is not a string raised a raw ``ProgrammingError``.
- ``sync(timeout=NaN | inf | "abc")`` raised raw errors and a negative timeout behaved
  differently per database. Now, on every database: a sync call's timeout is a positive
  number of seconds (``math.inf``: no deadline), anything else raises ``InvalidPayload``
  before anything is written; ``result(timeout=)`` takes ``None`` or ``math.inf`` to wait as
  long as it takes, zero or less not to wait at all, and refuses NaN and non-numbers.
"""

from __future__ import annotations

import math
from datetime import datetime, timedelta, timezone
from decimal import Decimal

import pytest

from solid_objects import InvalidPayload, SyncTimeout
from solid_objects.models import Instance, Message, Process, ReadyMessage
from tests.testapp.actors.inputs import Echo

pytestmark = pytest.mark.django_db(transaction=True)


def counts() -> tuple[int, int, int, int]:
    return (
        Instance.objects.count(),
        Message.objects.count(),
        ReadyMessage.objects.count(),
        Process.objects.count(),
    )


@pytest.mark.parametrize(
    "call",
    [
        lambda ref: ref.echo({1, 2}),
        lambda ref: ref.echo("\x00"),
        lambda ref: ref.echo(math.nan),
        lambda ref: ref.sync(idempotency_key="").echo(1),
        lambda ref: ref.sync(idempotency_key="k" * 192).echo(1),
        lambda ref: ref.sync(timeout=-1).echo(1),
    ],
    ids=["set", "NUL", "NaN", "empty key", "long key", "negative timeout"],
)
def test_a_bad_first_sync_call_writes_nothing_not_even_the_process_row(call):
    with pytest.raises(InvalidPayload):
        call(Echo.ref("first"))
    assert counts() == (0, 0, 0, 0)


@pytest.mark.parametrize("key", [7, None, b"k", ["k"], 1.5, ""], ids=repr)
def test_find_message_refuses_a_key_that_is_not_a_non_empty_string(key):
    with pytest.raises(InvalidPayload):
        Echo.ref("find").find_message(key)


@pytest.mark.parametrize(
    "timeout",
    [
        math.nan,
        "abc",
        "2",
        True,
        [1],
        Decimal("1"),
        timedelta(seconds=1),
        0,
        0.0,
        -0.0,
        -1,
        -math.inf,
    ],
    ids=repr,
)
def test_a_sync_timeout_must_be_a_positive_number(timeout):
    ref = Echo.ref("timeouts")
    with pytest.raises(InvalidPayload):
        ref.sync(timeout=timeout)
    assert counts() == (0, 0, 0, 0)


@pytest.mark.parametrize("timeout", [math.inf, 1e300, 10**400, 30], ids=repr)
def test_any_positive_sync_timeout_is_a_deadline_and_inf_is_none(timeout):
    """Lock waits follow the deadline up to a bound every database accepts."""
    assert Echo.ref("long").sync(timeout=timeout).echo("ok") == "ok"


@pytest.mark.parametrize("timeout", [0, 0.0, -1, -math.inf], ids=repr)
def test_result_with_no_time_left_does_not_wait_nor_run_the_actor(timeout):
    ref = Echo.ref("no-wait")
    done = ref.sync(idempotency_key="done").echo("done") and ref.find_message("done")
    pending = ref.enqueue().echo("pending")
    before = counts()
    with pytest.raises(SyncTimeout) as caught:
        pending.result(timeout=timeout)
    assert caught.value.status == "ready"
    assert done.result(timeout=timeout) == "done"
    assert pending.status() == "ready"
    assert counts() == before


def test_result_with_an_infinite_timeout_waits_as_long_as_it_takes():
    pending = Echo.ref("forever").enqueue().echo("ran")
    assert pending.result(timeout=math.inf) == "ran"  # caller-assisted: runs it itself
    assert pending.result(timeout=None) == "ran"


@pytest.mark.parametrize("timeout", [math.nan, "abc", True, [1], Decimal("1")], ids=repr)
def test_result_refuses_a_timeout_that_is_not_a_number(timeout):
    pending = Echo.ref("bad-wait").enqueue().echo(1)
    with pytest.raises(InvalidPayload):
        pending.result(timeout=timeout)
    assert pending.status() == "ready"


@pytest.mark.parametrize(
    "available_at",
    [
        datetime(2030, 1, 1),  # naive
        "2030-01-01T00:00:00Z",
        1893456000,
        datetime(9999, 12, 31, 23, tzinfo=timezone(timedelta(hours=-5))),  # past year 9999 in UTC
        datetime(1, 1, 1, 1, tzinfo=timezone(timedelta(hours=5))),  # before year 1 in UTC
    ],
    ids=["naive", "text", "number", "after 9999 in UTC", "before 1 in UTC"],
)
def test_enqueue_refuses_a_moment_that_is_not_an_aware_datetime_in_range(available_at):
    ref = Echo.ref("later")
    with pytest.raises(InvalidPayload):
        ref.enqueue(available_at=available_at)
    with pytest.raises(InvalidPayload):
        ref.enqueue(available_at=available_at).echo(1)
    assert counts() == (0, 0, 0, 0)
