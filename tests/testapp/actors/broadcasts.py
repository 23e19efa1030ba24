"""Actors of the broadcast, wake-up and operations tests."""

from __future__ import annotations

import time
from datetime import timedelta
from typing import Any

from solid_objects import Actor, attribute, observable


class Board(Actor):
    """Two observables: ``size`` carries its value, ``title`` only invalidates."""

    actor_type = "tests.board"

    items = attribute(default=list)
    title_text = attribute(default="")
    notes = attribute(default=0)

    def add(self, item: str) -> int:
        self.items = [*self.items, item]
        return len(self.items)

    def retitle(self, title: str) -> None:
        self.title_text = title

    def add_and_retitle(self, item: str, title: str) -> None:
        self.items = [*self.items, item]
        self.title_text = title

    def note(self) -> int:
        """Changes state but no observable."""
        self.notes = self.notes + 1
        return self.notes

    def add_then_fail(self, item: str) -> None:
        self.items = [*self.items, item]
        raise RuntimeError("failed after changing an observable")

    def add_then_reject(self, item: str) -> None:
        self.items = [*self.items, item]
        self.reject("refused", "no")

    @observable(broadcast="value")
    def size(self) -> int:
        return len(self.items)

    @observable
    def title(self) -> str:
        return self.title_text


class Stamp(Actor):
    """Reports when its handler started (wall clock), for wake-up latency measurements."""

    actor_type = "tests.stamp"

    count = attribute(default=0)

    def stamp(self) -> float:
        started = time.time()
        self.count = self.count + 1
        return started


class Retained(Actor):
    """An actor type whose idle instances retention may delete."""

    actor_type = "tests.retained"
    instance_retention = timedelta(days=1)

    hits = attribute(default=0)

    def touch(self) -> int:
        self.hits = self.hits + 1
        return self.hits


class Probe(Actor):
    """Stores and returns what it is given, to prove signals never carry it."""

    actor_type = "tests.signal_probe"

    kept = attribute(default="")

    def keep(self, secret: str) -> str:
        self.kept = secret
        return f"result:{secret}"

    def fail(self, secret: str, retryable: bool = True) -> None:
        self.kept = secret
        error = RuntimeError("probe failure")
        error.retryable = retryable  # type: ignore[attr-defined]
        raise error

    def refuse(self, secret: str) -> None:
        self.reject("refused", "refused", details={"code": "x"})

    def grow(self, size: int) -> int:
        self.kept = "x" * size
        return size

    def info(self) -> dict[str, Any]:
        return {"kept": len(self.kept)}
