"""Effects get the ``handled`` status: a failure delivered to the ``on_failure`` callback.

Changing the CHECK constraint rebuilds the table on SQLite, which loses the named foreign
keys of 0002 (Django's state does not know them): they are added back on SQLite, after the
rebuild going forwards and after the reverse rebuild going backwards.
"""

from django.db import migrations, models

from solid_objects.db.delete_rules import AddDeleteRules

# fmt: off
EFFECT_RULES = [
    # (constraint, table, column, referenced table, ON DELETE), as created by 0002
    ("fk_so_effects_message", "effects", "message_id", "messages", "CASCADE"),
    ("fk_so_effects_instance", "effects", "instance_id", "instances", "CASCADE"),
    ("fk_so_effects_process", "effects", "claimed_by", "processes", "SET NULL"),
]
# fmt: on

RESTORE = AddDeleteRules(rules=EFFECT_RULES, vendors=["sqlite"])


def restore_after_reverse_rebuild(apps, schema_editor):
    RESTORE.database_forwards("solid_objects", schema_editor, None, None)


class Migration(migrations.Migration):
    dependencies = [("solid_objects", "0003_sqlite_deferred_restrict")]

    operations = [
        migrations.RunPython(migrations.RunPython.noop, restore_after_reverse_rebuild),
        migrations.RemoveConstraint(model_name="effect", name="chk_so_effects_status"),
        migrations.AddConstraint(
            model_name="effect",
            constraint=models.CheckConstraint(
                condition=models.Q(
                    status__in=["pending", "processing", "completed", "handled", "dead"]
                ),
                name="chk_so_effects_status",
            ),
        ),
        RESTORE,
    ]
