from __future__ import annotations

from django.db import models

from ..conf import table
from .fields import UUID_LENGTH


class Process(models.Model):
    """A registered long-running role (worker, effect, reminder, broadcast, caller)."""

    class Kind(models.TextChoices):
        WORKER = "worker"
        EFFECT = "effect"
        REMINDER = "reminder"
        BROADCAST = "broadcast"
        CALLER = "caller"

    class ShutdownState(models.TextChoices):
        RUNNING = "running"
        DRAINING = "draining"
        STOPPED = "stopped"

    id = models.CharField(primary_key=True, max_length=UUID_LENGTH)
    kind = models.CharField(max_length=64)
    hostname = models.CharField(max_length=255)
    pid = models.BigIntegerField()
    started_at = models.DateTimeField()
    last_heartbeat_at = models.DateTimeField()
    metadata = models.JSONField(default=dict)
    shutdown_state = models.CharField(
        max_length=32, default=ShutdownState.RUNNING, db_default=ShutdownState.RUNNING
    )
    shutdown_requested_at = models.DateTimeField(null=True, blank=True)
    stopped_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        db_table = table("processes")
        verbose_name_plural = "processes"
        indexes = [
            models.Index(
                fields=["shutdown_state", "last_heartbeat_at"], name="idx_so_processes_liveness"
            ),
            models.Index(fields=["kind", "shutdown_state"], name="idx_so_processes_kind"),
        ]
        constraints = [
            models.CheckConstraint(
                condition=models.Q(shutdown_state__in=["running", "draining", "stopped"]),
                name="chk_so_process_shutdown",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.kind} {self.hostname}:{self.pid} ({self.shutdown_state})"
