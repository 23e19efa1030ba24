"""Actors that record activity from their turns (``self.record_activity``, issue 16)."""

from __future__ import annotations

import os
import threading
from datetime import datetime
from pathlib import Path
from typing import Any

from solid_objects import Actor, attribute


class Recorder(Actor):
    actor_type = "tests.recorder"

    turns = attribute(default=0)

    def _record(self, times: int = 1, key: str | None = None, **extra: Any) -> list[str]:
        return [
            self.record_activity(
                f"user:{self.actor_id}",
                "cart.item_added",
                object=f"cart:{self.actor_id}",
                quantity=self.turns + 1,
                context={"turn": self.turns + 1, **extra},
                idempotency_key=key,
            )
            for _ in range(times)
        ]

    def record(self, times: int = 1, key: str | None = None) -> list[str]:
        keys = self._record(times, key)
        self.turns = self.turns + 1
        return keys

    def bump(self) -> int:
        self.turns = self.turns + 1
        return self.turns

    def record_at(self, moment: str) -> str:
        key = self.record_activity(
            f"user:{self.actor_id}", "cart.dated", occurred_at=datetime.fromisoformat(moment)
        )
        self.turns = self.turns + 1
        return key

    def record_then_reject(self) -> None:
        self._record()
        self.turns = self.turns + 1
        self.reject("refused", "recorded, then refused")

    def record_then_fail_once(self) -> int:
        self._record()
        self.turns = self.turns + 1
        if self.message.attempt <= 1:
            raise RuntimeError("the first attempt fails")
        return self.turns

    def record_invalid(self, field: str) -> None:
        arguments: dict[str, Any] = {"member": f"user:{self.actor_id}", "verb": "cart.bad"}
        arguments[field] = {"member": "no-colon", "verb": "", "quantity": 2**40}[field]
        self.turns = self.turns + 1
        self.record_activity(**arguments)

    def record_and_emit(self) -> list[str]:
        keys = self._record()
        self.emit("tests.outbox.sink")
        self.turns = self.turns + 1
        return keys

    def record_and_wait(self, name: str) -> list[str]:
        """Record, then wait for the test's event ``name`` (a thread of the test process)."""
        from .core import entered, holds

        keys = self._record()
        key = f"{name}:{self.message.attempt}"
        entered.setdefault(key, threading.Event()).set()
        holds.setdefault(key, threading.Event()).wait(30)
        self.turns = self.turns + 1
        return keys

    def record_and_hold(self, path: str) -> list[str]:
        """Record, then block until ``path`` exists (a worker subprocess is killed here)."""
        keys = self._record()
        Path(path + ".entered").write_text(str(os.getpid()))
        for _ in range(3000):
            if Path(path).exists():
                break
            threading.Event().wait(0.01)
        self.turns = self.turns + 1
        return keys
