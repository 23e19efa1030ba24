"""Actors of the runtime test suite (tests/runtime): handlers that block per attempt and a
handler that kills its worker process."""

from __future__ import annotations

import os
import threading
from typing import Any

import solid_objects
from solid_objects import Actor, attribute

from .core import entered, holds


class AttemptBlocker(Actor):
    """``hold(key)`` blocks on ``holds[f"{key}:{attempt}"]``, so a test can let a second
    activation's attempt finish while the first one is still held."""

    actor_type = "tests.attempt_blocker"

    hits = attribute(default=0)

    def hold(self, key: str) -> int:
        name = f"{key}:{self.message.attempt}"
        entered.setdefault(name, threading.Event()).set()
        holds.setdefault(name, threading.Event()).wait(30)
        self.hits = self.hits + 1
        return self.hits

    def bump(self) -> int:
        self.hits = self.hits + 1
        return self.hits


class Poison(Actor):
    """``crash()`` kills the worker process running it, every time."""

    actor_type = "tests.poison"

    runs = attribute(default=0)

    def crash(self) -> None:
        if not os.environ.get("SOLID_TEST_DATABASE_NAME"):
            # Never kill the test runner itself: only worker subprocesses set this variable.
            raise RuntimeError("crash() only kills worker subprocesses")
        os._exit(17)

    def ok(self) -> int:
        self.runs = self.runs + 1
        return self.runs


class Caller(Actor):
    """Handler code that tries to call other actors directly (refused: ActorCallCycle)."""

    actor_type = "tests.caller"

    def call_counter(self, actor_id: str) -> int:
        from .core import Counter

        return Counter.ref(actor_id).add(1)

    def enqueue_to_counter(self, actor_id: str) -> int:
        from .core import Counter

        return Counter.ref(actor_id).enqueue().add(1).id


class Writer(Actor):
    """Handler code that touches application tables directly."""

    actor_type = "tests.writer"

    attempts_seen = attribute(default=0)

    def write_and_swallow(self) -> str:
        from django.contrib.auth.models import Group

        try:
            Group.objects.create(name="swallowed")
        except Exception as exc:  # the handler hides the refusal: still forbidden
            return type(exc).__name__
        return "written"

    def lock_rows(self) -> int:
        from django.contrib.auth.models import Group
        from django.db import transaction

        with transaction.atomic():
            return len(list(Group.objects.select_for_update()))

    def read_only(self) -> int:
        from django.contrib.auth.models import Group

        self.attempts_seen = self.attempts_seen + 1
        return Group.objects.count()


class Shaper(Actor):
    """Results, rejections and state of a given shape (size and nesting limits)."""

    actor_type = "tests.shaper"

    data = attribute(default=None)

    def nest_state(self, levels: int) -> int:
        value: object = "bottom"
        for _ in range(levels):
            value = [value]
        self.data = value
        return levels

    def nest_result(self, levels: int) -> object:
        value: object = "bottom"
        for _ in range(levels):
            value = [value]
        return value

    def reject_with_set(self) -> None:
        self.reject("bad_details", "details are not JSON", details={1, 2})

    def fill(self, size: int) -> int:
        self.data = "x" * size
        return size


@solid_objects.commit_action("tests.runtime.create_group")
def create_group(arguments: dict[str, Any], context: Any) -> None:
    """Runs inside the fenced commit; a duplicate name makes the commit fail."""
    from django.contrib.auth.models import Group

    if arguments["name"] == "explode":
        raise ValueError("the commit action refused")
    Group.objects.using(context.using).create(name=arguments["name"])


class GroupMaker(Actor):
    """Creates auth groups through a commit action (which can fail inside the commit)."""

    actor_type = "tests.group_maker"

    created = attribute(default=list)

    def create(self, name: str) -> int:
        self.commit_action("tests.runtime.create_group", name=name)
        self.created = [*self.created, name]
        return len(self.created)


class Apart(Actor):
    """Never batched with other actors' turns (as the task actor, whose turns may block)."""

    actor_type = "tests.apart"
    commit_with_other_actors = False

    value = attribute(default=0)

    def add(self, amount: int = 1) -> int:
        self.value = self.value + amount
        return self.value
