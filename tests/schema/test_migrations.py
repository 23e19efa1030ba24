"""Migrations: nothing pending, the prefix applies everywhere, 0002 and 0003 reverse cleanly,
and a fresh install ends at the same schema as an upgrade."""

from __future__ import annotations

import textwrap
from dataclasses import astuple
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import call_command
from django.db import connection

from .catalogue import catalogue_for
from .expected import SCHEMA, enforced_rule
from .scratch import connect, manage, scratch_database, shell

pytestmark = pytest.mark.django_db
RULE_COUNT = sum(len(spec.foreign_keys) for spec in SCHEMA.values())


def test_no_model_change_lacks_a_migration() -> None:
    out = StringIO()
    try:
        call_command("makemigrations", "solid_objects", check=True, dry_run=True, stdout=out)
    except SystemExit:
        pytest.fail(f"makemigrations has pending changes:\n{out.getvalue()}")


def delete_rules(database: str, prefix: str = "solid_objects_") -> dict[str, tuple[object, ...]]:
    """Every foreign key of our tables in the scratch database, by constraint name."""
    with connect(database) as scratch:
        catalogue = catalogue_for(scratch)
        present = set(catalogue.tables())  # an older migration state lacks the later tables
        return {
            fk.name: (name, fk.column, fk.target, fk.on_delete, fk.initially_deferred)
            for name in SCHEMA
            if prefix + name in present
            for fk in catalogue.foreign_keys(prefix + name)
        }


def expected_rules(
    prefix: str = "solid_objects_", *, before_0003: bool = False
) -> dict[str, tuple[object, ...]]:
    """The rules after ``migrate``: 0002 creates SCHEMA.md's rules on every database and 0003
    defers SQLite's RESTRICT ones (:func:`~tests.schema.expected.enforced_rule`)."""
    vendor = "any" if before_0003 else connection.vendor
    return {
        fk_name: (name, column, prefix + target, *enforced_rule(rule, vendor))
        for name, spec in SCHEMA.items()
        for fk_name, (column, target, rule) in spec.foreign_keys.items()
    }


def schema_of(database: str) -> dict[str, object]:
    """Everything the catalogue says about our tables; on SQLite also their exact SQL text."""
    with connect(database) as scratch:
        catalogue = catalogue_for(scratch)
        found: dict[str, object] = {
            name: (
                catalogue.columns(name),
                catalogue.primary_key(name),
                sorted(map(astuple, catalogue.indexes(name))),
                catalogue.checks(name),
                sorted(map(astuple, catalogue.foreign_keys(name))),
            )
            for name in sorted(catalogue.tables())
            if name.startswith("solid_objects_")
        }
        if scratch.vendor == "sqlite":
            with scratch.cursor() as cursor:
                cursor.execute(
                    "SELECT type, name, sql FROM sqlite_master "
                    "WHERE tbl_name LIKE 'solid_objects_%' ORDER BY type, name"
                )
                found["sqlite_master"] = cursor.fetchall()
        return found


def applied(database: str) -> list[str]:
    with connect(database) as scratch, scratch.cursor() as cursor:
        cursor.execute("SELECT name FROM django_migrations WHERE app = 'solid_objects'")
        return sorted(name for (name,) in cursor.fetchall())


def test_table_prefix_names_every_table(tmp_path: Path) -> None:
    with scratch_database("prefix", tmp_path) as database:
        manage(database, "migrate", "--noinput", solid_objects={"TABLE_PREFIX": "acme_so_"})
        with connect(database) as scratch:
            tables = catalogue_for(scratch).tables()
        assert {name for name in tables if name.startswith("acme_so_")} == {
            f"acme_so_{name}" for name in SCHEMA
        }
        assert [name for name in tables if name.startswith("solid_objects_")] == []
        assert delete_rules(database, "acme_so_") == expected_rules("acme_so_")


GRAPH = """
import json
from tests.factories import *
instance = InstanceFactory(activated=True)
ReadyMessageFactory(message__instance=instance)
ClaimedMessageFactory(message__instance=instance)
EffectFactory(message__instance=instance)
last = MessageFactory(instance=instance)
last_id = last.pk
last.delete()  # leaves a gap: the next id must not reuse last_id
print(json.dumps({"instance": instance.pk, "last": last_id}))
"""
COUNTS = """
import json
from solid_objects import models
print(json.dumps({m.__name__: m.objects.count() for m in (
    models.Instance, models.Message, models.ReadyMessage, models.ClaimedMessage, models.Effect)}))
"""


