"""``SolidObjectsRouter``, the routing system checks and the doctor's copies check, on a
real second database."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from django.core.management import call_command
from django.db import connections
from django.test import override_settings

from solid_objects.checks import check_routing
from solid_objects.conf import table
from solid_objects.diagnostics import FAIL, OK, check_copies
from solid_objects.models import Instance, Process
from solid_objects.routers import SolidObjectsRouter
from tests.factories import ProcessFactory
from tests.operations.second_database import empty, second_database
from tilttek_activity.models import Entry

# "__all__": the second alias is added (module fixture) before the test's databases are read.
pytestmark = pytest.mark.django_db(transaction=True, databases="__all__")
ROUTER = ["solid_objects.routers.SolidObjectsRouter"]


@pytest.fixture(scope="module")
def second_alias(
    django_db_setup: None, django_db_blocker: Any, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[str]:
    with django_db_blocker.unblock(), second_database(tmp_path_factory.mktemp("db")) as alias:
        yield alias


@pytest.fixture
def second(second_alias: str) -> Iterator[str]:
    yield second_alias
    empty(second_alias)  # no tables left for the next test


def ids(messages: list) -> list[str]:
    return [message.id for message in messages]


def test_the_router_sends_each_app_to_its_database():
    router = SolidObjectsRouter()
    with override_settings(
        SOLID_OBJECTS={"DATABASE": "actors"}, TILTTEK_ACTIVITY={"DATABASE": "journal"}
    ):
        assert router.db_for_read(Instance) == router.db_for_write(Process) == "actors"
        assert router.db_for_read(Entry) == "journal"
        assert router.allow_migrate("actors", "solid_objects") is True
        assert router.allow_migrate("default", "solid_objects") is False
        assert router.allow_migrate("journal", "tilttek_activity") is True
        assert router.allow_migrate("actors", "auth") is None  # other apps: no opinion
        assert router.db_for_read(Instance) != router.db_for_read(Entry)


def test_without_a_router_a_non_default_database_is_an_error_and_a_warning(second):
    with override_settings(SOLID_OBJECTS={"DATABASE": second}, DATABASE_ROUTERS=[]):
        found = check_routing()
    assert ids(found) == ["solid_objects.E013", "solid_objects.W003", "solid_objects.W003"]
    assert "Broadcast → 'default'" in str(found[0].msg)
    assert "SolidObjectsRouter" in found[0].hint
    with override_settings(SOLID_OBJECTS={"DATABASE": second}, DATABASE_ROUTERS=ROUTER):
        assert check_routing() == []


def test_a_second_alias_without_a_router_warns_that_migrate_copies_the_tables(second):
    with override_settings(DATABASE_ROUTERS=[]):
        found = check_routing()
    assert ids(found) == ["solid_objects.W003", "solid_objects.W003"]
    assert repr(second) in str(found[0].msg)
    with override_settings(DATABASE_ROUTERS=ROUTER):
        assert check_routing() == []


def test_with_the_router_queries_and_migrate_use_the_configured_database(second):
    with override_settings(DATABASE_ROUTERS=ROUTER):
        call_command("migrate", "solid_objects", database=second, verbosity=0)
        assert table("processes") not in connections[second].introspection.table_names()
    empty(second)  # (migrate recorded the migrations as applied there)
    with override_settings(SOLID_OBJECTS={"DATABASE": second}, DATABASE_ROUTERS=ROUTER):
        call_command("migrate", "solid_objects", database=second, verbosity=0)
        ProcessFactory(kind="worker")  # the admin's and the factories' ORM writes
        assert Process.objects.count() == 1
        assert Process.objects.using("default").count() == 0


def test_the_doctor_fails_on_a_copy_of_the_tables_on_another_database(second, solid_settings):
    solid_settings(DATABASES=["default", "shard_b"])  # shards hold the tables: no copies
    assert check_copies("default").status == OK
    with override_settings(DATABASE_ROUTERS=[]):
        call_command("migrate", "solid_objects", database=second, verbosity=0)
    finding = check_copies("default")
    assert finding.status == FAIL
    assert repr(second) in finding.detail and "SolidObjectsRouter" in finding.detail
