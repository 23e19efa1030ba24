"""Smoke test: both apps load, their migrations apply and match the models."""

from __future__ import annotations

from io import StringIO

import pytest
from django.apps import apps
from django.core.management import call_command
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

OUR_APPS = ("solid_objects", "tilttek_activity")


def test_apps_are_installed_and_ready():
    assert apps.ready
    for label in OUR_APPS:
        assert apps.is_installed(label), label
        apps.get_app_config(label)


@pytest.mark.django_db  # makemigrations checks the recorded history against the database
def test_models_have_no_missing_migrations():
    out = StringIO()
    try:
        call_command("makemigrations", *OUR_APPS, check=True, dry_run=True, stdout=out)
    except SystemExit:  # --check exits 1 when the models changed without a migration
        pytest.fail(f"models changed without a migration:\n{out.getvalue()}")


@pytest.mark.django_db
def test_migrations_are_applied_to_the_test_database():
    executor = MigrationExecutor(connection)
    targets = executor.loader.graph.leaf_nodes()
    assert executor.migration_plan(targets) == []
    tables = set(connection.introspection.table_names())
    for label in OUR_APPS:
        for model in apps.get_app_config(label).get_models():
            if not model._meta.managed or model._meta.proxy:
                continue
            assert model._meta.db_table in tables, (label, model._meta.db_table)
