"""Entries staged by code that owns a transaction, and written inside it.

An actor's turn (``self.record_activity`` in ``solid_objects``) validates each entry when it
is called (:class:`StagedActivities`), keeps it in memory while the turn runs, and hands the
drafts to the turn's fenced commit, which writes them with :func:`write_staged` inside its
own transaction (or embeds :class:`JoinedInsert` in its single statement). The entries are
then committed or rolled back with everything else the transaction wrote: nothing of a turn
that fails or rejects reaches the journal.

Dates come from the database clock when the entries are written (``recorded_at``, and
``occurred_at`` unless given). A key the owner *derived* from something only it can write
(a message it holds under lock) is reserved: no other writer can race it, so the backends
may use their shortest statement. Any other key goes through the usual insert-once
protocol, and the same key with a different payload raises
:class:`~tilttek_activity.errors.IdempotencyConflict` inside the owner's transaction.

Nothing here imports ``solid_objects``: the journal stays usable on its own.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from django.db import models, transaction

from .conf import get_settings
from .db import backend_for
from .db.base import Identity
from .errors import ActivityError, IdempotencyConflict
from .notifying import listened, send_signals
from .records import decode_row
from .validation import Draft, validate_activity

__all__ = ["JoinedInsert", "StagedActivities", "announce", "write_staged"]

logger = logging.getLogger("tilttek_activity")


@dataclass
class StagedActivities:
    """The entries one owner staged, validated as ``record_activity`` validates (§B2)."""

    drafts: list[Draft] = field(default_factory=list)
    #: True while every key was derived by the owner (see the module's docstring).
    reserved: bool = True

    def __bool__(self) -> bool:
        return bool(self.drafts)

    def __len__(self) -> int:
        return len(self.drafts)

    def stage(
        self,
        member: models.Model | str,
        verb: str,
        *,
        object: models.Model | str | None = None,
        quantity: int = 1,
        context: dict[str, Any] | None = None,
        occurred_at: datetime | None = None,
        idempotency_key: str | None = None,
        derived_key: str,
    ) -> Draft:
        """Validate one entry now (``InvalidActivity`` before anything is written) and keep
        it. ``derived_key`` is the key used when ``idempotency_key`` is None."""
        draft = validate_activity(
            member,
            verb,
            object=object,
            quantity=quantity,
            context=context,
            occurred_at=occurred_at,
            idempotency_key=derived_key if idempotency_key is None else idempotency_key,
            now=datetime.now(UTC).replace(microsecond=0),
            max_future=get_settings().MAX_FUTURE,
        )
        if idempotency_key is not None:
            self.reserved = False
        self.drafts.append(draft)
        return draft


def write_staged(alias: str, staged: Sequence[StagedActivities]) -> list[int]:
    """Write the staged entries (of one owner or several, in order) inside the caller's
    transaction on ``alias``, in one insert-once statement where the backend allows; the
    positions written. ``activity_recorded`` is sent once that transaction commits.

    A key already recorded with the same payload is left as it is (written once); with a
    different one, :class:`IdempotencyConflict` is raised and the caller's transaction must
    roll back (nothing of this call is then kept).
    """
    backend = backend_for(alias)
    if not backend.connection.in_atomic_block:
        raise ActivityError("write_staged() runs inside the caller's transaction.atomic()")
    distinct: dict[Identity, Draft] = {}
    for draft in (draft for part in staged for draft in part.drafts):
        first = distinct.setdefault(draft.identity, draft)
        if first is not draft:
            differing = draft.differences(first)
            if differing:
                raise IdempotencyConflict(draft.idempotency_key, draft.kind, differing, None)
    drafts = list(distinct.values())
    if not drafts:
        return []
    outcome = backend.insert_staged(drafts, reserved=all(part.reserved for part in staged))
    lost = [d.identity for d in drafts if d.identity not in outcome.created]
    if lost:
        kept = backend.read_kept([i for i in lost if i not in outcome.kept])
        kept.update(outcome.kept)
        for draft in drafts:
            if draft.identity in outcome.created:
                continue
            row = kept.get(draft.identity)
            if row is None:
                raise ActivityError(
                    f"entry {draft.idempotency_key!r} ({draft.kind}) was neither written nor found"
                )
            differing = draft.differences(decode_row(row, backend.timezone))
            if differing:
                raise IdempotencyConflict(
                    draft.idempotency_key,
                    draft.kind,
                    differing,
                    decode_row(row, backend.timezone),
                )
    positions = sorted(outcome.created.values())
    if positions and listened([d.kind for d in drafts]):
        transaction.on_commit(lambda: announce(alias, positions), using=alias)
    return positions


class JoinedInsert:
    """The staged entries as one ``INSERT ... RETURNING position`` that another statement
    embeds (a data-modifying CTE on PostgreSQL), joined on that statement's guard so it
    writes nothing when the guard finds no row.

    Only for reserved keys (nothing to compare afterwards: no one else can have written
    them); :meth:`available` says whether the backend of ``alias`` offers it.
    """

    def __init__(self, alias: str, staged: Sequence[StagedActivities]) -> None:
        self.alias = alias
        self.drafts = [draft for part in staged for draft in part.drafts]
        self.positions: list[int] = []

    @staticmethod
    def available(alias: str, staged: Sequence[StagedActivities]) -> bool:
        return all(part.reserved for part in staged) and backend_for(alias).joins_inserts

    def statement(self, guard: str) -> tuple[str, dict[str, Any]]:
        """The INSERT (SQL and parameters); ``guard`` names a relation of the embedding
        statement that has a row exactly when the entries may be written."""
        return backend_for(self.alias).joined_insert(self.drafts, guard)

    def returned(self, positions: Sequence[int]) -> None:
        """The positions the embedding statement wrote (called once it committed)."""
        self.positions = sorted(positions)
        if len(self.positions) != len(self.drafts):
            # A reserved key found already written: only a writer that forged the owner's
            # key format can cause it (the owner writes each reserved key once).
            logger.error(
                "%d of %d staged activity entries were already recorded under their "
                "reserved keys and were not written again",
                len(self.drafts) - len(self.positions),
                len(self.drafts),
            )

    def announce(self) -> None:
        """Send the signals of what was written (after the commit)."""
        if self.positions and listened([d.kind for d in self.drafts]):
            announce(self.alias, self.positions)


def announce(alias: str, positions: Sequence[int]) -> None:
    """Read the entries at ``positions`` (as the database dated them) and send their
    signals. Runs after the commit that wrote them, and only when a receiver listens."""
    backend = backend_for(alias)
    rows = backend.read_positions(positions)
    send_signals([decode_row(row, backend.timezone) for row in rows], alias)
