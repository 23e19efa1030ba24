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
