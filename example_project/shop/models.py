from __future__ import annotations

from django.db import models


class MemberCounter(models.Model):
    """How often each member did each thing: the read model of ``MemberCounters``."""

    member = models.CharField(max_length=320)
    verb = models.CharField(max_length=128)
    count = models.IntegerField(default=0)
    quantity = models.BigIntegerField(default=0)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["member", "verb"], name="shop_counter_member_verb")
        ]

    def __str__(self) -> str:
        return f"{self.member} {self.verb}: {self.count}"
