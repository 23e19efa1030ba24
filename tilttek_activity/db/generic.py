"""Any other backend: a savepoint and a plain INSERT per entry, through the ORM.

A unique violation means "already there". The savepoint keeps the violation from aborting
the surrounding transaction where the platform supports savepoints; on a platform that
aborts the transaction anyway, it is aborted (as the schema document allows). Without
evidence about running transactions, catch-up passes a hole after ``GAP_SETTLE_SECONDS``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any, ClassVar

from django.db import IntegrityError, transaction
from django.db.models import Max

from ..records import COLUMNS
from ..validation import Draft
from .base import Backend, GapStrategy, Identity, InsertOutcome, Row


class GenericBackend(Backend):
    vendor: ClassVar[str] = "generic"
    gap_strategy: ClassVar[GapStrategy] = "settle"

    def insert_once(self, drafts: Sequence[Draft]) -> InsertOutcome:
        from ..models import Entry

        outcome = InsertOutcome()
        manager = Entry.objects.db_manager(self.alias)
        for draft in drafts:
            try:
                with transaction.atomic(using=self.alias):
                    entry = manager.create(
                        kind=draft.kind,
                        idempotency_key=draft.idempotency_key,
                        member=draft.member,
                        verb=draft.verb,
                        object=draft.object,
                        quantity=draft.quantity,
                        context=draft.context,
                        occurred_at=draft.occurred_at,
                        recorded_at=draft.recorded_at,
                    )
            except IntegrityError:
                continue
            outcome.created[draft.identity] = entry.position
        return outcome

    def _entries(self) -> Any:
        from ..models import Entry

        return Entry.objects.using(self.alias)

    def read_kept(
        self, identities: Iterable[Identity], *, lock: bool = True
    ) -> dict[Identity, Row]:
        wanted = set(identities)
        if not wanted:
            return {}
        rows = self._entries().filter(idempotency_key__in={key for key, _ in wanted})
        return {
            (row[2], row[1]): row
            for row in rows.values_list(*COLUMNS)
            if (row[2], row[1]) in wanted
        }

    def read_after(self, position: int, limit: int) -> list[Row]:
        rows = self._entries().filter(position__gt=position).order_by("position")
        return list(rows.values_list(*COLUMNS)[:limit])

    def head(self) -> int:
        return int(self._entries().aggregate(head=Max("position"))["head"] or 0)

    def positions_after(self, position: int, limit: int) -> list[int]:
        rows = self._entries().filter(position__gt=position).order_by("position")
        return list(rows.values_list("position", flat=True)[:limit])

    def checkpoint_position(self, name: str) -> int:
        from ..models import Checkpoint

        query = Checkpoint.objects.using(self.alias).filter(projection=name)
        position = query.values_list("position", flat=True).first()
        return 0 if position is None else int(position)

    def lock_checkpoint(self, name: str) -> int | None:
        from ..models import Checkpoint

        query = Checkpoint.objects.using(self.alias).filter(projection=name)
        if self.connection.features.has_select_for_update:
            query = query.select_for_update()
        return query.values_list("position", flat=True).first()

    def create_checkpoint(self, name: str, now: datetime) -> None:
        from ..models import Checkpoint

        try:
            with transaction.atomic(using=self.alias):
                Checkpoint.objects.using(self.alias).create(
                    projection=name, position=0, updated_at=now
                )
        except IntegrityError:
            pass
