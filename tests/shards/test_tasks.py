"""The django.tasks backend on shards: each task actor lives on its own shard, a worker's
pass there runs it, and ``get_result`` finds a result whichever shard holds it."""

from __future__ import annotations

import pytest

from solid_objects.models import Message
from solid_objects.shards import database_for
from solid_objects.tasks.compat import TaskResultDoesNotExist, TaskResultStatus
from solid_objects.tasks.naming import TASK_ACTOR_TYPE
from solid_objects.testing import drain
from tests.testapp import tasks

SHARDS = ["default", "shard_b"]
pytestmark = pytest.mark.django_db(transaction=True, databases=SHARDS)


def test_tasks_spread_over_the_shards_and_their_results_are_found(solid_settings):
    solid_settings(DATABASES=SHARDS)
    results = [tasks.add.enqueue(n, 1) for n in range(30)]
    homes = {
        alias: Message.objects.using(alias).filter(actor_type=TASK_ACTOR_TYPE).count()
        for alias in SHARDS
    }
    assert sum(homes.values()) == 30
    assert all(count > 0 for count in homes.values()), homes  # 30 random ids: both shards
    for alias in SHARDS:
        for actor_id in Message.objects.using(alias).values_list("actor_id", flat=True):
            assert database_for(TASK_ACTOR_TYPE, actor_id) == alias
    drain()
    for n, result in enumerate(results):
        found = tasks.add.get_result(result.id)
        assert found.status == TaskResultStatus.SUCCESSFUL
        assert found.return_value == n + 1
    with pytest.raises(TaskResultDoesNotExist):
        tasks.add.get_result("no-such-result")


def test_schedules_arm_and_disarm_on_every_shard(solid_settings):
    from solid_objects.models import Reminder
    from solid_objects.schedules import SCHEDULE_ACTOR_TYPE, sync_schedules

    ring = {"cron": "*/5 * * * *", "actor": "tests.alarm", "operation": "ring"}
    names = [f"s{n}" for n in range(16)]
    solid_settings(
        DATABASES=SHARDS,
        SCHEDULES={
            name: {**ring, "actor_id": name, "arguments": {"label": name}} for name in names
        },
    )
    sync_schedules()
    drain()
    armed = {
        alias: set(
            Reminder.objects.using(alias)
            .filter(actor_type=SCHEDULE_ACTOR_TYPE)
            .values_list("actor_id", flat=True)
        )
        for alias in SHARDS
    }
    assert armed["default"] | armed["shard_b"] == set(names)
    assert all(armed.values()), armed
    solid_settings(DATABASES=SHARDS, SCHEDULES={})
    assert sync_schedules() == 16
    drain()
    for alias in SHARDS:
        assert not Reminder.objects.using(alias).filter(actor_type=SCHEDULE_ACTOR_TYPE).exists()
