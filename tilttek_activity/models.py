"""The two tables of the journal, exactly as the schema document gives them."""

from __future__ import annotations

from django.db import models

from . import limits
from .fields import BinaryCharField
from .limits import (
    CHECKPOINT_TABLE,
    ENTRY_TABLE,
    KEY_LENGTH,
    KIND_LENGTH,
    PROJECTION_NAME_LENGTH,
    REFERENCE_LENGTH,
    VERB_LENGTH,
)


class Kind(models.TextChoices):
    RECORDED = limits.RECORDED, "recorded"
    CANCELLED = limits.CANCELLED, "cancelled"


class Entry(models.Model):
    """One journal entry. Append-only: written by :func:`tilttek_activity.record_activity`
    and :func:`tilttek_activity.cancel_activity`, never updated.

    The public functions return :class:`tilttek_activity.values.ActivityEntry` values; the
    model exists for the admin, the migrations and ad-hoc ORM queries.
    """

    position = models.BigAutoField(primary_key=True)
    kind = models.CharField(max_length=KIND_LENGTH, choices=Kind.choices)
    idempotency_key = BinaryCharField(max_length=KEY_LENGTH)
    member = BinaryCharField(max_length=REFERENCE_LENGTH)
    verb = BinaryCharField(max_length=VERB_LENGTH)
    object = BinaryCharField(max_length=REFERENCE_LENGTH, null=True, blank=True)
    quantity = models.IntegerField()
    context = models.JSONField()
    occurred_at = models.DateTimeField()
    recorded_at = models.DateTimeField()

    class Meta:
        db_table = ENTRY_TABLE
        verbose_name = "entry"
        verbose_name_plural = "entries"
        indexes = [
            models.Index(fields=["member", "position"], name="tilttek_activity_entry_member"),
            models.Index(fields=["object", "position"], name="tilttek_activity_entry_object"),
            models.Index(fields=["verb", "occurred_at"], name="tilttek_activity_entry_verb"),
        ]
        constraints = [
            models.UniqueConstraint(
                fields=["idempotency_key", "kind"], name="tilttek_activity_entry_key"
            ),
            models.CheckConstraint(
                condition=models.Q(kind__in=[Kind.RECORDED, Kind.CANCELLED]),
                name="tilttek_activity_entry_kind",
            ),
        ]

    def __str__(self) -> str:
        target = f" {self.object}" if self.object else ""
        return f"#{self.position} {self.member} {self.verb}{target} x{self.quantity}"


class Checkpoint(models.Model):
    """How far a projection has consumed the journal."""

    projection = BinaryCharField(max_length=PROJECTION_NAME_LENGTH, primary_key=True)
    position = models.BigIntegerField(default=0)
    updated_at = models.DateTimeField()

    class Meta:
        db_table = CHECKPOINT_TABLE

    def __str__(self) -> str:
        return f"{self.projection} @ {self.position}"
