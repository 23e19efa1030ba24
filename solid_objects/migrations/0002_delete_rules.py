"""Database-enforced delete rules: every relation becomes a named foreign key.

Django's state keeps ``db_constraint=False`` (nothing to detect for ``makemigrations``); the
constraints exist only in the database. See :mod:`solid_objects.db.delete_rules` for why, and
for how SQLite tables are rebuilt. Table names carry ``SOLID_OBJECTS["TABLE_PREFIX"]``.
"""

from django.db import migrations

from solid_objects.db.delete_rules import AddDeleteRules

# fmt: off
RULES = [
    # (constraint, table, column, referenced table, ON DELETE)
    # Ownership that fencing depends on: the database refuses to delete a live owner.
    ("fk_so_instances_owner", "instances", "activation_owner_id", "processes", "RESTRICT"),
    ("fk_so_claimed_process", "claimed_messages", "process_id", "processes", "RESTRICT"),
    # Everything actor-owned goes with its instance, directly or through its message.
    ("fk_so_messages_instance", "messages", "instance_id", "instances", "CASCADE"),
    ("fk_so_ready_message", "ready_messages", "message_id", "messages", "CASCADE"),
    ("fk_so_ready_instance", "ready_messages", "instance_id", "instances", "CASCADE"),
    ("fk_so_claimed_message", "claimed_messages", "message_id", "messages", "CASCADE"),
    ("fk_so_claimed_instance", "claimed_messages", "instance_id", "instances", "CASCADE"),
    ("fk_so_reminders_instance", "reminders", "instance_id", "instances", "CASCADE"),
    ("fk_so_effects_message", "effects", "message_id", "messages", "CASCADE"),
    ("fk_so_effects_instance", "effects", "instance_id", "instances", "CASCADE"),
    ("fk_so_broadcasts_message", "broadcasts", "message_id", "messages", "CASCADE"),
    ("fk_so_broadcasts_instance", "broadcasts", "instance_id", "instances", "CASCADE"),
    ("fk_so_dead_letters_message", "dead_letters", "message_id", "messages", "CASCADE"),
    ("fk_so_dead_letters_instance", "dead_letters", "instance_id", "instances", "CASCADE"),
    # Claims and back-references that may outlive what they point at.
    ("fk_so_reminders_process", "reminders", "claimed_by", "processes", "SET NULL"),
    ("fk_so_effects_process", "effects", "claimed_by", "processes", "SET NULL"),
    ("fk_so_broadcast_process", "broadcasts", "claimed_by", "processes", "SET NULL"),
    ("fk_so_dead_letters_retry", "dead_letters", "retried_message_id", "messages", "SET NULL"),
]
# fmt: on


class Migration(migrations.Migration):
    dependencies = [("solid_objects", "0001_initial")]

    operations = [AddDeleteRules(rules=RULES)]