def test_delete_rules_reverse_and_reapply_keeping_rows_and_ids(tmp_path: Path) -> None:
    with scratch_database("reverse", tmp_path) as database:
        manage(database, "migrate", "--noinput")
        graph = shell(database, GRAPH)
        counts = shell(database, COUNTS)
        assert delete_rules(database) == expected_rules()

        manage(database, "migrate", "solid_objects", "0001")
        assert delete_rules(database) == {}
        assert shell(database, COUNTS) == counts

        manage(database, "migrate", "solid_objects")
        assert delete_rules(database) == expected_rules()
        assert shell(database, COUNTS) == counts
        after = shell(
            database,
            textwrap.dedent(f"""
                import json
                from django.db import connection
                from solid_objects.conf import table
                from solid_objects.models import Instance
                from tests.factories import MessageFactory
                new = MessageFactory(instance=Instance.objects.get(pk={graph["instance"]}))
                with connection.cursor() as cursor:
                    cursor.execute(f"DELETE FROM {{table('instances')}} WHERE id = %s",
                                   [{graph["instance"]}])
                print(json.dumps({{"new": new.pk}}))
            """),
        )
        assert after["new"] > graph["last"], "an id was reused after the table rebuild"
        assert set(shell(database, COUNTS).values()) == {0}, "the rebuilt tables cascade"


ORPHAN = """
import json
from solid_objects.models import Instance
from tests.factories import MessageFactory
message = MessageFactory()
Instance.objects.filter(pk=message.instance_id).delete()  # 0001 has no foreign keys yet
print(json.dumps({"orphan": message.pk}))
"""


def test_orphan_rows_stop_the_delete_rules_without_leaving_half_of_them(tmp_path: Path) -> None:
    with scratch_database("orphan", tmp_path) as database:
        manage(database, "migrate", "--noinput", "solid_objects", "0001")
        orphan = shell(database, ORPHAN)["orphan"]

        refused = manage(database, "migrate", "--noinput", "solid_objects", ok=False)
        assert refused.returncode != 0
        assert "IntegrityError" in refused.stderr
        assert delete_rules(database) == {}
        assert applied(database) == ["0001_initial"]

        shell(
            database,
            "import json; from solid_objects.models import Message; "
            f"print(json.dumps(Message.objects.filter(pk={orphan}).delete()[0]))",
        )
        manage(database, "migrate", "--noinput", "solid_objects")
        assert delete_rules(database) == expected_rules()
        assert applied(database) == [
            "0001_initial",
            "0002_delete_rules",
            "0003_sqlite_deferred_restrict",
            "0004_effect_handled_status",
            "0005_rate_limits",
            "0006_reminder_cron",
            "0007_shard_agreement",
        ]


HELD = """
import json
from solid_objects.models import ClaimedMessage, Instance
from tests.factories import ClaimedMessageFactory, InstanceFactory, ReadyMessageFactory
instance = InstanceFactory(activated=True)  # a lease
ReadyMessageFactory(message__instance=instance)
ClaimedMessageFactory(message__instance=InstanceFactory(activated=True))  # a claimed turn
print(json.dumps({"leases": Instance.objects.exclude(activation_owner=None).count(),
                  "claims": ClaimedMessage.objects.count()}))
"""


def test_a_fresh_install_and_an_upgrade_from_0002_end_at_the_same_schema(tmp_path: Path) -> None:
    with (
        scratch_database("fresh", tmp_path) as fresh,
        scratch_database("upgrade", tmp_path) as upgrade,
    ):
        manage(fresh, "migrate", "--noinput")
        manage(upgrade, "migrate", "--noinput")
        manage(upgrade, "migrate", "--noinput", "solid_objects", "0002")
        at_0002 = schema_of(upgrade)
        assert delete_rules(upgrade) == expected_rules(before_0003=True)
        held = shell(upgrade, HELD)
        counts = shell(upgrade, COUNTS)

        manage(upgrade, "migrate", "--noinput", "solid_objects")
        assert schema_of(upgrade) == schema_of(fresh)
        assert delete_rules(upgrade) == expected_rules()
        assert shell(upgrade, COUNTS) == counts, "the rebuilt tables kept their rows"

        manage(upgrade, "migrate", "--noinput", "solid_objects", "0002")
        assert schema_of(upgrade) == at_0002, "0003 reverses to exactly the schema of 0002"
        manage(upgrade, "migrate", "--noinput", "solid_objects")
        assert schema_of(upgrade) == schema_of(fresh)
        assert shell(upgrade, HELD) == {key: 2 * value for key, value in held.items()}
