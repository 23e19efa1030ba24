"""A sync caller's enqueue and its lease (§A6, §A15 sync calls).

On PostgreSQL the enqueue of a sync call is one autocommit statement that also takes the
actor's lease when it is free, decided under the instance row lock it takes; its first claim
is one more statement. Elsewhere the lease and the first claim are in the enqueue's
transaction. Either way the caller must never take a lease that is not free (paused, held),
must recover a claim a dead activation left before running its own message, and a lost
reply must neither double the message nor leave the actor blocked until the lease expires.
The group that commits the caller's message also answers the callers behind it.
"""

from __future__ import annotations

import threading
from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from solid_objects import SyncTimeout
from solid_objects.lease import acquire
from solid_objects.models import ClaimedMessage, Instance, Message
from solid_objects.passes import run_pass
from tests.testapp.actors import core
from tests.testapp.actors.core import Counter
from tests.testapp.actors.runtime_tests import AttemptBlocker

from .helpers import alias, membership, run_once, start_thread

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_paused_actor_is_not_leased_by_a_sync_callers_enqueue():
    ref = Counter.ref("paused-sync")
    assert ref.add(1) == 1
    Instance.objects.filter(actor_id="paused-sync").update(paused_at=timezone.now())
    with pytest.raises(SyncTimeout) as raised:
        ref.sync(timeout=0.5).add(1)
    instance = Instance.objects.get(actor_id="paused-sync")
    assert instance.activation_token is None  # the enqueue left the lease alone
    message = raised.value.message_reference
    assert message is not None and membership(message.id) == "ready"
    Instance.objects.filter(id=instance.id).update(paused_at=None)
    assert message.result(timeout=10) == 2


def test_a_live_lease_is_not_taken_by_a_sync_callers_enqueue(owner):
    ref = AttemptBlocker.ref("held-sync")
    first = ref.enqueue().hold("hs")
    holder = start_thread(lambda: run_once(first.instance_id, owner), "holder")
    assert core.entered.setdefault("hs:1", threading.Event()).wait(30)
    before = Instance.objects.values("activation_token", "activation_generation").get(
        id=first.instance_id
    )
    try:
        with pytest.raises(SyncTimeout) as raised:
            ref.sync(timeout=0.5).bump()
        after = Instance.objects.values("activation_token", "activation_generation").get(
            id=first.instance_id
        )
        assert after == before  # still the holder's lease, same generation
        assert membership(raised.value.message_reference.id) == "ready"
    finally:
        core.holds.setdefault("hs:1", threading.Event()).set()
    assert holder.outcome().processed == 2  # the holder ran the caller's message behind its own


def test_a_sync_call_recovers_the_claim_a_dead_activation_left_before_its_own(owner):
    """The caller's enqueue takes the expired lease; the claim left behind is retried first
    (its attempt counted again), then the caller's own message runs, in mailbox order."""
    ref = Counter.ref("left-behind")
    left = ref.enqueue().append(1)
    activation = acquire(alias(), owner, [left.instance_id])
    assert activation is not None  # claimed message 1 ... and the process died
    Instance.objects.filter(id=left.instance_id).update(
        activation_expires_at=timezone.now() - timedelta(minutes=5)
    )
    assert ref.sync(timeout=10).append(2) == 2
    assert ref.snapshot().seen == [1, 2]
    stored = Message.objects.get(id=left.id)
    assert (stored.attempt_count, stored.result) == (2, 1)
    assert ClaimedMessage.objects.count() == 0
    assert Instance.objects.get(id=left.instance_id).activation_token is None


def test_the_first_sync_call_to_a_new_actor_leases_it_with_generation_one():
    ref = Counter.ref("brand-new")
    assert ref.add(3) == 3
    instance = Instance.objects.get(actor_id="brand-new")
    assert (instance.activation_generation, instance.activation_token) == (1, None)
    assert ref.add(1) == 4
    assert Instance.objects.get(id=instance.id).activation_generation == 2


def test_the_group_that_commits_a_callers_message_answers_the_messages_behind_it(owner):
    """The caller's pass ends with the group holding its own message, and that group
    carries the due messages behind it (other callers' work, answered by the same
    commit); nothing after that group runs."""
    ref = Counter.ref("past-own-group")
    own = ref.enqueue().add(1)
    behind = [ref.enqueue().add(10) for _ in range(3)]
    activation = acquire(alias(), owner, [own.instance_id])
    result = run_pass(activation, stop_after=own.id, stop_at_sequence=own.sequence)
    assert result.processed == 4
    assert [membership(m.id) for m in behind] == ["done", "done", "done"]
    assert ref.snapshot().value == 31


@pytest.mark.db_vendor("postgresql")
def test_a_sync_enqueue_that_takes_the_lease_wakes_no_worker():
    """The caller runs its message itself: the enqueue's NOTIFY would only send a worker
    to find the actor leased. An enqueue that finds the lease taken wakes the workers."""
    import psycopg

    ref = Counter.ref("quiet")
    assert ref.add(1) == 1
    settings = connection.settings_dict
    listener = psycopg.connect(
        host=settings["HOST"] or "127.0.0.1",
        port=settings["PORT"] or 5432,
        user=settings["USER"],
        dbname=settings["NAME"],
        autocommit=True,
    )
    try:
        listener.execute("LISTEN solid_objects")
        assert ref.add(1) == 2
        heard = [n.payload for n in listener.notifies(timeout=0.5)]
        assert "" not in heard  # no work hint; the result hints are for callers
        ref.enqueue().add(1)  # an enqueue that does not lease: workers are woken
        heard = [n.payload for n in listener.notifies(timeout=2, stop_after=1)]
        assert heard == [""]
    finally:
        listener.close()
