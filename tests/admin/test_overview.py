"""The admin overview page: permission-checked, built without counting hot tables in full,
its figures and drill-down links, its SVG charts of the last hour."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.contrib.auth.models import Permission, User
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from solid_objects.conf import table
from solid_objects.db import overview as db_overview
from solid_objects.db.vendors import dialect_for
from solid_objects.runtime import processes
from tests.factories import (
    DeadLetterFactory,
    EffectFactory,
    MessageFactory,
    ProcessFactory,
    ReadyMessageFactory,
)

pytestmark = pytest.mark.django_db(transaction=True)
URL = "/admin/solid_objects/instance/overview/"


def staff(*codenames: str) -> Client:
    name = "operator-" + "-".join(codenames)
    user = User.objects.create_user(name, password="x", is_staff=True)
    user.user_permissions.set(Permission.objects.filter(codename__in=codenames))
    client = Client()
    client.force_login(user)
    return client


def busy() -> None:
    now = timezone.now()
    processes.register("worker", "default")
    ProcessFactory(kind="caller", last_heartbeat_at=now - timedelta(hours=1))
    ProcessFactory(kind="effect", last_heartbeat_at=now - timedelta(hours=1))
    due = now - timedelta(seconds=20)
    ReadyMessageFactory(
        message=MessageFactory(actor_type="tests.counter", available_at=due), available_at=due
    )
    for minutes_ago in (1, 1, 5, 30):
        done = now - timedelta(minutes=minutes_ago)
        MessageFactory(
            actor_type="tests.counter",
            available_at=done - timedelta(seconds=2),
            started_at=done - timedelta(seconds=1),
            completed_at=done,
        )
    MessageFactory(completed_at=now - timedelta(hours=3))  # outside the window
    EffectFactory(status="dead")
    DeadLetterFactory(operation="explode", last_failed_at=now - timedelta(minutes=2))


def test_the_overview_needs_staff_with_view_permissions():
    assert Client().get(URL).status_code == 302  # to the admin login
    assert staff("view_process").get(URL).status_code == 403
    assert staff("view_process", "view_message").get(URL).status_code == 200


def test_the_app_index_links_to_the_overview(admin_client):
    page = admin_client.get("/admin/solid_objects/").content.decode()
    assert reverse("admin:solid_objects_overview") == URL
    assert f'href="{URL}"' in page


def test_the_overview_shows_roles_backlogs_failures_and_links(admin_client):
    busy()
    response = admin_client.get(URL)
    assert response.status_code == 200
    page = response.content.decode()
    data = response.context["overview"]
    assert data["roles"]["worker"]["live"] == 1
    assert data["roles"]["effect"]["stale"] == 1
    assert data["roles"]["caller"] == {
        "live": 0,
        "stale": 0,
        "idle": 1,
        "url": data["roles"]["caller"]["url"],
    }
    assert response.context["missing_roles"] == ["effect", "reminder", "broadcast"]
    assert "Not running: effect, reminder, broadcast." in page
    assert data["mailbox"]["due"] == 1
    throughput, wait, dead = data["series"]
    assert throughput.total == 4 and throughput.values[-2] == 2  # two a minute ago
    assert 0.5 < max(v for v in wait.values if v is not None) < 1.5  # due -> started: 1 s
    assert dead.total == 1
    assert page.count('class="so-chart"') == 3 and 'class="so-bar"' in page
    for link in (
        "/admin/solid_objects/instance/?actor_type=tests.counter",
        "/admin/solid_objects/effect/?status__exact=dead",
        "/admin/solid_objects/process/?kind__exact=worker",
        "/admin/solid_objects/deadletter/",
    ):
        assert link in page, link
        assert admin_client.get(link.replace("&amp;", "&")).status_code == 200, link


def test_the_overview_never_counts_a_hot_table_in_full(admin_client):
    busy()
    # (dead letters are failures kept for an operator, not a hot table: counted as status does)
    hot = [table(name) for name in ("messages", "instances", "effects", "broadcasts", "reminders")]
    with CaptureQueriesContext(connection) as queries:
        assert admin_client.get(URL).status_code == 200
    for query in queries.captured_queries:
        sql = query["sql"]
        for name in hot:
            if f"FROM {connection.ops.quote_name(name)}" in sql or f"FROM {name} " in sql:
                assert "WHERE" in sql or "JOIN" in sql, sql


def test_minutes_of_the_last_hour_on_the_database_clock():
    busy()
    with connection.cursor() as cursor:
        minutes = db_overview.last_hour(cursor, dialect_for(connection))
    assert sum(m.completed for m in minutes.values()) == 4
    assert sum(m.dead_letters for m in minutes.values()) == 1
