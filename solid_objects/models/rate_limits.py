"""Rate limits held by the database: one row per rate-limited effect name."""

from __future__ import annotations

from django.db import models

from ..conf import table
from .fields import IDENTIFIER_LENGTH, BinaryCharField


class RateLimit(models.Model):
    """The next free slot of one effect name's ``rate=``: every worker on every host takes
    its slots from this row (under its row lock), so the rate holds globally."""

    name = BinaryCharField(max_length=IDENTIFIER_LENGTH)
    next_slot_at = models.DateTimeField()
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        db_table = table("rate_limits")
        constraints = [models.UniqueConstraint(fields=["name"], name="idx_so_rate_limits_name")]

    def __str__(self) -> str:
        return f"rate limit {self.name} (next slot {self.next_slot_at})"
