"""Commit actions: ORM writes that commit, or roll back, with the turn's fenced commit."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.contrib.auth.models import Group
from django.db import connection
from django.utils import timezone

from solid_objects import LostActivation
from solid_objects.lease import acquire
from solid_objects.models import Instance
from solid_objects.passes import run_pass
from solid_objects.runtime.processes import callers
from tests.testapp.actors.outbox import Grouper

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_commit_action_commits_with_the_turn():
    Grouper.ref("g1").create("editors")
    assert Group.objects.filter(name="editors").count() == 1
    assert Grouper.ref("g1").snapshot().created == ["editors"]


def test_a_commit_action_rolls_back_when_the_fenced_commit_fails():
    ref = Grouper.ref("g2")
    message = ref.enqueue().create("lost-group")
    alias = connection.alias
    activation = acquire(alias, callers.process_id(alias), [message.instance_id])
    assert activation is not None
    # The lease goes stale while the turn runs (expired, as after a long pause).
    Instance.objects.filter(pk=message.instance_id).update(
        activation_expires_at=timezone.now() - timedelta(seconds=1)
    )
    with pytest.raises(LostActivation):
        run_pass(activation)
    assert not Group.objects.filter(name="lost-group").exists()
    assert ref.snapshot().created == []

    # The message was not lost: the next activation retries it and the group commits once.
    assert message.result(timeout=10) is None
    assert Group.objects.filter(name="lost-group").count() == 1
    assert ref.snapshot().created == ["lost-group"]
