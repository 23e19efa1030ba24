"""Transactional tests end with Django's flush; our restrictive references must not break it.

On SQLite, ``flush`` deletes table by table in an arbitrary (hash-seeded) order, with foreign
keys enforced: deleting ``processes`` before ``instances`` used to hit
``fk_so_instances_owner``. Since migration 0003 SQLite checks the RESTRICT rules at commit, so
the suite needs no fixture emptying our tables first. These tests leave such rows behind on
purpose; their teardown is the test (``test_flush.py`` forces the order that used to fail).
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
