"""An actor message crossing shards survives a crash between its two commits: the message
commits on the target's shard first, the effect is recorded completed on the sender's
second. An effect worker that dies between them leaves the effect claimed by a dead
process; the next worker delivers it again, and the idempotency key finds the message
already there, so it is applied exactly once."""

from __future__ import annotations

import pytest

from solid_objects.db.outbox import ACTOR_MESSAGE
from solid_objects.models import Effect, Message
from solid_objects.outbox.effects import claim_due, execute, run_pending_effects
from solid_objects.runtime import processes
from solid_objects.shards import database_for
from solid_objects.testing import drain
from tests.testapp.actors.outbox import Messenger

SHARDS = ["default", "shard_b"]
pytestmark = pytest.mark.django_db(transaction=True, databases=SHARDS)


def on(alias: str) -> str:
    return next(f"m{n}" for n in range(100) if database_for("tests.messenger", f"m{n}") == alias)


@pytest.mark.parametrize("key", [None, "the-senders-key"])
def test_a_worker_killed_between_the_two_commits_delivers_once(solid_settings, key):
    solid_settings(DATABASES=SHARDS)
    sender, target = on("default"), on("shard_b")
    Messenger.ref(sender).tell(target=target, text="once", key=key)
    drain(roles=("actors",))  # the sender's turn stages the message in its outbox
    crashed = processes.register("worker", "default")
    [row] = claim_due("default", crashed, 1)
    assert row.name == ACTOR_MESSAGE
    attempt = execute(row, "default")  # committed on shard_b ...
    assert attempt.ok
    assert Message.objects.using("shard_b").filter(operation="hear").count() == 1
    # ... and the worker dies before it records the effect: it is still claimed.
    assert Effect.objects.using("default").get().status == "processing"
    processes.cleanup_dead("default", threshold=0.0)  # its process is found dead
    assert run_pending_effects("default") == 1  # redelivered
    assert Effect.objects.using("default").get().status == "completed"
    drain()
    assert Message.objects.using("shard_b").filter(operation="hear").count() == 1
    assert [m["text"] for m in Messenger.ref(target).heard()] == ["once"]


def test_actors_on_every_shard_record_activity_once_on_one_journal(solid_settings, settings):
    """The journal on ``default``: an actor there writes its entries in its fenced commit, an
    actor on ``shard_b`` through its outbox; each entry once, keys never colliding although
    both databases number their messages from 1."""
    from solid_objects.turn import activity_key
    from tests.testapp.actors.journal import Recorder
    from tilttek_activity.models import Entry

    solid_settings(DATABASES=SHARDS)
    settings.TILTTEK_ACTIVITY = {"DATABASE": "default"}
    here = next(f"r{n}" for n in range(100) if database_for("tests.recorder", f"r{n}") == "default")
    there = next(
        f"r{n}" for n in range(100) if database_for("tests.recorder", f"r{n}") == "shard_b"
    )
    first = Recorder.ref(here).enqueue().record(times=2)
    second = Recorder.ref(there).enqueue().record(times=2)
    drain()
    assert first.result() == [activity_key(first.id, n) for n in range(2)]
    assert second.result() == [activity_key(second.id, n, database="shard_b") for n in range(2)]
    for actor_id, keys in ((here, first.result()), (there, second.result())):
        stored = Entry.objects.using("default").filter(member=f"user:{actor_id}")
        assert sorted(stored.values_list("idempotency_key", flat=True)) == sorted(keys)
    assert not Entry.objects.using("shard_b").exists()
