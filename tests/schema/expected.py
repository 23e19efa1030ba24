"""The schema of ``solid_objects``, transcribed by hand from ``SCHEMA.md`` (not from models).

Table names are unprefixed here; tests add ``conf.table``'s prefix. Where SCHEMA.md says an
index is implicit (Django-named), only its columns are expected: the FK indexes that a named
index already leads with are dropped (SCHEMA.md allows it), so ``implicit`` lists the rest.
The ``claimed_by`` references of reminders and effects have named indexes instead, because
Django doubles an implicit varchar index with a ``varchar_pattern_ops`` one on PostgreSQL.
That twin index remains on the varchar primary key of ``processes`` (``postgres_implicit``).
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Col:
    family: str
    size: object = None  # string length, (precision, scale), or datetime precision
    null: bool = False
    default: str | None = None
    binary: bool = False  # identities: compared byte for byte
    auto: bool = False


def string(
    length: int, *, null: bool = False, default: str | None = None, binary: bool = False
) -> Col:
    return Col("string", length, null=null, default=default, binary=binary)


BIGINT = Col("bigint")
INTEGER = Col("integer")
JSON = Col("json")
JSON_NULL = Col("json", null=True)
DATETIME = Col("datetime", 6)
DATETIME_NULL = Col("datetime", 6, null=True)
AUTO_ID = Col("bigint", auto=True)
UUID = string(36)
UUID_NULL = string(36, null=True)
IDENTIFIER = string(191)
IDENTIFIER_NULL = string(191, null=True)
BINARY_IDENTIFIER = string(191, binary=True)
TIMESTAMPS = {"created_at": DATETIME, "updated_at": DATETIME}


@dataclass(frozen=True)
class Table:
    columns: dict[str, Col]
    indexes: dict[str, tuple[tuple[str, ...], bool]]  # name -> (columns in order, unique)
    checks: frozenset[str]
    foreign_keys: dict[str, tuple[str, str, str]]  # name -> (column, target table, ON DELETE)
    implicit: list[tuple[str, ...]] = field(default_factory=list)  # Django-named FK indexes
    postgres_implicit: list[tuple[str, ...]] = field(default_factory=list)  # "<...>_like"
    primary_key: tuple[str, ...] = ("id",)


def unique(*columns: str) -> tuple[tuple[str, ...], bool]:
    return columns, True


def index(*columns: str) -> tuple[tuple[str, ...], bool]:
    return columns, False


SCHEMA: dict[str, Table] = {
    "processes": Table(
        columns={
            "id": UUID,
            "kind": string(64),
            "hostname": string(255),
            "pid": BIGINT,
            "started_at": DATETIME,
            "last_heartbeat_at": DATETIME,
            "metadata": JSON,
            "shutdown_state": string(32, default="running"),
            "shutdown_requested_at": DATETIME_NULL,
            "stopped_at": DATETIME_NULL,
            **TIMESTAMPS,
        },
        indexes={
            "idx_so_processes_liveness": index("shutdown_state", "last_heartbeat_at"),
            "idx_so_processes_kind": index("kind", "shutdown_state"),
        },
        checks=frozenset({"chk_so_process_shutdown"}),
        foreign_keys={},
        postgres_implicit=[("id",)],
    ),
    "rate_limits": Table(
        columns={
            "id": AUTO_ID,
            "name": BINARY_IDENTIFIER,
            "next_slot_at": DATETIME,
            **TIMESTAMPS,
        },
        indexes={"idx_so_rate_limits_name": unique("name")},
        checks=frozenset(),
        foreign_keys={},
    ),
    "shard_agreement": Table(
        columns={
            "id": AUTO_ID,
            "fingerprint": string(64),
            "shards": JSON,
            "agreed_at": DATETIME,
        },
        indexes={},
        checks=frozenset(),
        foreign_keys={},
    ),
    "instances": Table(
        columns={
            "id": AUTO_ID,
            "actor_type": BINARY_IDENTIFIER,
            "actor_id": BINARY_IDENTIFIER,
            "state": JSON,
            "state_version": Col("integer", default="1"),
            "next_message_sequence": Col("bigint", default="1"),
            "activation_owner_id": UUID_NULL,
            "activation_token": UUID_NULL,
            "activation_expires_at": DATETIME_NULL,
            "activation_generation": Col("bigint", default="0"),
            "activated_at": DATETIME_NULL,
            "last_used_at": DATETIME_NULL,
            "last_claimed_at": DATETIME_NULL,
            "paused_at": DATETIME_NULL,
            **TIMESTAMPS,
            "state_revision": Col("bigint", default="0"),
            "completed_idempotency_keys": JSON_NULL,
        },
        indexes={
            "idx_so_instances_identity": unique("actor_type", "actor_id"),
            "idx_so_instances_lease": index("activation_expires_at", "last_claimed_at", "id"),
            "idx_so_instances_owner": index("activation_owner_id"),
            "idx_so_instances_cleanup": index("last_used_at", "id"),
        },
        checks=frozenset(
            {
                "chk_so_instances_state_version",
                "chk_so_instances_sequence",
                "chk_so_instances_generation",
                "chk_so_instances_activation_owner",
            }
        ),
        foreign_keys={"fk_so_instances_owner": ("activation_owner_id", "processes", "RESTRICT")},
    ),
    "messages": Table(
        columns={
            "id": AUTO_ID,
            "instance_id": BIGINT,
            "actor_type": BINARY_IDENTIFIER,
            "actor_id": BINARY_IDENTIFIER,
            "operation": IDENTIFIER,
            "delivery_mode": string(32),
            "arguments": JSON,
            "sequence": BIGINT,
            "attempt_count": Col("integer", default="0"),
            "max_attempts": INTEGER,
            "request_id": UUID,
            "idempotency_key": string(191, null=True, binary=True),
            "result": JSON_NULL,
            "error": JSON_NULL,
            "rejection": JSON_NULL,
            "enqueued_at": DATETIME,
            "available_at": DATETIME,
            "started_at": DATETIME_NULL,
            "completed_at": DATETIME_NULL,
            "rejected_at": DATETIME_NULL,
            "last_failed_at": DATETIME_NULL,
            **TIMESTAMPS,
        },
        indexes={
            "idx_so_messages_instance_sequence": unique("instance_id", "sequence"),
            "idx_so_messages_actor_sequence": unique("actor_type", "actor_id", "sequence"),
            "idx_so_messages_request": unique("request_id"),
            "idx_so_messages_idempotency": unique("instance_id", "idempotency_key"),
            "idx_so_messages_cleanup": index("completed_at", "id"),
            "idx_so_messages_rejected": index("rejected_at", "id"),
        },
        checks=frozenset(
            {
                "chk_so_messages_sequence",
                "chk_so_messages_attempts",
                "chk_so_messages_max_attempts",
                "chk_so_messages_delivery_mode",
            }
        ),
        foreign_keys={"fk_so_messages_instance": ("instance_id", "instances", "CASCADE")},
    ),
    "ready_messages": Table(
        columns={
            "id": AUTO_ID,
            "message_id": BIGINT,
            "instance_id": BIGINT,
            "sequence": BIGINT,
            "available_at": DATETIME,
            "created_at": DATETIME,
        },
        indexes={
            "idx_so_ready_message": unique("message_id"),
            "idx_so_ready_instance_sequence": unique("instance_id", "sequence"),
            "idx_so_ready_poll": index("available_at", "instance_id", "sequence"),
        },
        checks=frozenset({"chk_so_ready_sequence"}),
        foreign_keys={
            "fk_so_ready_message": ("message_id", "messages", "CASCADE"),
            "fk_so_ready_instance": ("instance_id", "instances", "CASCADE"),
        },
    ),
    "claimed_messages": Table(
        columns={
            "id": AUTO_ID,
            "message_id": BIGINT,
            "instance_id": BIGINT,
            "process_id": UUID_NULL,
            "activation_token": UUID_NULL,
            "activation_generation": BIGINT,
            "claimed_at": DATETIME,
        },
        indexes={
            "idx_so_claimed_message": unique("message_id"),
            "idx_so_claimed_instance": unique("instance_id"),
            "idx_so_claimed_process": index("process_id", "claimed_at"),
        },
        checks=frozenset({"chk_so_claimed_generation", "chk_so_claimed_token"}),
        foreign_keys={
            "fk_so_claimed_message": ("message_id", "messages", "CASCADE"),
            "fk_so_claimed_instance": ("instance_id", "instances", "CASCADE"),
            "fk_so_claimed_process": ("process_id", "processes", "RESTRICT"),
        },
    ),
    "reminders": Table(
        columns={
            "id": AUTO_ID,
            "instance_id": BIGINT,
            "actor_type": BINARY_IDENTIFIER,
            "actor_id": BINARY_IDENTIFIER,
            "name": IDENTIFIER,
            "operation": IDENTIFIER,
            "arguments": JSON,
            "next_run_at": DATETIME,
            "interval_seconds": Col("decimal", (20, 6), null=True),
            "cron": string(191, null=True),
            "time_zone": string(64, null=True),
            "occurrence": Col("bigint", default="0"),
            "missed_policy": string(32, default="latest"),
            "status": string(32, default="scheduled"),
            "claimed_by": UUID_NULL,
            "claimed_at": DATETIME_NULL,
            **TIMESTAMPS,
        },
        indexes={
            "idx_so_reminders_name": unique("instance_id", "name"),
            "idx_so_reminders_due": index("status", "next_run_at", "id"),
            "idx_so_reminders_claimed_by": index("claimed_by"),
        },
        checks=frozenset(
            {
                "chk_so_reminders_occurrence",
                "chk_so_reminders_interval",
                "chk_so_reminders_missed_policy",
                "chk_so_reminders_status",
            }
        ),
        foreign_keys={
            "fk_so_reminders_instance": ("instance_id", "instances", "CASCADE"),
            "fk_so_reminders_process": ("claimed_by", "processes", "SET NULL"),
        },
    ),
    "effects": Table(
        columns={
            "id": AUTO_ID,
            "message_id": BIGINT,
            "instance_id": BIGINT,
            "effect_id": UUID,
            "name": IDENTIFIER,
            "arguments": JSON,
            "success_operation": IDENTIFIER_NULL,
            "failure_operation": IDENTIFIER_NULL,
            "status": string(32, default="pending"),
            "attempt_count": Col("integer", default="0"),
            "max_attempts": INTEGER,
            "available_at": DATETIME,
            "claimed_by": UUID_NULL,
            "claimed_at": DATETIME_NULL,
            "result": JSON_NULL,
            "error": JSON_NULL,
            "completed_at": DATETIME_NULL,
            **TIMESTAMPS,
        },
        indexes={
            "idx_so_effects_effect_id": unique("effect_id"),
            "idx_so_effects_poll": index("status", "available_at", "id"),
            "idx_so_effects_cleanup": index("completed_at", "id"),
            "idx_so_effects_claimed_by": index("claimed_by"),
        },
        implicit=[("message_id",), ("instance_id",)],
        checks=frozenset(
            {"chk_so_effects_attempts", "chk_so_effects_max_attempts", "chk_so_effects_status"}
        ),
        foreign_keys={
            "fk_so_effects_message": ("message_id", "messages", "CASCADE"),
            "fk_so_effects_instance": ("instance_id", "instances", "CASCADE"),
            "fk_so_effects_process": ("claimed_by", "processes", "SET NULL"),
        },
    ),
    "broadcasts": Table(
        columns={
            "id": AUTO_ID,
            "message_id": BIGINT,
            "instance_id": BIGINT,
            "broadcast_id": UUID,
            "observable_name": IDENTIFIER,
            "value": JSON,
            "state_version": INTEGER,
            "activation_generation": BIGINT,
            "status": string(32, default="pending"),
            "attempt_count": Col("integer", default="0"),
            "available_at": DATETIME,
            "claimed_by": UUID_NULL,
            "claimed_at": DATETIME_NULL,
            "error": JSON_NULL,
            "delivered_at": DATETIME_NULL,
            **TIMESTAMPS,
        },
        indexes={
            "idx_so_broadcasts_id": unique("broadcast_id"),
            "idx_so_broadcasts_observable": unique("message_id", "observable_name"),
            "idx_so_broadcasts_poll": index("status", "available_at", "id"),
            "idx_so_broadcasts_claim": index("claimed_by", "claimed_at"),
            "idx_so_broadcasts_cleanup": index("delivered_at", "id"),
        },
        implicit=[("instance_id",)],
        checks=frozenset(
            {
                "chk_so_broadcasts_state_version",
                "chk_so_broadcasts_generation",
                "chk_so_broadcasts_attempts",
                "chk_so_broadcasts_status",
            }
        ),
        foreign_keys={
            "fk_so_broadcasts_message": ("message_id", "messages", "CASCADE"),
            "fk_so_broadcasts_instance": ("instance_id", "instances", "CASCADE"),
            "fk_so_broadcast_process": ("claimed_by", "processes", "SET NULL"),
        },
    ),
    "dead_letters": Table(
        columns={
            "id": AUTO_ID,
            "message_id": BIGINT,
            "instance_id": BIGINT,
            "actor_type": BINARY_IDENTIFIER,
            "actor_id": BINARY_IDENTIFIER,
            "operation": IDENTIFIER,
            "arguments": JSON,
            "attempts": INTEGER,
            "exception_class": string(255),
            "exception_message": Col("text"),
            "backtrace": JSON,
            "first_failed_at": DATETIME,
            "last_failed_at": DATETIME,
            "retried_message_id": Col("bigint", null=True),
            **TIMESTAMPS,
        },
        indexes={
            "idx_so_dead_letters_message": unique("message_id"),
            "idx_so_dead_letters_actor": index("actor_type", "actor_id", "last_failed_at"),
            "idx_so_dead_letters_cleanup": index("last_failed_at", "id"),
        },
        implicit=[("instance_id",), ("retried_message_id",)],
        checks=frozenset({"chk_so_dead_letters_attempts"}),
        foreign_keys={
            "fk_so_dead_letters_message": ("message_id", "messages", "CASCADE"),
            "fk_so_dead_letters_instance": ("instance_id", "instances", "CASCADE"),
            "fk_so_dead_letters_retry": ("retried_message_id", "messages", "SET NULL"),
        },
    ),
}


def enforced_rule(on_delete: str, vendor: str) -> tuple[str, bool]:
    """``(ON DELETE as the catalogue reports it, checked at commit)`` for a rule of SCHEMA.md.

    SQLite checks ``RESTRICT`` at each statement even inside a transaction, which broke
    Django's ``flush`` (it deletes the tables in any order); since migration ``0003`` the
    RESTRICT rules are ``NO ACTION DEFERRABLE INITIALLY DEFERRED`` there, still refused, at
    commit. Every other rule, and every rule elsewhere, is checked at the statement.
    """
    if vendor == "sqlite" and on_delete == "RESTRICT":
        return "NO ACTION", True
    return on_delete, False
