"""What a turn staged, written inside its fenced commit: effects (including actor-to-actor
messages), reminders, commit actions, journal entries and broadcasts. Each kind is one
statement per turn where the databases allow (multi-row ``INSERT``)."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from tilttek_activity.staging import write_staged as write_activities

from . import payloads
from .conf import get_settings
from .db.notify import notify_enabled
from .db.notify import send as send_hint
from .registry import get_commit_action

if TYPE_CHECKING:
    from .db.dialect import Dialect, LeaseRow
    from .spec import ActorSpec
    from .turn import StagedReminder, TurnOutcome


class Activation(Protocol):
    """What the fenced commit's writes need of an
    :class:`~solid_objects.activation.Activation` (which satisfies it)."""

    alias: str
    lease: LeaseRow
    spec: ActorSpec
    stored_state_version: int


@dataclass(frozen=True)
class CommitActionContext:
    """Passed to a commit action: it runs inside the fenced commit, on ``using``."""

    actor_type: str
    actor_id: str
    instance_id: int
    message_id: int
    using: str


def write_staged(
    cursor: Any, dialect: Dialect, activation: Activation, outcome: TurnOutcome
) -> None:
    staged = outcome.staged
    if staged is None:
        return
    lease = activation.lease
    if staged.effects:
        _insert_effects(cursor, dialect, lease.instance_id, outcome.message.id, staged.effects)
        _hint(cursor, dialect, "effect")
    for reminder in staged.reminders:
        if _write_reminder(cursor, dialect, activation, reminder):
            staged.replaced_reminders.append(reminder.name)
    if any(not reminder.cancel for reminder in staged.reminders):
        _hint(cursor, dialect, "reminder")
    for action in staged.commit_actions:
        function = get_commit_action(action.name)
        if function is None:  # unregistered between staging and commit
            raise LookupError(f"no commit action {action.name!r} is registered")
        function(
            action.arguments,
            CommitActionContext(
                actor_type=lease.actor_type,
                actor_id=lease.actor_id,
                instance_id=lease.instance_id,
                message_id=outcome.message.id,
                using=activation.alias,
            ),
        )
    if staged.activities:
        # The journal's own insert-once statements, in this transaction (its database is
        # the actor's: a system check says so at start-up).
        write_activities(activation.alias, staged.activities)


def _hint(cursor: Any, dialect: Dialect, kind: str) -> None:
    """Wake the effect or reminder role of other processes (PostgreSQL ``NOTIFY``, sent only
    if this commit succeeds; identical notifications of one transaction are folded)."""
    if not dialect.listen_notify:
        return
    if notify_enabled(dialect):
        send_hint(cursor, kind)


def _insert_effects(
    cursor: Any, dialect: Dialect, instance_id: int, message_id: int, effects: list[Any]
) -> None:
    n = dialect.now
    max_attempts = get_settings().MAX_ATTEMPTS
    rows = []
    params: list[Any] = []
    for effect in effects:
        rows.append(f"(%s, %s, %s, %s, {dialect.json}, %s, %s, 'pending', 0, %s, {n}, {n}, {n})")
        params.extend(
            [
                message_id,
                instance_id,
                effect.effect_id,
                effect.name,
                effect.arguments,
                effect.success_operation,
                effect.failure_operation,
                max_attempts,
            ]
        )
    cursor.execute(
        f"INSERT INTO {dialect.t_effects} (message_id, instance_id, effect_id, name, arguments, "
        "success_operation, failure_operation, status, attempt_count, max_attempts, "
        f"available_at, created_at, updated_at) VALUES {', '.join(rows)}",
        params,
    )


def _write_reminder(
    cursor: Any, dialect: Dialect, activation: Activation, reminder: StagedReminder
) -> bool:
    """Upsert (or delete) one named reminder; ``True`` when an existing one was moved."""
    lease = activation.lease
    if reminder.cancel:
        cursor.execute(
            f"DELETE FROM {dialect.t_reminders} WHERE instance_id = %s AND name = %s",
            [lease.instance_id, reminder.name],
        )
        return False
    if reminder.at is not None:
        at_sql, at_params = "%s", [dialect.adapt_datetime(reminder.at)]
    else:
        at_sql, at_params = dialect.now_plus(reminder.delay or 0.0)
    interval = (
        None
        if reminder.interval_seconds is None
        else dialect.ops.adapt_decimalfield_value(_decimal(reminder.interval_seconds), 20, 6)
    )
    n = dialect.now
    cursor.execute(
        f"UPDATE {dialect.t_reminders} SET operation = %s, arguments = {dialect.json}, "
        f"next_run_at = {at_sql}, interval_seconds = %s, missed_policy = %s, "
        f"status = 'scheduled', claimed_by = NULL, claimed_at = NULL, updated_at = {n} "
        "WHERE instance_id = %s AND name = %s",
        [
            reminder.operation,
            reminder.arguments,
            *at_params,
            interval,
            reminder.missed_policy,
            lease.instance_id,
            reminder.name,
        ],
    )
    if cursor.rowcount:
        return True
    cursor.execute(
        f"INSERT INTO {dialect.t_reminders} (instance_id, actor_type, actor_id, name, operation, "
        "arguments, next_run_at, interval_seconds, occurrence, missed_policy, status, "
        f"created_at, updated_at) VALUES (%s, %s, %s, %s, %s, {dialect.json}, {at_sql}, %s, 0, "
        f"%s, 'scheduled', {n}, {n})",
        [
            lease.instance_id,
            lease.actor_type,
            lease.actor_id,
            reminder.name,
            reminder.operation,
            reminder.arguments,
            *at_params,
            interval,
            reminder.missed_policy,
        ],
    )
    return False


def _decimal(seconds: float) -> Any:
    from decimal import Decimal

    return Decimal(f"{seconds:.6f}")


def write_broadcasts(
    cursor: Any, dialect: Dialect, activation: Activation, outcome: TurnOutcome
) -> None:
    """One ``broadcasts`` row per observable the turn changed (unique per message)."""
    changed = outcome.broadcasts or {}
    n = dialect.now
    rows = []
    params: list[Any] = []
    for name, value in changed.items():
        spec = activation.spec.observables[name]
        body = payloads.encode(value if spec.broadcast == "value" else {}, what=name)
        rows.append(f"(%s, %s, %s, %s, {dialect.json}, %s, %s, 'pending', 0, {n}, {n}, {n})")
        params.extend(
            [
                outcome.message.id,
                activation.lease.instance_id,
                str(uuid.uuid4()),
                name,
                body,
                activation.stored_state_version,
                activation.lease.generation,
            ]
        )
    if rows:
        cursor.execute(
            f"INSERT INTO {dialect.t_broadcasts} (message_id, instance_id, broadcast_id, "
            "observable_name, value, state_version, activation_generation, status, "
            f"attempt_count, available_at, created_at, updated_at) VALUES {', '.join(rows)}",
            params,
        )
