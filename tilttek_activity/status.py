"""Where each projection stands: checkpoint, lag and the holes in front of it."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from .conf import database_alias
from .db import backend_for
from .projections import registry

__all__ = ["ProjectionStatus", "find_holes", "projection_status"]

#: How far past a checkpoint ``find_holes`` looks.
HOLE_WINDOW = 1_000


@dataclass(frozen=True)
class ProjectionStatus:
    name: str
    registered: bool
    position: int | None
    head: int
    updated_at: datetime | None
    #: Missing positions between the checkpoint and the last visible entry read, as
    #: inclusive ranges: what the next catch-up must wait for or pass.
    holes: list[tuple[int, int]] = field(default_factory=list)

    @property
    def lag(self) -> int:
        """Positions between the checkpoint and the newest entry."""
        return max(self.head - (self.position or 0), 0)


def projection_status(using: str | None = None) -> list[ProjectionStatus]:
    """Every registered projection and every checkpoint row, by name."""
    from .models import Checkpoint

    alias = database_alias(using)
    backend = backend_for(alias)
    head = backend.head()
    rows = {
        name: (position, updated_at)
        for name, position, updated_at in Checkpoint.objects.using(alias).values_list(
            "projection", "position", "updated_at"
        )
    }
    statuses = []
    for name in sorted(set(rows) | set(registry.names())):
        position, updated_at = rows.get(name, (None, None))
        statuses.append(
            ProjectionStatus(
                name=name,
                registered=name in registry,
                position=position,
                head=head,
                updated_at=updated_at,
                holes=find_holes(position or 0, using=alias),
            )
        )
    return statuses


def find_holes(
    after: int, *, using: str | None = None, window: int = HOLE_WINDOW
) -> list[tuple[int, int]]:
    """Missing positions among the next ``window`` visible entries after ``after``."""
    backend = backend_for(database_alias(using))
    holes = []
    expected = after + 1
    for position in backend.positions_after(after, window):
        if position != expected:
            holes.append((expected, position - 1))
        expected = position + 1
    return holes
