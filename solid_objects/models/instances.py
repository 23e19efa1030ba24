from __future__ import annotations

from django.db import models, transaction

from ..conf import table
from ..db.expressions import DatabaseNow
from ..runtime.wakeup.doorbells import notify_local
from .fields import IDENTIFIER_LENGTH, UUID_LENGTH, BinaryCharField, foreign_key


class InstanceQuerySet(models.QuerySet["Instance"]):
    """Operator verbs on a selection of actors (the admin's pause and resume actions)."""

    def pause(self) -> int:
        """Pause the selected actors that are not paused yet, stamped with the database
        clock (one ``UPDATE``): no lease is granted to a paused actor (a pass in flight
        finishes). Returns how many were paused."""
        return self.filter(paused_at__isnull=True).update(paused_at=DatabaseNow())

    def resume(self) -> int:
        """Resume the selected paused actors (one ``UPDATE``) and, once that commits, ring
        this process's work doorbell. Returns how many were resumed."""
        count = self.filter(paused_at__isnull=False).update(paused_at=None)
        if count:
            transaction.on_commit(lambda: notify_local("work"), using=self.db)
        return count


class Instance(models.Model):
    """One incarnation of an actor: identity, JSON state, sequence counter and the lease."""

    actor_type = BinaryCharField(max_length=IDENTIFIER_LENGTH)
    actor_id = BinaryCharField(max_length=IDENTIFIER_LENGTH)
    state = models.JSONField(default=dict)
    state_version = models.IntegerField(default=1, db_default=1)
    next_message_sequence = models.BigIntegerField(default=1, db_default=1)
    activation_owner = foreign_key(
        "solid_objects.Process", related_name="activations", null=True, db_index=False
    )
    activation_token = models.CharField(max_length=UUID_LENGTH, null=True, blank=True)
    activation_expires_at = models.DateTimeField(null=True, blank=True)
    activation_generation = models.BigIntegerField(default=0, db_default=0)
    activated_at = models.DateTimeField(null=True, blank=True)
    last_used_at = models.DateTimeField(null=True, blank=True)
    last_claimed_at = models.DateTimeField(null=True, blank=True)
    paused_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)
    state_revision = models.BigIntegerField(default=0, db_default=0)
    completed_idempotency_keys = models.JSONField(null=True, blank=True)

    objects = InstanceQuerySet.as_manager()

    class Meta:
        db_table = table("instances")
        indexes = [
            models.Index(
                fields=["activation_expires_at", "last_claimed_at", "id"],
                name="idx_so_instances_lease",
            ),
            models.Index(fields=["activation_owner"], name="idx_so_instances_owner"),
            models.Index(fields=["last_used_at", "id"], name="idx_so_instances_cleanup"),
        ]
        constraints = [
            models.UniqueConstraint(
                fields=["actor_type", "actor_id"], name="idx_so_instances_identity"
            ),
            models.CheckConstraint(
                condition=models.Q(state_version__gt=0), name="chk_so_instances_state_version"
            ),
            models.CheckConstraint(
                condition=models.Q(next_message_sequence__gt=0), name="chk_so_instances_sequence"
            ),
            models.CheckConstraint(
                condition=models.Q(activation_generation__gte=0),
                name="chk_so_instances_generation",
            ),
            models.CheckConstraint(
                condition=(
                    models.Q(activation_owner__isnull=True, activation_token__isnull=True)
                    | models.Q(activation_owner__isnull=False, activation_token__isnull=False)
                ),
                name="chk_so_instances_activation_owner",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.actor_type}/{self.actor_id}"
