"""Transactional tests end with Django's flush; our restrictive references must not break it.

On SQLite, ``flush`` deletes table by table in an arbitrary (hash-seeded) order, with foreign
keys enforced: deleting ``processes`` before ``instances`` would hit ``fk_so_instances_owner``.
``tests/conftest.py`` empties our tables in dependency order first (SCHEMA.md: "clean every
table explicitly"). These tests leave such rows behind on purpose; their teardown is the test.
"""

from __future__ import annotations

import pytest

from solid_objects.models import Process
from tests.factories import ClaimedMessageFactory, InstanceFactory


@pytest.mark.django_db(transaction=True)
def test_a_transactional_test_may_leave_owned_leases_and_claims_behind() -> None:
    instance = InstanceFactory(activated=True)
    claim = ClaimedMessageFactory(message__instance=instance)
    assert claim.process_id == instance.activation_owner_id
    assert Process.objects.count() == 1


def test_the_next_test_starts_empty(transactional_db: None) -> None:
    assert not Process.objects.exists()
