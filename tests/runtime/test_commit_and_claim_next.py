"""The commit that claims the next turn by moving the claimed row in place (MySQL/MariaDB,
SQLite): it commits only while the lease's claimed row is there to move. On MySQL/MariaDB
one multiple-table ``UPDATE`` writes the results and moves the row; without the row it
must match nothing."""

from __future__ import annotations

import pytest
from django.db import connection, transaction

from solid_objects.activation import ActivationCache
from solid_objects.db.rows import Completion
from solid_objects.db.vendors import dialect_for
from solid_objects.lease import acquire
from solid_objects.models import ClaimedMessage, Message
from tests.testapp.actors.core import Counter

from .helpers import alias

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.db_vendor("mysql", "sqlite"),
]


def _commit(activation, first_id: int) -> tuple[bool, object]:
    dialect = dialect_for(connection)
    lease = activation.lease
    with transaction.atomic(), connection.cursor() as cursor:
        fenced, head, _ahead = dialect.commit_and_claim_next(
            cursor,
            lease,
            claimed_message_id=first_id,
            state='{"value": 1}',
            state_version=1,
            state_revision=lease.state_revision + 1,
            lease_seconds=30,
            completions=[Completion(message_id=first_id, result="1", claimed=True)],
            read_ahead=0,
        )
        transaction.set_rollback(not fenced)
    return fenced, head


def test_the_next_turn_is_claimed_in_place(owner):
    ref = Counter.ref("in-place")
    first, second = ref.enqueue().add(1), ref.enqueue().add(1)
    activation = acquire(alias(), owner, [first.instance_id], ActivationCache())
    assert activation is not None and activation.first.id == first.id
    fenced, head = _commit(activation, first.id)
    assert fenced and head.id == second.id
    claimed = ClaimedMessage.objects.get(instance_id=first.instance_id)
    assert claimed.message_id == second.id
    done = Message.objects.get(pk=first.id)
    assert done.result == 1 and done.completed_at is not None
    started = Message.objects.get(pk=second.id)
    assert started.attempt_count == 1 and started.completed_at is None


def test_without_the_claimed_row_nothing_is_written(owner):
    ref = Counter.ref("row-gone")
    first, second = ref.enqueue().add(1), ref.enqueue().add(1)
    activation = acquire(alias(), owner, [first.instance_id], ActivationCache())
    assert activation is not None
    ClaimedMessage.objects.filter(instance_id=first.instance_id).delete()
    fenced, _head = _commit(activation, first.id)
    assert not fenced
    # Rolled back: the first turn is not completed and the second not claimed.
    assert Message.objects.get(pk=first.id).completed_at is None
    assert Message.objects.get(pk=second.id).attempt_count == 0
    assert not ClaimedMessage.objects.filter(instance_id=first.instance_id).exists()
