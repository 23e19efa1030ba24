from __future__ import annotations

from django.db import models

from ..conf import table
from .fields import IDENTIFIER_LENGTH, BinaryCharField, foreign_key


class Reminder(models.Model):
    """A durable one-shot or recurring alarm, unique per ``(instance, name)``."""

    class MissedPolicy(models.TextChoices):
        LATEST = "latest"
        ALL = "all"

    class Status(models.TextChoices):
        SCHEDULED = "scheduled"
        PAUSED = "paused"
        COMPLETED = "completed"

    # idx_so_reminders_name leads with instance_id: no separate index.
    instance = foreign_key("solid_objects.Instance", related_name="reminders", db_index=False)
    actor_type = BinaryCharField(max_length=IDENTIFIER_LENGTH)
    actor_id = BinaryCharField(max_length=IDENTIFIER_LENGTH)
    name = models.CharField(max_length=IDENTIFIER_LENGTH)
    operation = models.CharField(max_length=IDENTIFIER_LENGTH)
    arguments = models.JSONField()
    next_run_at = models.DateTimeField()
    interval_seconds = models.DecimalField(max_digits=20, decimal_places=6, null=True, blank=True)
    # A cron reminder: its expression and IANA time zone (``interval_seconds`` is then NULL).
    cron = models.CharField(max_length=191, null=True, blank=True)
    time_zone = models.CharField(max_length=64, null=True, blank=True)
    occurrence = models.BigIntegerField(default=0, db_default=0)
    missed_policy = models.CharField(
        max_length=32, default=MissedPolicy.LATEST, db_default=MissedPolicy.LATEST
    )
    status = models.CharField(max_length=32, default=Status.SCHEDULED, db_default=Status.SCHEDULED)
    # Indexed by idx_so_reminders_claimed_by (a named index has no PostgreSQL "_like" twin).
    claimed_by = foreign_key(
        "solid_objects.Process",
        related_name="claimed_reminders",
        null=True,
        db_column="claimed_by",
        db_index=False,
    )
    claimed_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        db_table = table("reminders")
        indexes = [
            models.Index(fields=["status", "next_run_at", "id"], name="idx_so_reminders_due"),
            models.Index(fields=["claimed_by"], name="idx_so_reminders_claimed_by"),
        ]
        constraints = [
            models.UniqueConstraint(fields=["instance", "name"], name="idx_so_reminders_name"),
            models.CheckConstraint(
                condition=models.Q(occurrence__gte=0), name="chk_so_reminders_occurrence"
            ),
            models.CheckConstraint(
                condition=models.Q(interval_seconds__isnull=True)
                | models.Q(interval_seconds__gt=0),
                name="chk_so_reminders_interval",
            ),
            models.CheckConstraint(
                condition=models.Q(missed_policy__in=["latest", "all"]),
                name="chk_so_reminders_missed_policy",
            ),
            models.CheckConstraint(
                condition=models.Q(status__in=["scheduled", "paused", "completed"]),
                name="chk_so_reminders_status",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.actor_type}/{self.actor_id} {self.name} @ {self.next_run_at}"
