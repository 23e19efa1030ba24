"""The actor of the SIGKILL soak (tests/adversarial/soak).

Every operation takes the message's number ``n`` and is deterministic in it, so a rerun after
a kill does exactly what the first attempt did: ``apply`` appends ``n`` to ``seen`` (the soak
compares that list with what it enqueued), ``refuse`` appends it and then rejects (the append
must be rolled back), ``fail`` appends it and raises a non-retryable error (rolled back, and
the message becomes a dead letter at once). Some numbers make the handler take a little
time, so that kills land in the middle of turns and of grouped commits.
"""

from __future__ import annotations

import time

from solid_objects import Actor, attribute

#: ``n % 10`` -> seconds the handler takes (most turns take no time at all).
PAUSES = {0: 0.08, 5: 0.03}
REJECTION_CODE = "soak_refused"


class SoakFailure(RuntimeError):
    """The deliberate, non-retryable failure of ``fail`` (its message is dead-lettered)."""

    retryable = False


def pause(n: int) -> None:
    seconds = PAUSES.get(n % 10, 0.0)
    if seconds:
        time.sleep(seconds)


class SoakCounter(Actor):
    actor_type = "tests.soak_counter"

    seen = attribute(default=list)

    def apply(self, n: int) -> int:
        """Record ``n``; the result is its position in ``seen`` (1-based)."""
        pause(n)
        self.seen = [*self.seen, n]
        return len(self.seen)

    def refuse(self, n: int) -> None:
        pause(n)
        self.seen = [*self.seen, n]  # rolled back by the rejection
        self.reject(REJECTION_CODE, "refused on purpose", details={"n": n})

    def fail(self, n: int) -> None:
        pause(n)
        self.seen = [*self.seen, n]  # rolled back by the failure
        raise SoakFailure(f"failure {n} on purpose")
