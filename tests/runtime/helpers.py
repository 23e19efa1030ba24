"""Helpers of the runtime tests: retry policies named in settings, raw row inspection,
threads that clean up their connections, and activation passes driven in-process.

Processes, waiting, statement counting and per-test reset are in :mod:`tests.support`."""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from django.db import close_old_connections, connections

from solid_objects.models import (
    ClaimedMessage,
    DeadLetter,
    Instance,
    Message,
    ReadyMessage,
)
from tests.support.waiting import PATIENCE


# -- RETRY_DELAY policies (dotted paths in settings) ------------------------------------------
def no_delay(attempt: int) -> float:
    return 0.0


def long_delay(attempt: int) -> float:
    return 3600.0


# -- rows ---------------------------------------------------------------------------------------
def instance_of(actor_type: str, actor_id: str) -> Instance | None:
    return Instance.objects.filter(actor_type=actor_type, actor_id=actor_id).first()


def messages_of(instance_id: int) -> list[Message]:
    return list(Message.objects.filter(instance_id=instance_id).order_by("sequence"))


def membership(message_id: int) -> str:
    """Which table the message is in: ready, claimed, dead or done."""
    if ReadyMessage.objects.filter(message_id=message_id).exists():
        return "ready"
    if ClaimedMessage.objects.filter(message_id=message_id).exists():
        return "claimed"
    if DeadLetter.objects.filter(message_id=message_id).exists():
        return "dead"
    return "done"


def snapshot_rows(instance_id: int) -> dict[str, Any]:
    """Everything a commit could change for one instance, for before/after comparisons."""
    instance = Instance.objects.filter(id=instance_id).values().first()
    return {
        "instance": instance,
        "messages": list(Message.objects.filter(instance_id=instance_id).order_by("id").values()),
        "ready": list(ReadyMessage.objects.filter(instance_id=instance_id).values()),
        "claimed": list(ClaimedMessage.objects.filter(instance_id=instance_id).values()),
        "dead": list(DeadLetter.objects.filter(instance_id=instance_id).values()),
    }


# -- threads -------------------------------------------------------------------------------------
class Worker(threading.Thread):
    """A thread running ``target``; keeps its result or exception and closes its connections."""

    def __init__(self, target: Callable[[], Any], name: str = "test-worker") -> None:
        super().__init__(name=name, daemon=True)
        self._target_fn = target
        self.result: Any = None
        self.error: BaseException | None = None
        self.done = threading.Event()

    def run(self) -> None:
        try:
            self.result = self._target_fn()
        except BaseException as exc:  # reported to the test
            self.error = exc
        finally:
            for alias in connections:
                connections[alias].close()
            close_old_connections()
            self.done.set()

    def outcome(self, timeout: float = PATIENCE) -> Any:
        """Join; return the result or re-raise the thread's exception."""
        self.join(timeout)
        if self.is_alive():
            raise AssertionError(f"thread {self.name} did not finish within {timeout}s")
        if self.error is not None:
            raise self.error
        return self.result


def start_thread(target: Callable[[], Any], name: str = "test-worker") -> Worker:
    worker = Worker(target, name)
    worker.start()
    return worker


# -- driving activations in-process, like a worker ---------------------------------------------
def alias() -> str:
    from solid_objects.conf import get_settings

    return get_settings().DATABASE


def run_once(instance_id: int, owner: str, **options: Any) -> Any:
    """Lease the instance as ``owner`` and run one activation pass; ``None`` if it could not
    be leased (taken, paused, or nothing due)."""
    from solid_objects.lease import acquire
    from solid_objects.passes import run_pass

    activation = acquire(alias(), owner, [instance_id])
    if activation is None:
        return None
    return run_pass(activation, **options)


def drain(instance_id: int, owner: str, passes: int = 50) -> int:
    """Run passes until nothing is due for the instance; return how many turns ran."""
    processed = 0
    for _ in range(passes):
        result = run_once(instance_id, owner)
        if result is None:
            return processed
        processed += result.processed
    raise AssertionError(f"instance {instance_id} still has due work after {passes} passes")


def expire_lease(instance_id: int) -> None:
    """Make the actor's lease expired (five minutes ago), as if its holder had stalled."""
    from django.utils import timezone

    Instance.objects.filter(id=instance_id).update(
        activation_expires_at=timezone.now() - timedelta(minutes=5)
    )


def run_once_losing_the_lease(instance_id: int, owner: str, key: str) -> None:
    """Run the actor's held turn (it waits on ``key``: ``core.holds``/``core.entered``) and
    let its lease expire before the turn returns: the commit's fence must refuse it."""
    from solid_objects.errors import LostActivation
    from tests.testapp.actors import core

    holder = start_thread(lambda: run_once(instance_id, owner))
    assert core.entered.setdefault(key, threading.Event()).wait(PATIENCE)
    expire_lease(instance_id)
    core.holds.setdefault(key, threading.Event()).set()
    try:
        holder.outcome()
    except LostActivation:
        return
    raise AssertionError("the turn committed although its lease had expired")
