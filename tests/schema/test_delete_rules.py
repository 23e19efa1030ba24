"""The delete rules are enforced by the database itself: plain SQL, no ORM collector."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from django.db import IntegrityError, connection, transaction
from django.utils import timezone

from solid_objects.models import Instance
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

pytestmark = pytest.mark.django_db

ACTOR_OWNED = (
    "messages",
    "ready_messages",
    "claimed_messages",
    "reminders",
    "effects",
    "broadcasts",
    "dead_letters",
)


def actor_with_everything() -> Instance:
    """An activated instance with a row in every table an actor owns."""
    instance = InstanceFactory(activated=True)
    ready = ReadyMessageFactory(message__instance=instance)
    claimed = ClaimedMessageFactory(message__instance=instance)
    ReminderFactory(instance=instance)
    EffectFactory(message=ready.message)
    BroadcastFactory(message=claimed.message)
    DeadLetterFactory(message__instance=instance, retried_message=ready.message)
    return instance


def owned_rows(instance_id: int) -> dict[str, int]:
    return {name: sql.count(name, "instance_id", instance_id) for name in ACTOR_OWNED}


def test_raw_delete_of_an_instance_removes_everything_it_owns() -> None:
    doomed, survivor = actor_with_everything(), actor_with_everything()
    assert all(owned_rows(doomed.pk).values())

    assert sql.delete("instances", doomed.pk) == 1

    assert owned_rows(doomed.pk) == dict.fromkeys(ACTOR_OWNED, 0)
    assert all(owned_rows(survivor.pk).values())
    # Process rows are not actor-owned: the former owner stays registered.
    assert sql.count("processes", "id", doomed.activation_owner_id) == 1


def test_orm_delete_of_an_instance_cascades_in_the_database_too() -> None:
    doomed = actor_with_everything()
    Instance.objects.filter(pk=doomed.pk).delete()  # DO_NOTHING: one DELETE statement
    assert owned_rows(doomed.pk) == dict.fromkeys(ACTOR_OWNED, 0)


def test_raw_delete_of_a_message_removes_its_rows_and_unlinks_retries() -> None:
    message = ReadyMessageFactory().message
    ClaimedMessageFactory(message=MessageFactory(instance=message.instance))  # a sibling
    EffectFactory(message=message)
    BroadcastFactory(message=message)
    DeadLetterFactory(message=message)
    retried_from = DeadLetterFactory(message__instance=message.instance, retried_message=message)

    assert sql.delete("messages", message.pk) == 1

    for name in ("ready_messages", "effects", "broadcasts", "dead_letters"):
        assert sql.count(name, "message_id", message.pk) == 0, name
    assert sql.value("dead_letters", retried_from.pk, "retried_message_id") is None
    assert sql.count("claimed_messages", "instance_id", message.instance_id) == 1
    assert sql.count("instances", "id", message.instance_id) == 1


def owner_of(what: str) -> tuple[str, Callable[[], bool]]:
    """A process owning a lease or a claimed turn, and a check that it still owns it."""
    if what == "lease":
        instance = InstanceFactory(activated=True)
        owner = instance.activation_owner_id
        return owner, lambda: sql.value("instances", instance.pk, "activation_owner_id") == owner
    claim = ClaimedMessageFactory()  # claimed by a process that owns no activation
    assert sql.count("instances", "activation_owner_id", claim.process_id) == 0
    return (
        claim.process_id,
        lambda: sql.value("claimed_messages", claim.pk, "process_id") == claim.process_id,
    )


@pytest.mark.db_vendor("postgresql", "mysql")
@pytest.mark.parametrize("what", ["lease", "claim"])
def test_deleting_the_owner_of_a_lease_or_claim_is_refused_at_the_statement(what: str) -> None:
    owner, still_owns = owner_of(what)
    with transaction.atomic():
        with pytest.raises(IntegrityError), transaction.atomic():
            sql.delete("processes", owner)
        # Still inside the transaction: the DELETE itself was refused (RESTRICT).
        assert sql.count("processes", "id", owner) == 1
        assert still_owns()


@pytest.mark.db_vendor("sqlite")
@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("what", ["lease", "claim"])
def test_sqlite_refuses_deleting_the_owner_of_a_lease_or_claim_at_commit(what: str) -> None:
    """SQLite defers these rules (migration 0003) so Django's flush works; the delete is
    still refused, by the commit, and the whole transaction is rolled back."""
    owner, still_owns = owner_of(what)
    bystander = ProcessFactory().pk  # owns nothing: deleting it alone would be fine
    deleted: list[int] = []
    with pytest.raises(IntegrityError), transaction.atomic():
        deleted.append(sql.delete("processes", bystander))
        deleted.append(sql.delete("processes", owner))
    assert deleted == [1, 1], "the DELETE statements are accepted..."
    # ...and the commit refuses them: nothing that transaction deleted is gone.
    assert sql.count("processes", "id", owner) == 1
    assert sql.count("processes", "id", bystander) == 1
    assert still_owns()

    with pytest.raises(IntegrityError):  # outside a transaction the statement is its own
        sql.delete("processes", owner)
    assert sql.count("processes", "id", owner) == 1
    assert still_owns()


def test_deleting_a_process_clears_its_reminder_effect_and_broadcast_claims() -> None:
    process, now = ProcessFactory(), timezone.now()
    claimed = {
        "reminders": ReminderFactory(claimed_by=process, claimed_at=now).pk,
        "effects": EffectFactory(claimed_by=process, claimed_at=now, status="processing").pk,
        "broadcasts": BroadcastFactory(claimed_by=process, claimed_at=now, status="processing").pk,
    }

    assert sql.delete("processes", process.pk) == 1

    for name, pk in claimed.items():
        assert sql.count(name, "id", pk) == 1, f"{name} row must survive"
        assert sql.value(name, pk, "claimed_by") is None, name


def test_a_reference_to_a_missing_row_is_refused() -> None:
    ready = ReadyMessageFactory()
    with pytest.raises(IntegrityError), transaction.atomic():
        sql.update("ready_messages", ready.pk, "message_id", ready.message_id + 1_000_000)


@pytest.mark.db_vendor("sqlite")
def test_sqlite_enforces_foreign_keys() -> None:
    assert sql.scalar("PRAGMA foreign_keys") == 1
    assert connection.vendor == "sqlite"
