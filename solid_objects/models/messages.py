"""The mailbox: durable message history and its two hot membership tables."""

from __future__ import annotations

from typing import Any

from django.db import models

from ..conf import table
from ..dead_letters import retry_dead_letter
from ..references import MessageReference
from .fields import IDENTIFIER_LENGTH, UUID_LENGTH, BinaryCharField, foreign_key


class Message(models.Model):
    """One invocation, kept as history. Status is table membership, never a column."""

    class DeliveryMode(models.TextChoices):
        ASYNC = "async"
        SYNC = "sync"
        INTERNAL = "internal"

    # idx_so_messages_instance_sequence leads with instance_id: no separate index.
    instance = foreign_key("solid_objects.Instance", related_name="messages", db_index=False)
    actor_type = BinaryCharField(max_length=IDENTIFIER_LENGTH)
    actor_id = BinaryCharField(max_length=IDENTIFIER_LENGTH)
    operation = models.CharField(max_length=IDENTIFIER_LENGTH)
    delivery_mode = models.CharField(max_length=32)
    arguments = models.JSONField()
    sequence = models.BigIntegerField()
    attempt_count = models.IntegerField(default=0, db_default=0)
    max_attempts = models.IntegerField()
    request_id = models.CharField(max_length=UUID_LENGTH)
    idempotency_key = BinaryCharField(max_length=IDENTIFIER_LENGTH, null=True, blank=True)
    result = models.JSONField(null=True, blank=True)
    error = models.JSONField(null=True, blank=True)
    rejection = models.JSONField(null=True, blank=True)
    enqueued_at = models.DateTimeField()
    available_at = models.DateTimeField()
    started_at = models.DateTimeField(null=True, blank=True)
    completed_at = models.DateTimeField(null=True, blank=True)
    rejected_at = models.DateTimeField(null=True, blank=True)
    last_failed_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        db_table = table("messages")
        indexes = [
            models.Index(fields=["completed_at", "id"], name="idx_so_messages_cleanup"),
            models.Index(fields=["rejected_at", "id"], name="idx_so_messages_rejected"),
        ]
        constraints = [
            models.UniqueConstraint(
                fields=["instance", "sequence"], name="idx_so_messages_instance_sequence"
            ),
            models.UniqueConstraint(
                fields=["actor_type", "actor_id", "sequence"],
                name="idx_so_messages_actor_sequence",
            ),
            models.UniqueConstraint(fields=["request_id"], name="idx_so_messages_request"),
            models.UniqueConstraint(
                fields=["instance", "idempotency_key"], name="idx_so_messages_idempotency"
            ),
            models.CheckConstraint(
                condition=models.Q(sequence__gt=0), name="chk_so_messages_sequence"
            ),
            models.CheckConstraint(
                condition=models.Q(attempt_count__gte=0), name="chk_so_messages_attempts"
            ),
            models.CheckConstraint(
                condition=models.Q(max_attempts__gt=0), name="chk_so_messages_max_attempts"
            ),
            models.CheckConstraint(
                condition=models.Q(delivery_mode__in=["async", "sync", "internal"]),
                name="chk_so_messages_delivery_mode",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.actor_type}/{self.actor_id}#{self.sequence} {self.operation}"


class ReadyMessage(models.Model):
    """Membership: the message is due (or scheduled) and waiting for a claim."""

    # Both references lead a unique index (idx_so_ready_message, idx_so_ready_instance_sequence).
    message = foreign_key("solid_objects.Message", related_name="ready_memberships", db_index=False)
    instance = foreign_key("solid_objects.Instance", related_name="ready_messages", db_index=False)
    sequence = models.BigIntegerField()
    available_at = models.DateTimeField()
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        db_table = table("ready_messages")
        indexes = [
            models.Index(fields=["available_at", "instance", "sequence"], name="idx_so_ready_poll"),
        ]
        constraints = [
            models.UniqueConstraint(fields=["message"], name="idx_so_ready_message"),
            models.UniqueConstraint(
                fields=["instance", "sequence"], name="idx_so_ready_instance_sequence"
            ),
            models.CheckConstraint(
                condition=models.Q(sequence__gt=0), name="chk_so_ready_sequence"
            ),
        ]

    def __str__(self) -> str:
        return f"ready message {self.message_id} (#{self.sequence})"


class ClaimedMessage(models.Model):
    """Membership: the one in-flight turn of an actor, owned by an activation."""

    # Both references are unique (idx_so_claimed_message, idx_so_claimed_instance).
    message = foreign_key(
        "solid_objects.Message", related_name="claimed_memberships", db_index=False
    )
    instance = foreign_key(
        "solid_objects.Instance", related_name="claimed_messages", db_index=False
    )
    process = foreign_key(
        "solid_objects.Process", related_name="claimed_messages", null=True, db_index=False
    )
    activation_token = models.CharField(max_length=UUID_LENGTH, null=True, blank=True)
    activation_generation = models.BigIntegerField()
    claimed_at = models.DateTimeField()

    class Meta:
        db_table = table("claimed_messages")
        indexes = [
            models.Index(fields=["process", "claimed_at"], name="idx_so_claimed_process"),
        ]
        constraints = [
            models.UniqueConstraint(fields=["message"], name="idx_so_claimed_message"),
            models.UniqueConstraint(fields=["instance"], name="idx_so_claimed_instance"),
            models.CheckConstraint(
                condition=models.Q(activation_generation__gt=0),
                name="chk_so_claimed_generation",
            ),
            models.CheckConstraint(
                condition=models.Q(process__isnull=True) | models.Q(activation_token__isnull=False),
                name="chk_so_claimed_token",
            ),
        ]

    def __str__(self) -> str:
        return f"claimed message {self.message_id} (generation {self.activation_generation})"


class DeadLetterQuerySet(models.QuerySet["DeadLetter"]):
    """Operator verbs on a selection of dead letters."""

    def retry(self) -> dict[int, MessageReference[Any]]:
        """Retry every selected dead letter (see :meth:`DeadLetter.retry`), in id order;
        returns the new message of each, by dead letter id."""
        ids = self.order_by("pk").values_list("pk", flat=True)
        return {pk: retry_dead_letter(pk, using=self.db) for pk in ids}


class DeadLetter(models.Model):
    """A message that failed for good: after ``MAX_ATTEMPTS`` or a non-retryable error."""

    message = foreign_key(  # unique: idx_so_dead_letters_message
        "solid_objects.Message", related_name="dead_letters", db_index=False
    )
    instance = foreign_key("solid_objects.Instance", related_name="dead_letters")
    actor_type = BinaryCharField(max_length=IDENTIFIER_LENGTH)
    actor_id = BinaryCharField(max_length=IDENTIFIER_LENGTH)
    operation = models.CharField(max_length=IDENTIFIER_LENGTH)
    arguments = models.JSONField()
    attempts = models.IntegerField()
    exception_class = models.CharField(max_length=255)
    exception_message = models.TextField()
    backtrace = models.JSONField()
    first_failed_at = models.DateTimeField()
    last_failed_at = models.DateTimeField()
    retried_message = foreign_key("solid_objects.Message", related_name="retried_from", null=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    objects = DeadLetterQuerySet.as_manager()

    class Meta:
        db_table = table("dead_letters")
        indexes = [
            models.Index(
                fields=["actor_type", "actor_id", "last_failed_at"],
                name="idx_so_dead_letters_actor",
            ),
            models.Index(fields=["last_failed_at", "id"], name="idx_so_dead_letters_cleanup"),
        ]
        constraints = [
            models.UniqueConstraint(fields=["message"], name="idx_so_dead_letters_message"),
            models.CheckConstraint(
                condition=models.Q(attempts__gt=0), name="chk_so_dead_letters_attempts"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.actor_type}/{self.actor_id} {self.operation} ({self.exception_class})"

    def retry(self) -> MessageReference[Any]:
        """Enqueue the operation again as a new tail message keyed ``dead-letter:<id>``
        (idempotent: a second retry returns the same message); this row stays, pointing at
        the retry through ``retried_message``."""
        return retry_dead_letter(self.pk, using=self._state.db)
