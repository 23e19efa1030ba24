"""The claim a group's commit makes of the next turn (§A6, strict order).

On MySQL/MariaDB and SQLite the commit of a group whose pass goes on moves the claimed row
in place to the next head, reads the next group's messages with that head and counts its
attempt in the results' ``UPDATE``; on PostgreSQL the whole commit is one statement. Either
way: a message that used up its attempts in processes that died is dead-lettered instead of
run, a message enqueued while the group ran is claimed in order, and a message that is not
due yet stops the read-ahead (nothing behind it runs before it).
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from solid_objects.models import DeadLetter, Message
from solid_objects.testing import pause_at
from tests.testapp.actors.core import Counter

from .helpers import membership, run_once, start_thread

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_next_turn_out_of_attempts_goes_to_its_dead_letter_and_the_pass_goes_on(
    owner, solid_settings
):
    """One turn per commit: the commit of the first claims the second, finds its attempts
    used up, dead-letters it and claims the third."""
    solid_settings(MAX_TURNS_PER_COMMIT=1)
    ref = Counter.ref("exhausted-next")
    first = ref.enqueue().append(1)
    spent = ref.enqueue().append(2)
    after = ref.enqueue().append(3)
    # Its attempts were all used by processes that died during its turn (requeued each time).
    Message.objects.filter(id=spent.id).update(attempt_count=5, max_attempts=5)
    result = run_once(first.instance_id, owner)
    assert result.processed == 2  # the first and the third; the second never ran again
    assert ref.snapshot().seen == [1, 3]
    assert membership(spent.id) == "dead"
    assert DeadLetter.objects.get(message_id=spent.id).message.attempt_count == 5
    assert [membership(m.id) for m in (first, after)] == ["done", "done"]


def test_a_message_enqueued_while_the_group_runs_is_claimed_by_its_commit(owner, solid_settings):
    solid_settings(MAX_TURNS_PER_COMMIT=4)
    ref = Counter.ref("arrives-late")
    first = ref.enqueue().append(1)
    ref.enqueue().append(2)
    with pause_at("turn.before_commit") as before_commit:
        worker = start_thread(lambda: run_once(first.instance_id, owner), "worker")
        before_commit.wait_reached()  # the first group (1, 2) ran, not committed yet
        late = ref.enqueue().append(3)
        before_commit.release()
    assert worker.outcome().processed == 3
    assert ref.snapshot().seen == [1, 2, 3]
    stored = Message.objects.get(id=late.id)
    assert (stored.attempt_count, stored.result) == (1, 3)


def test_a_message_not_due_yet_stops_the_read_ahead(owner, solid_settings):
    """Strict order: the message behind one that is not due waits for it."""
    solid_settings(MAX_TURNS_PER_COMMIT=8)
    ref = Counter.ref("not-yet")
    first = ref.enqueue().append(1)
    ref.enqueue().append(2)
    later = ref.enqueue(available_at=timezone.now() + timedelta(hours=1)).append(3)
    behind = ref.enqueue().append(4)
    assert run_once(first.instance_id, owner).processed == 2
    assert ref.snapshot().seen == [1, 2]
    assert [membership(m.id) for m in (later, behind)] == ["ready", "ready"]
    assert Message.objects.get(id=behind.id).attempt_count == 0
