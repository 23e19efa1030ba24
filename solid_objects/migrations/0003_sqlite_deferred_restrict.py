"""SQLite: the RESTRICT references to ``processes`` are checked at commit, not at the statement.

SQLite enforces ``RESTRICT`` at each statement even inside a transaction, so Django's
``flush`` (the teardown of every ``TransactionTestCase``), which deletes the tables in an
arbitrary order in one transaction, failed while any lease or claimed turn was held. On
SQLite these rules become ``NO ACTION DEFERRABLE INITIALLY DEFERRED``: a process that still
owns a lease or a claim cannot be deleted, and the transaction that tries is refused when it
commits. A no-op on PostgreSQL, MySQL and MariaDB, which keep the immediate ``RESTRICT``.
See :mod:`solid_objects.db.delete_rules`.
"""

from django.db import migrations

from solid_objects.db.delete_rules import DeferSqliteRestrictRules

# fmt: off
RULES = [
    # (constraint, table, column, referenced table, ON DELETE), as created by 0002
    ("fk_so_instances_owner", "instances", "activation_owner_id", "processes", "RESTRICT"),
    ("fk_so_claimed_process", "claimed_messages", "process_id", "processes", "RESTRICT"),
]
# fmt: on


class Migration(migrations.Migration):
    dependencies = [("solid_objects", "0002_delete_rules")]

    operations = [DeferSqliteRestrictRules(rules=RULES)]
