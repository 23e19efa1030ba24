"""Signals of the journal. All are sent after the transaction that caused them commits.

- ``activity_recorded(sender=Entry, entry=ActivityEntry, using=alias)``: a ``recorded`` entry
  was written by this call (not sent for a duplicate that returned ``created=False``).
- ``activity_cancelled(sender=Entry, entry=ActivityEntry, using=alias)``: a ``cancelled``
  entry was written.
- ``hole_skipped(sender=projection class, projection=name, start=int, end=int, reason=str,
  using=alias)``: a projection's checkpoint passed the missing positions ``start..end``
  (inclusive) because they are provably dead (rolled back, or burnt by an ignored duplicate),
  or, where the database gives no evidence, because they stayed missing for
  ``GAP_SETTLE_SECONDS``.
"""

from __future__ import annotations

from django.dispatch import Signal

# use_caching: the writer asks ``has_listeners`` on every call and skips ``on_commit`` when
# nobody listens; the cache makes that question free (as for Django's model signals).
activity_recorded = Signal(use_caching=True)
activity_cancelled = Signal(use_caching=True)
hole_skipped = Signal()
