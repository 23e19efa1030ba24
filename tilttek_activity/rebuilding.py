"""Rebuilding a projection for a period.

In one transaction holding the projection's checkpoint lock: ``reset(since, until)``, then
re-apply every entry of the period at or below the checkpoint. Entries above the checkpoint
are left to catch-up, which is blocked on the same lock meanwhile and applies them afterwards:
nothing is counted twice or missed, however many entries keep arriving, and the result equals
a fresh full rebuild. Writers are not blocked (except on SQLite, whose single write lock the
rebuild holds). A failed rebuild rolls back entirely.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

from django.db import transaction
from django.db.models import Count, Q

from .conf import database_alias, get_settings
from .db import backend_for
from .errors import InvalidActivity
from .projections import registry
from .reading import period_q, select_entries, verbs_q

__all__ = ["rebuild"]

Progress = Callable[[int, int], None]


def rebuild(
    name: str,
    since: datetime | None = None,
    until: datetime | None = None,
    *,
    using: str | None = None,
    progress: Progress | None = None,
) -> int:
    """Recompute projection ``name`` for ``since <= occurred_at < until`` (None = open).

    ``progress(done, total)`` is called after each batch when given (``total`` costs one
    COUNT query). Returns the number of entries re-applied.
    """
    from .models import Entry

    projection = registry.get(name)
    alias = database_alias(using)
    period = period_q(since, until) & verbs_q(projection.verbs)
    if progress is not None and not callable(progress):
        raise InvalidActivity("progress", "must be callable (done, total) or None")
    backend = backend_for(alias)
    batch_size = get_settings().BATCH_SIZE
    # A projection that never ran starts at 0 (insert-once, outside the locking transaction).
    backend.create_checkpoint(name, datetime.now(UTC).replace(microsecond=0))
    with transaction.atomic(using=alias):
        checkpoint = backend.lock_checkpoint(name) or 0
        scope = period & Q(position__lte=checkpoint)
        total = 0
        if progress is not None:
            total = Entry.objects.using(alias).filter(scope).aggregate(n=Count("pk"))["n"]
            progress(0, total)
        projection.reset(since, until)
        done = after = 0
        while True:
            batch = select_entries(alias, scope & Q(position__gt=after), batch_size)
            if not batch:
                return done
            projection.apply_batch(batch)
            after = batch[-1].position
            done += len(batch)
            if progress is not None:
                progress(done, total)
