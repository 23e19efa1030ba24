"""Actors the runtime tests drive (autodiscovered like any app's ``actors`` module)."""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Any

from solid_objects import Actor, attribute, migrate_state, observable, query


class Counter(Actor):
    actor_type = "tests.counter"

    value = attribute(default=0)
    seen = attribute(default=list)

    def add(self, amount: int = 1) -> int:
        self.value = self.value + amount
        return self.value

    def append(self, n: int) -> int:
        self.seen = [*self.seen, n]
        return len(self.seen)

    def record_sequence(self) -> int:
        self.seen = [*self.seen, self.message.sequence]
        return self.message.sequence

    @query
    def total(self) -> int:
        return self.value

    def refuse(self, code: str = "nope") -> None:
        self.value = self.value + 1000  # rolled back by the rejection
        self.reject(code, "refused", details={"value": self.value})

    def boom(self, retryable: bool = True) -> None:
        self.value = self.value + 1000  # rolled back by the failure
        error = RuntimeError("boom")
        error.retryable = retryable  # type: ignore[attr-defined]
        raise error

    def write_directly(self) -> None:
        from django.contrib.auth.models import Group

        Group.objects.create(name="forbidden")

    def big_result(self, size: int) -> str:
        return "x" * size


# Coordination for tests that hold a handler in flight (threads of the test process).
holds: dict[str, threading.Event] = {}
entered: dict[str, threading.Event] = {}


class Blocker(Actor):
    actor_type = "tests.blocker"

    hits = attribute(default=0)

    def hold(self, key: str) -> int:
        entered.setdefault(key, threading.Event()).set()
        holds.setdefault(key, threading.Event()).wait(30)
        self.hits = self.hits + 1
        return self.hits

    def hold_on_file(self, path: str) -> int:
        """Block until ``path`` exists (for handlers running in worker subprocesses)."""
        Path(path + ".entered").write_text(str(os.getpid()))
        for _ in range(3000):
            if Path(path).exists():
                break
            threading.Event().wait(0.01)
        self.hits = self.hits + 1
        return self.hits

    def bump(self) -> int:
        self.hits = self.hits + 1
        return self.hits


class Versioned(Actor):
    actor_type = "tests.versioned"
    state_version = 2

    name = attribute(default="")
    currency = attribute(default=None)

    def rename(self, name: str) -> dict[str, Any]:
        self.name = name
        return {"name": self.name, "currency": self.currency}

    @migrate_state(1, 2)
    def add_currency(state: dict[str, Any]) -> dict[str, Any]:
        return {**state, "currency": "EUR"}


class Observed(Actor):
    actor_type = "tests.observed"

    items = attribute(default=list)
    label = attribute(default="")

    def add(self, item: str) -> int:
        self.items = [*self.items, item]
        return len(self.items)

    def relabel(self, label: str) -> None:
        self.label = label

    def both(self, item: str, label: str) -> None:
        self.items = [*self.items, item]
        self.label = label

    @observable(broadcast="value")
    def item_count(self) -> int:
        return len(self.items)

    @observable
    def current_label(self) -> str:
        return self.label
