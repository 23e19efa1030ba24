"""A committed turn that changes observables writes one broadcasts row per changed
observable, inside its fenced commit; nothing else does (§A10)."""

from __future__ import annotations

import pytest
from django.db import connection

from solid_objects import LostActivation, Rejected
from solid_objects.lease import acquire
from solid_objects.models import Broadcast, Instance, Message
from solid_objects.passes import run_pass
from solid_objects.runtime import processes
from tests.testapp.actors.broadcasts import Board
from tests.testapp.actors.core import Observed

pytestmark = pytest.mark.django_db(transaction=True)


def rows_of(message_id: int) -> dict[str, Broadcast]:
    return {b.observable_name: b for b in Broadcast.objects.filter(message_id=message_id)}


def test_a_turn_that_changes_two_observables_writes_two_rows():
    board = Board.ref("two")
    board.add_and_retitle("apple", "Fruit")
    message = Message.objects.get(actor_type="tests.board", actor_id="two")
    rows = rows_of(message.id)
    assert set(rows) == {"size", "title"}
    assert rows["size"].value == 1  # broadcast="value" carries the value
    assert rows["title"].value == {}  # invalidation only
    instance = Instance.objects.get(id=message.instance_id)
    for row in rows.values():
        assert row.status == "pending"
        assert row.attempt_count == 0
        assert row.instance_id == instance.id
        assert row.state_version == 1
        assert row.activation_generation == instance.activation_generation
        assert row.claimed_by_id is None
    assert rows["size"].broadcast_id != rows["title"].broadcast_id


def test_the_core_observed_actor_broadcasts_only_what_changed():
    observed = Observed.ref("one")
    observed.both("a", "first")
    observed.relabel("second")
    first, second = Message.objects.filter(actor_id="one").order_by("sequence")
    assert set(rows_of(first.id)) == {"item_count", "current_label"}
    assert set(rows_of(second.id)) == {"current_label"}


def test_a_turn_that_changes_no_observable_writes_none():
    board = Board.ref("quiet")
    board.add("x")
    before = Broadcast.objects.count()
    assert board.note() == 1  # state changes, observables do not
    board.retitle("")  # sets the same title again: nothing changed
    assert Broadcast.objects.count() == before


def test_failed_and_rejected_turns_write_none():
    board = Board.ref("unlucky")
    with pytest.raises(Rejected):
        board.add_then_reject("x")
    failing = board.enqueue().add_then_fail("y")
    owner = processes.register("worker", connection.alias)
    activation = acquire(connection.alias, owner, [failing.instance_id])
    assert activation is not None
    run_pass(activation)
    assert Message.objects.get(id=failing.id).attempt_count == 1  # failed, will retry
    assert Broadcast.objects.count() == 0


def test_a_fenced_out_turn_writes_none():
    board = Board.ref("fenced")
    message = board.enqueue().add("x")
    owner = processes.register("worker", connection.alias)
    activation = acquire(connection.alias, owner, [message.instance_id])
    assert activation is not None
    # Another activation takes over (a new token) before this one commits.
    Instance.objects.filter(id=message.instance_id).update(
        activation_token="00000000-0000-0000-0000-000000000000"
    )
    with pytest.raises(LostActivation):
        run_pass(activation)
    assert Broadcast.objects.count() == 0


def test_grouped_turns_write_one_row_per_turn_with_its_own_value(solid_settings):
    solid_settings(MAX_TURNS_PER_COMMIT=16, MAX_COMMIT_DELAY=5.0)
    board = Board.ref("grouped")
    refs = [board.enqueue().add(f"item-{n}") for n in range(3)]
    owner = processes.register("worker", connection.alias)
    activation = acquire(connection.alias, owner, [refs[0].instance_id])
    assert activation is not None
    run_pass(activation)
    values = [rows_of(ref.id)["size"].value for ref in refs]
    assert values == [1, 2, 3]
    assert all(set(rows_of(ref.id)) == {"size"} for ref in refs)
