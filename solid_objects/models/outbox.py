"""The two transactional outboxes written by a turn's fenced commit."""

from __future__ import annotations

from django.db import models, transaction

from ..conf import table
from ..db.expressions import DatabaseNow
from ..runtime.wakeup.doorbells import notify_local
from .fields import IDENTIFIER_LENGTH, UUID_LENGTH, foreign_key

ACTOR_MESSAGE_EFFECT = "__actor_message__"
TRANSMIT_EFFECT = "solid-objects.transmit"


class EffectQuerySet(models.QuerySet["Effect"]):
    """Operator verbs on a selection of effects."""

    def retry_dead(self) -> int:
        """Send the selected ``dead`` effects back to ``pending``, due now on the database
        clock, their attempts reset (one ``UPDATE``; other statuses are left alone) and,
        once that commits, ring this process's effect doorbell. An effect's ``on_success``
        callback is enqueued if it now succeeds; an ``on_failure`` callback is not repeated
        if it fails again. Returns how many were dead."""
        count = self.filter(status=Effect.Status.DEAD).update(
            status=Effect.Status.PENDING,
            attempt_count=0,
            available_at=DatabaseNow(),
            claimed_by=None,
            claimed_at=None,
            completed_at=None,
            updated_at=DatabaseNow(),
        )
        if count:
            transaction.on_commit(lambda: notify_local("effect"), using=self.db)
        return count


class Effect(models.Model):
    """External work (or an actor-to-actor message) to run after the turn committed."""

    class Status(models.TextChoices):
        PENDING = "pending"
        PROCESSING = "processing"
        COMPLETED = "completed"
        #: Failed for good, and the failure was delivered to the on_failure callback.
        HANDLED = "handled"
        DEAD = "dead"

    message = foreign_key("solid_objects.Message", related_name="effects")
    instance = foreign_key("solid_objects.Instance", related_name="effects")
    effect_id = models.CharField(max_length=UUID_LENGTH)
    name = models.CharField(max_length=IDENTIFIER_LENGTH)
    arguments = models.JSONField()
    success_operation = models.CharField(max_length=IDENTIFIER_LENGTH, null=True, blank=True)
    failure_operation = models.CharField(max_length=IDENTIFIER_LENGTH, null=True, blank=True)
    status = models.CharField(max_length=32, default=Status.PENDING, db_default=Status.PENDING)
    attempt_count = models.IntegerField(default=0, db_default=0)
    max_attempts = models.IntegerField()
    available_at = models.DateTimeField()
    # Indexed by idx_so_effects_claimed_by (a named index has no PostgreSQL "_like" twin).
    claimed_by = foreign_key(
        "solid_objects.Process",
        related_name="claimed_effects",
        null=True,
        db_column="claimed_by",
        db_index=False,
    )
    claimed_at = models.DateTimeField(null=True, blank=True)
    result = models.JSONField(null=True, blank=True)
    error = models.JSONField(null=True, blank=True)
    completed_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    objects = EffectQuerySet.as_manager()

    class Meta:
        db_table = table("effects")
        indexes = [
            models.Index(fields=["status", "available_at", "id"], name="idx_so_effects_poll"),
            models.Index(fields=["completed_at", "id"], name="idx_so_effects_cleanup"),
            models.Index(fields=["claimed_by"], name="idx_so_effects_claimed_by"),
        ]
        constraints = [
            models.UniqueConstraint(fields=["effect_id"], name="idx_so_effects_effect_id"),
            models.CheckConstraint(
                condition=models.Q(attempt_count__gte=0), name="chk_so_effects_attempts"
            ),
            models.CheckConstraint(
                condition=models.Q(max_attempts__gt=0), name="chk_so_effects_max_attempts"
            ),
            models.CheckConstraint(
                condition=models.Q(
                    status__in=["pending", "processing", "completed", "handled", "dead"]
                ),
                name="chk_so_effects_status",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.name} {self.effect_id} ({self.status})"


class Broadcast(models.Model):
    """An observable changed by a committed turn, waiting to reach its Channels group."""

    class Status(models.TextChoices):
        PENDING = "pending"
        PROCESSING = "processing"
        DELIVERED = "delivered"
        DEAD = "dead"

    # idx_so_broadcasts_observable leads with message_id: no separate index.
    message = foreign_key("solid_objects.Message", related_name="broadcasts", db_index=False)
    instance = foreign_key("solid_objects.Instance", related_name="broadcasts")
    broadcast_id = models.CharField(max_length=UUID_LENGTH)
    observable_name = models.CharField(max_length=IDENTIFIER_LENGTH)
    value = models.JSONField()
    state_version = models.IntegerField()
    activation_generation = models.BigIntegerField()
    status = models.CharField(max_length=32, default=Status.PENDING, db_default=Status.PENDING)
    attempt_count = models.IntegerField(default=0, db_default=0)
    available_at = models.DateTimeField()
    # idx_so_broadcasts_claim leads with claimed_by: no separate index.
    claimed_by = foreign_key(
        "solid_objects.Process",
        related_name="claimed_broadcasts",
        null=True,
        db_column="claimed_by",
        db_index=False,
    )
    claimed_at = models.DateTimeField(null=True, blank=True)
    error = models.JSONField(null=True, blank=True)
    delivered_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        db_table = table("broadcasts")
        indexes = [
            models.Index(fields=["status", "available_at", "id"], name="idx_so_broadcasts_poll"),
            models.Index(fields=["claimed_by", "claimed_at"], name="idx_so_broadcasts_claim"),
            models.Index(fields=["delivered_at", "id"], name="idx_so_broadcasts_cleanup"),
        ]
        constraints = [
            models.UniqueConstraint(fields=["broadcast_id"], name="idx_so_broadcasts_id"),
            models.UniqueConstraint(
                fields=["message", "observable_name"], name="idx_so_broadcasts_observable"
            ),
            models.CheckConstraint(
                condition=models.Q(state_version__gt=0), name="chk_so_broadcasts_state_version"
            ),
            models.CheckConstraint(
                condition=models.Q(activation_generation__gt=0),
                name="chk_so_broadcasts_generation",
            ),
            models.CheckConstraint(
                condition=models.Q(attempt_count__gte=0), name="chk_so_broadcasts_attempts"
            ),
            models.CheckConstraint(
                condition=models.Q(status__in=["pending", "processing", "delivered", "dead"]),
                name="chk_so_broadcasts_status",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.observable_name} of instance {self.instance_id} ({self.status})"
