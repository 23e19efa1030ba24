"""The actors the benchmark drives: the smallest honest turn (a counter) and a variant that
carries a large state."""

from __future__ import annotations

from solid_objects import Actor, attribute


class BenchCounter(Actor):
    actor_type = "bench.counter"

    value = attribute(default=0)
    payload = attribute(default="")

    def add(self, amount: int = 1) -> int:
        self.value = self.value + amount
        return self.value

    def fill(self, size: int) -> int:
        self.payload = "x" * size
        return len(self.payload)
