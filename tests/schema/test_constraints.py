"""Every check constraint and the identity rules refuse bad rows written with plain SQL."""

from __future__ import annotations

from collections.abc import Callable
from decimal import Decimal
from functools import partial
from typing import Any

import pytest
from django.db import IntegrityError, transaction

from tests.factories import (
    BroadcastFactory,
    ClaimedMessageFactory,
    DeadLetterFactory,
    EffectFactory,
    InstanceFactory,
    MessageFactory,
    ProcessFactory,
    ReadyMessageFactory,
    ReminderFactory,
)

from . import sql
from .expected import SCHEMA

pytestmark = pytest.mark.django_db

# (check, factory of a valid row, table, column, a value the check must refuse)
VIOLATIONS: list[tuple[str, Callable[[], Any], str, str, Any]] = [
    ("chk_so_process_shutdown", ProcessFactory, "processes", "shutdown_state", "gone"),
    ("chk_so_instances_state_version", InstanceFactory, "instances", "state_version", 0),
    ("chk_so_instances_sequence", InstanceFactory, "instances", "next_message_sequence", 0),
    ("chk_so_instances_generation", InstanceFactory, "instances", "activation_generation", -1),
    ("chk_so_instances_activation_owner", InstanceFactory, "instances", "activation_token", "t"),
    (
        "chk_so_instances_activation_owner",
        partial(InstanceFactory, activated=True),
        "instances",
        "activation_token",
        None,
    ),
    ("chk_so_messages_sequence", MessageFactory, "messages", "sequence", 0),
    ("chk_so_messages_attempts", MessageFactory, "messages", "attempt_count", -1),
    ("chk_so_messages_max_attempts", MessageFactory, "messages", "max_attempts", 0),
    ("chk_so_messages_delivery_mode", MessageFactory, "messages", "delivery_mode", "later"),
    ("chk_so_ready_sequence", ReadyMessageFactory, "ready_messages", "sequence", 0),
    (
        "chk_so_claimed_generation",
        ClaimedMessageFactory,
        "claimed_messages",
        "activation_generation",
        0,
    ),
    ("chk_so_claimed_token", ClaimedMessageFactory, "claimed_messages", "activation_token", None),
    ("chk_so_reminders_occurrence", ReminderFactory, "reminders", "occurrence", -1),
    ("chk_so_reminders_interval", ReminderFactory, "reminders", "interval_seconds", Decimal(0)),
    ("chk_so_reminders_interval", ReminderFactory, "reminders", "interval_seconds", Decimal(-2)),
    ("chk_so_reminders_missed_policy", ReminderFactory, "reminders", "missed_policy", "some"),
    ("chk_so_reminders_status", ReminderFactory, "reminders", "status", "done"),
    ("chk_so_effects_attempts", EffectFactory, "effects", "attempt_count", -1),
    ("chk_so_effects_max_attempts", EffectFactory, "effects", "max_attempts", 0),
    ("chk_so_effects_status", EffectFactory, "effects", "status", "done"),
    ("chk_so_broadcasts_state_version", BroadcastFactory, "broadcasts", "state_version", 0),
    ("chk_so_broadcasts_generation", BroadcastFactory, "broadcasts", "activation_generation", 0),
    ("chk_so_broadcasts_attempts", BroadcastFactory, "broadcasts", "attempt_count", -1),
    ("chk_so_broadcasts_status", BroadcastFactory, "broadcasts", "status", "sent"),
    ("chk_so_dead_letters_attempts", DeadLetterFactory, "dead_letters", "attempts", 0),
]


def test_every_check_constraint_has_a_violation_case() -> None:
    every_check = set().union(*(spec.checks for spec in SCHEMA.values()))
    assert {case[0] for case in VIOLATIONS} == every_check


@pytest.mark.parametrize(
    ("check", "factory", "name", "column", "bad"),
    VIOLATIONS,
    ids=[f"{case[0]}-{case[3]}={case[4]!r}" for case in VIOLATIONS],
)
def test_check_constraint_refuses_a_bad_row(
    check: str, factory: Callable[[], Any], name: str, column: str, bad: Any
) -> None:
    row = factory()
    with pytest.raises(IntegrityError) as refused, transaction.atomic():
        sql.update(name, row.pk, column, bad)
    assert check in str(refused.value)


def test_reminder_interval_accepts_a_microsecond() -> None:
    reminder = ReminderFactory()
    assert sql.update("reminders", reminder.pk, "interval_seconds", Decimal("0.000001")) == 1


def test_actor_identity_is_case_sensitive_and_unique() -> None:
    InstanceFactory(actor_type="shop.Cart", actor_id="A")
    InstanceFactory(actor_type="shop.cart", actor_id="A")
    InstanceFactory(actor_type="shop.Cart", actor_id="a")
    with pytest.raises(IntegrityError), transaction.atomic():
        InstanceFactory(actor_type="shop.Cart", actor_id="A")


def test_trailing_spaces_make_a_different_identity() -> None:
    """MySQL/MariaDB's PAD SPACE collations would make these two one actor."""
    first = InstanceFactory(actor_type="shop.cart", actor_id="A")
    second = InstanceFactory(actor_type="shop.cart", actor_id="A ")
    assert sql.value("instances", second.pk, "actor_id") == "A "
    assert first.pk != second.pk
    key = MessageFactory(instance=first, idempotency_key="k")
    MessageFactory(instance=first, idempotency_key="k ")
    assert sql.value("messages", key.pk, "idempotency_key") == "k"


def test_idempotency_keys_are_unique_per_instance_and_nulls_repeat() -> None:
    first = MessageFactory(idempotency_key=None)
    MessageFactory(instance=first.instance, idempotency_key=None)
    MessageFactory(instance=first.instance, idempotency_key="order-1")
    MessageFactory(idempotency_key="order-1")  # another instance
    with pytest.raises(IntegrityError), transaction.atomic():
        MessageFactory(instance=first.instance, idempotency_key="order-1")


def test_an_actor_has_at_most_one_claimed_message() -> None:
    claim = ClaimedMessageFactory()
    with pytest.raises(IntegrityError), transaction.atomic():
        ClaimedMessageFactory(message__instance=claim.instance)
