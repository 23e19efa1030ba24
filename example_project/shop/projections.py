"""Per-member counters kept from the activity journal (exactly once, rebuildable)."""

from __future__ import annotations

from datetime import datetime

from django.db.models import F

from tilttek_activity import ActivityEntry, Projection, entries

from .models import MemberCounter


class MemberCounters(Projection):
    name = "shop.member_counters"
    verbs = ("cart.", "order.")

    def apply(self, entry: ActivityEntry) -> None:
        self._add(entry, -1 if entry.is_cancellation else 1)

    def reset(self, since: datetime | None = None, until: datetime | None = None) -> None:
        if since is None and until is None:
            MemberCounter.objects.all().delete()
            return
        # Take back what the period contributed; the rebuild then applies it again.
        after = None
        while True:
            page = entries(since=since, until=until, kind=None, after_position=after, limit=500)
            for entry in page:
                if self.wants(entry.verb):
                    self._add(entry, 1 if entry.is_cancellation else -1)
            if len(page) < 500:
                return
            after = page[-1].position

    @staticmethod
    def _add(entry: ActivityEntry, sign: int) -> None:
        counter, _ = MemberCounter.objects.get_or_create(member=entry.member, verb=entry.verb)
        MemberCounter.objects.filter(pk=counter.pk).update(
            count=F("count") + sign, quantity=F("quantity") + sign * entry.quantity
        )
