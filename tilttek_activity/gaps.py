"""Holes in the journal and when a catch-up may pass them.

Positions are handed out when a row is inserted but become visible when its transaction
commits, so transactions that commit in the other order than they took positions show a
*hole*: position 10 missing while 11 is there. A catch-up that passed it would never see
entry 10 when its transaction commits. Catch-up therefore stops at a hole and passes it only
once it is provably dead - every transaction that could still commit it has ended - and the
next read (with a snapshot taken after that proof) still does not show it. Holes that never
fill are normal: rolled-back inserts, duplicates that burnt a position, a crash of the
sequence cache.

How "provably dead" is established depends on the database (``Backend.gap_strategy``):

- ``serialised`` (SQLite): writers hold the single write lock from their first write to the
  end of their transaction and allocate positions under it, so any position below a visible
  one belongs to a finished writer: dead on sight.
- ``evidence`` (PostgreSQL, MySQL/MariaDB): when a hole is first looked into, the backend
  lists the transactions that may be writing the journal (*witnesses*). The hole is dead once
  none of them is running any more (or at once, when there were none). See the backend
  modules for what the database tells us and why it is enough.
- ``settle`` (no evidence: other backends, MySQL without the PROCESS privilege, evidence
  unavailable inside a caller's transaction): a hole is passed after it has been missing for
  ``GAP_SETTLE_SECONDS``. This is a bet, not a proof, and is logged as a warning.

Observations live in memory, per process and database alias, shared by every projection (a
hole is a property of the journal, not of a projection). A restarted runner simply looks
again.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass

from .conf import get_settings
from .db.base import Backend, EvidenceDelayed

logger = logging.getLogger("tilttek_activity")

#: Observations kept per alias; the oldest are forgotten (and looked at afresh if needed).
MAX_OBSERVATIONS = 1_000


@dataclass
class Hole:
    """Missing positions ``start..end`` (inclusive), as first observed."""

    start: int
    end: int
    seen_at: float
    witnesses: frozenset[str] | None = None
    dead: bool = False
    reason: str = ""
    warned_at: float = 0.0

    @property
    def size(self) -> int:
        return self.end - self.start + 1

    def __str__(self) -> str:
        return str(self.start) if self.start == self.end else f"{self.start}..{self.end}"


class GapTracker:
    """Hole observations and the evidence that kills them."""

    def __init__(self) -> None:
        self._holes: dict[str, list[Hole]] = {}
        self._lock = threading.Lock()

    def observe(self, backend: Backend, start: int, end: int) -> Hole:
        """The observation covering ``start..end``, made now if there is none.

        On ``serialised`` databases the hole is dead on sight.
        """
        with self._lock:
            holes = self._holes.setdefault(backend.alias, [])
            for hole in holes:
                if hole.start <= start and end <= hole.end:
                    return hole
            hole = Hole(start, end, time.monotonic())
            if backend.gap_strategy == "serialised":
                hole.dead = True
                hole.reason = "writers are serialised: every earlier writer has finished"
            holes.append(hole)
            if len(holes) > MAX_OBSERVATIONS:
                del holes[: len(holes) - MAX_OBSERVATIONS]
            return hole

    def examine(self, backend: Backend, holes: list[Hole]) -> bool:
        """Look for evidence that open holes are dead; True when one of them now is.

        Must run *after* the read that revealed the holes, and before the read that will
        pass them (it does: catch-up calls it between two batch transactions).
        """
        open_holes = [hole for hole in holes if not hole.dead]
        if not open_holes:
            return bool(holes)
        settings = get_settings()
        evidence = None
        known: frozenset[str] = frozenset()
        if backend.gap_strategy == "evidence":
            with self._lock:
                known = known.union(*(h.witnesses or frozenset() for h in open_holes))
            try:
                evidence = backend.transaction_evidence(known)
            except EvidenceDelayed as exc:
                logger.debug("No evidence about holes %s yet: %s", open_holes, exc)
                return False
        now = time.monotonic()
        killed = False
        with self._lock:
            for hole in open_holes:
                if evidence is not None:
                    if hole.witnesses is None:
                        hole.witnesses = evidence.writers
                        if not hole.witnesses:
                            hole.dead = True
                            hole.reason = "no transaction that could fill it was running"
                    elif hole.witnesses <= known and not hole.witnesses & evidence.alive:
                        # (witnesses captured by another thread meanwhile were not asked
                        # about: they are judged next time)
                        hole.dead = True
                        hole.reason = "every transaction running when it was seen has ended"
                elif now - hole.seen_at >= settings.GAP_SETTLE_SECONDS:
                    hole.dead = True
                    hole.reason = (
                        f"missing for {settings.GAP_SETTLE_SECONDS:g}s without evidence "
                        "about running transactions (GAP_SETTLE_SECONDS)"
                    )
                if hole.dead:
                    killed = True
                elif now - max(hole.seen_at, hole.warned_at) >= settings.GAP_WARN_SECONDS:
                    hole.warned_at = now
                    logger.warning(
                        "Activity journal position %s has been missing for %.0fs: a "
                        "transaction that took it is still running; projections wait for it.",
                        hole,
                        now - hole.seen_at,
                    )
        return killed

    def open_holes(self, alias: str) -> list[Hole]:
        with self._lock:
            return [hole for hole in self._holes.get(alias, []) if not hole.dead]

    def clear(self, alias: str | None = None) -> None:
        with self._lock:
            if alias is None:
                self._holes.clear()
            else:
                self._holes.pop(alias, None)


tracker = GapTracker()
