"""Delete rules enforced by the database: the named foreign keys of migration ``0002``.

Every relation of the tables is declared in Django as ``on_delete=DO_NOTHING,
db_constraint=False`` (see :func:`solid_objects.models.fields.foreign_key`). Django therefore
creates no foreign key at all, and :class:`AddDeleteRules` creates the real ones, with the
names of the schema seed and an explicit ``ON DELETE CASCADE / SET NULL / RESTRICT``:

* PostgreSQL, MySQL and MariaDB: ``ALTER TABLE ... ADD CONSTRAINT ... FOREIGN KEY``, one
  statement per table, never ``DEFERRABLE`` (a refused delete fails at the statement, not at
  commit);
* SQLite, which cannot add a constraint to an existing table: each table is rebuilt with the
  documented procedure (https://www.sqlite.org/lang_altertable.html#otheralter): its
  ``CREATE TABLE`` text is read from ``sqlite_master``, the ``FOREIGN KEY`` clauses are
  appended, the rows are copied into the new table, the old one is dropped, the new one
  renamed, its indexes and triggers recreated and its ``AUTOINCREMENT`` counter carried over.
  Django's SQLite schema editor runs migrations with ``foreign_keys`` off, which this needs;
  a ``PRAGMA foreign_key_check`` then refuses orphan rows as the other databases would.

SQLite then needs one more step, :class:`DeferSqliteRestrictRules` (migration ``0003``). It
checks ``RESTRICT`` at each statement even inside a transaction, whereas Django's ``flush``
(the teardown of every ``TransactionTestCase``) deletes the tables in an arbitrary order in
one transaction: a ``processes`` row deleted before the lease or claim naming it was refused,
although that row was about to be deleted too. On SQLite only, the ``RESTRICT`` rules become
``NO ACTION DEFERRABLE INITIALLY DEFERRED``: deleting a process that still owns a lease or a
claim is still refused, at the commit of the transaction (at once outside a transaction),
and the whole transaction is rolled back. PostgreSQL and MySQL keep the immediate
``RESTRICT``: their ``flush`` truncates, or disables the checks, so it never needed this.

Why not Django's own ``on_delete``? Python-level ``CASCADE`` runs only through the ORM's
collector: a raw ``DELETE FROM instances`` (a DBA, a retention job, another language) would
leave executable orphans, which the product forbids. Django 6.1 adds database-level
``DB_CASCADE`` and ``DB_SET_NULL``, but we deliberately do not use them:

* Django 5.2, which we support, has no such option, so the models (and the migration state
  ``makemigrations`` compares against) would have to differ between Django versions;
* there is no database-level ``RESTRICT``: Django's constraints are ``NO ACTION`` and, on
  PostgreSQL and SQLite, ``DEFERRABLE INITIALLY DEFERRED``, so deleting a process that still
  owns an activation would only fail at commit, after the code that did it has moved on;
* Django names its constraints ``<table>_<column>_<hash>_fk_<target>``, not with the seed's
  names, and drops and recreates them whenever it alters a column.

One operation with plain SQL gives the same constraints, under the same names, on every
database and every supported Django version.

.. warning::
   On SQLite, a later migration that makes Django *remake* one of these tables (most
   ``AlterField``/``AddField`` operations there) rebuilds it from Django's state, which has no
   foreign keys, and so silently drops that table's delete rules. Such a migration must end
   with ``AddDeleteRules(rules=[...that table's rules...], vendors=["sqlite"])`` followed,
   when they include a ``RESTRICT`` rule, by ``DeferSqliteRestrictRules(rules=[...])``. The
   schema tests (``tests/schema``) fail after ``migrate`` if any rule is missing or differs.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from contextlib import suppress
from functools import partial
from typing import NamedTuple

from django.db import DatabaseError, IntegrityError, NotSupportedError, ProgrammingError, router
from django.db.backends.base.schema import BaseDatabaseSchemaEditor
from django.db.migrations.operations.base import Operation
from django.db.migrations.state import ProjectState

from ..conf import table

ON_DELETE_ACTIONS = ("CASCADE", "SET NULL", "RESTRICT")
#: What a ``RESTRICT`` rule becomes on SQLite from migration ``0003`` on (see above).
SQLITE_DEFERRED_RESTRICT = "NO ACTION DEFERRABLE INITIALLY DEFERRED"
Transform = Callable[[str], str]  # CREATE TABLE text -> new CREATE TABLE text


class DeleteRule(NamedTuple):
    """``table.column -> target.id ON DELETE on_delete``, table names without the prefix."""

    name: str
    table: str
    column: str
    target: str
    on_delete: str

    @property
    def table_name(self) -> str:
        return table(self.table)

    @property
    def target_table(self) -> str:
        return table(self.target)

    def validate(self) -> DeleteRule:
        if self.on_delete not in ON_DELETE_ACTIONS:
            raise ValueError(f"{self.name}: on_delete must be one of {ON_DELETE_ACTIONS}")
        return self


def group_by_table(rules: Iterable[DeleteRule]) -> dict[str, list[DeleteRule]]:
    """The rules per prefixed table name, in their given order."""
    groups: dict[str, list[DeleteRule]] = {}
    for rule in rules:
        groups.setdefault(rule.table_name, []).append(rule)
    return groups


def constraint_sql(
    schema_editor: BaseDatabaseSchemaEditor, rule: DeleteRule, on_delete: str | None = None
) -> str:
    """``CONSTRAINT <name> FOREIGN KEY (<column>) REFERENCES <target> (id) ON DELETE ...``
    (``on_delete``: what follows ``ON DELETE``, the rule's own action by default)."""
    quote = schema_editor.quote_name
    return (
        f"CONSTRAINT {quote(rule.name)} FOREIGN KEY ({quote(rule.column)}) "
        f"REFERENCES {quote(rule.target_table)} ({quote('id')}) "
        f"ON DELETE {on_delete or rule.on_delete}"
    )


def add_delete_rules(schema_editor: BaseDatabaseSchemaEditor, rules: Sequence[DeleteRule]) -> None:
    """Create the foreign keys of ``rules`` on the schema editor's database."""
    groups = group_by_table(rules)
    if schema_editor.connection.vendor == "sqlite":
        for table_name, table_rules in groups.items():
            clauses = {rule.name: constraint_sql(schema_editor, rule) for rule in table_rules}
            rebuild_sqlite_table(
                schema_editor, table_name, partial(_append_clauses, clauses=clauses)
            )
        return
    if schema_editor.connection.vendor == "mysql":
        _require_innodb(schema_editor, groups)
    _alter_each(schema_editor, groups, _add_sql, _drop_sql)


def remove_delete_rules(
    schema_editor: BaseDatabaseSchemaEditor, rules: Sequence[DeleteRule]
) -> None:
    """Drop the foreign keys of ``rules`` (the reverse of :func:`add_delete_rules`)."""
    groups = group_by_table(rules)
    if schema_editor.connection.vendor == "sqlite":
        for table_name, table_rules in groups.items():
            names = [rule.name for rule in table_rules]
            rebuild_sqlite_table(schema_editor, table_name, partial(_remove_clauses, names=names))
        return
    _alter_each(schema_editor, groups, _drop_sql, _add_sql)


class AddDeleteRules(Operation):
    """Migration operation creating named, database-enforced foreign keys (reversible).

    ``rules`` are :class:`DeleteRule` tuples; the migration lists them so its history never
    changes when this module does. ``vendors`` limits the operation to some databases (see
    the SQLite warning above). Django's model state is untouched: it keeps
    ``db_constraint=False``, so on PostgreSQL and MySQL Django never alters or drops these
    constraints itself.
    """

    reversible = True
    reduces_to_sql = True

    def __init__(
        self, rules: Iterable[Sequence[str]], vendors: Iterable[str] | None = None
    ) -> None:
        self.rules = tuple(DeleteRule(*rule).validate() for rule in rules)
        self.vendors = None if vendors is None else tuple(vendors)

    def _applies(self, app_label: str, schema_editor: BaseDatabaseSchemaEditor) -> bool:
        connection = schema_editor.connection
        if self.vendors is not None and connection.vendor not in self.vendors:
            return False
        return router.allow_migrate(connection.alias, app_label)

    def state_forwards(self, app_label: str, state: ProjectState) -> None:
        pass

    def database_forwards(
        self,
        app_label: str,
        schema_editor: BaseDatabaseSchemaEditor,
        from_state: ProjectState,
        to_state: ProjectState,
    ) -> None:
        if self._applies(app_label, schema_editor):
            add_delete_rules(schema_editor, self.rules)

    def database_backwards(
        self,
        app_label: str,
        schema_editor: BaseDatabaseSchemaEditor,
        from_state: ProjectState,
        to_state: ProjectState,
    ) -> None:
        if self._applies(app_label, schema_editor):
            remove_delete_rules(schema_editor, self.rules)

    def describe(self) -> str:
        return f"Add {len(self.rules)} database-enforced delete rules (named foreign keys)"

    @property
    def migration_name_fragment(self) -> str:
        return "delete_rules"


class DeferSqliteRestrictRules(Operation):
    """On SQLite only: make ``RESTRICT`` rules ``NO ACTION DEFERRABLE INITIALLY DEFERRED``.

    Each table is rebuilt (:func:`rebuild_sqlite_table`) with the named clauses rewritten in
    place; a table already in the wanted form is left alone. Reversing restores the exact
    clauses of :class:`AddDeleteRules`. A no-op on every other database, whose immediate
    ``RESTRICT`` does not get in the way of Django's ``flush``.
    """

    reversible = True
    reduces_to_sql = True

    def __init__(self, rules: Iterable[Sequence[str]]) -> None:
        self.rules = tuple(DeleteRule(*rule).validate() for rule in rules)
        wrong = [rule.name for rule in self.rules if rule.on_delete != "RESTRICT"]
        if wrong:
            raise ValueError(f"only RESTRICT rules can be deferred: {', '.join(wrong)}")

    def state_forwards(self, app_label: str, state: ProjectState) -> None:
        pass

    def _rewrite(
        self, app_label: str, schema_editor: BaseDatabaseSchemaEditor, deferred: bool
    ) -> None:
        connection = schema_editor.connection
        if connection.vendor != "sqlite" or not router.allow_migrate(connection.alias, app_label):
            return
        on_delete = SQLITE_DEFERRED_RESTRICT if deferred else None
        for table_name, table_rules in group_by_table(self.rules).items():
            clauses = {
                rule.name: constraint_sql(schema_editor, rule, on_delete) for rule in table_rules
            }
            rebuild_sqlite_table(
                schema_editor, table_name, partial(_replace_clauses, clauses=clauses)
            )

    def database_forwards(
        self,
        app_label: str,
        schema_editor: BaseDatabaseSchemaEditor,
        from_state: ProjectState,
        to_state: ProjectState,
    ) -> None:
        self._rewrite(app_label, schema_editor, deferred=True)

    def database_backwards(
        self,
        app_label: str,
        schema_editor: BaseDatabaseSchemaEditor,
        from_state: ProjectState,
        to_state: ProjectState,
    ) -> None:
        self._rewrite(app_label, schema_editor, deferred=False)

    def describe(self) -> str:
        return f"Check {len(self.rules)} RESTRICT delete rules at commit on SQLite"

    @property
    def migration_name_fragment(self) -> str:
        return "sqlite_deferred_restrict"


# PostgreSQL, MySQL and MariaDB ------------------------------------------------------------


def _add_sql(
    schema_editor: BaseDatabaseSchemaEditor, table_name: str, rules: list[DeleteRule]
) -> str:
    clauses = ", ".join(f"ADD {constraint_sql(schema_editor, rule)}" for rule in rules)
    return f"ALTER TABLE {schema_editor.quote_name(table_name)} {clauses}"


def _drop_sql(
    schema_editor: BaseDatabaseSchemaEditor, table_name: str, rules: list[DeleteRule]
) -> str:
    # MySQL < 8.0.19 knows only DROP FOREIGN KEY; MariaDB and MySQL both accept it.
    drop = "DROP FOREIGN KEY" if schema_editor.connection.vendor == "mysql" else "DROP CONSTRAINT"
    clauses = ", ".join(f"{drop} {schema_editor.quote_name(rule.name)}" for rule in rules)
    return f"ALTER TABLE {schema_editor.quote_name(table_name)} {clauses}"


AlterSql = Callable[[BaseDatabaseSchemaEditor, str, list[DeleteRule]], str]


def _alter_each(
    schema_editor: BaseDatabaseSchemaEditor,
    groups: dict[str, list[DeleteRule]],
    build: AlterSql,
    undo: AlterSql,
) -> None:
    """One ``ALTER TABLE`` per table; without transactional DDL, undo the done ones on error.

    MySQL commits every DDL statement, so a refused constraint (an orphan row, say) would
    otherwise leave half of the rules behind and make the migration impossible to re-run.
    """
    done: list[tuple[str, list[DeleteRule]]] = []
    try:
        for table_name, rules in groups.items():
            schema_editor.execute(build(schema_editor, table_name, rules))
            done.append((table_name, rules))
    except DatabaseError:
        if not schema_editor.connection.features.can_rollback_ddl:
            for table_name, rules in reversed(done):
                with suppress(DatabaseError):
                    schema_editor.execute(undo(schema_editor, table_name, rules))
        raise


def _require_innodb(
    schema_editor: BaseDatabaseSchemaEditor, groups: dict[str, list[DeleteRule]]
) -> None:
    """Refuse storage engines that accept and silently ignore foreign keys (MyISAM...)."""
    names = sorted({*groups, *(rule.target_table for rules in groups.values() for rule in rules)})
    placeholders = ", ".join(["%s"] * len(names))
    with schema_editor.connection.cursor() as cursor:
        cursor.execute(
            "SELECT TABLE_NAME, ENGINE FROM information_schema.TABLES "
            f"WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME IN ({placeholders})",
            names,
        )
        wrong = {name: engine for name, engine in cursor.fetchall() if engine != "InnoDB"}
    if wrong:
        raise NotSupportedError(
            "solid_objects needs InnoDB tables for its delete rules; found "
            + ", ".join(f"{name} ({engine})" for name, engine in sorted(wrong.items()))
        )


# SQLite -----------------------------------------------------------------------------------

_CREATE_TABLE = re.compile(r"^\s*CREATE\s+TABLE\s+(?:\"(?:[^\"]|\"\")+\"|`[^`]+`|\S+?)\s*\(", re.I)


def _append_clauses(create_sql: str, clauses: dict[str, str]) -> str:
    """Append the named clauses the table does not have yet (so a re-run changes nothing)."""
    missing = [sql for name, sql in clauses.items() if not _clause_pattern(name).search(create_sql)]
    if not missing:
        return create_sql
    body = create_sql.rstrip().rstrip(";").rstrip()
    end = body.rfind(")")  # table options (STRICT, WITHOUT ROWID) follow the last parenthesis
    if end < 0:
        raise ProgrammingError(f"unexpected CREATE TABLE statement: {create_sql!r}")
    return body[:end] + "".join(f", {clause}" for clause in missing) + body[end:]


def _clause_pattern(name: str) -> re.Pattern[str]:
    quoted = re.escape(name)
    return re.compile(
        rf",\s*CONSTRAINT\s+(?:\"{quoted}\"|`{quoted}`|{quoted})\s+FOREIGN\s+KEY\s*\([^)]*\)"
        r"\s*REFERENCES\s+[^(]+\([^)]*\)"
        r"(?:\s+ON\s+(?:DELETE|UPDATE)\s+(?:SET\s+NULL|SET\s+DEFAULT|CASCADE|RESTRICT|NO\s+ACTION))*"
        r"(?:\s+(?:NOT\s+)?DEFERRABLE(?:\s+INITIALLY\s+(?:DEFERRED|IMMEDIATE))?)?",
        re.I,
    )


def _replace_clauses(create_sql: str, clauses: dict[str, str]) -> str:
    """Rewrite each named clause in place (its position, hence the table's text, is kept)."""
    for name, clause in clauses.items():
        create_sql, count = _clause_pattern(name).subn(
            partial(_constant, f", {clause}"), create_sql, count=1
        )
        if not count:
            raise ProgrammingError(f"foreign key {name} not found in {create_sql!r}")
    return create_sql


def _constant(text: str, _match: re.Match[str]) -> str:
    """A replacement for ``re.sub`` taken as it is (no backslash escapes)."""
    return text


def _remove_clauses(create_sql: str, names: list[str]) -> str:
    for name in names:
        create_sql, count = _clause_pattern(name).subn("", create_sql, count=1)
        if not count:
            raise ProgrammingError(f"foreign key {name} not found in {create_sql!r}")
    return create_sql


def rebuild_sqlite_table(
    schema_editor: BaseDatabaseSchemaEditor, table_name: str, transform: Transform
) -> None:
    """Rebuild ``table_name`` with ``transform(create_sql)`` as its new definition.

    Must run inside Django's SQLite schema editor (``foreign_keys`` off, in a transaction).
    Nothing happens when ``transform`` returns the definition unchanged.
    """
    quote = schema_editor.quote_name
    with schema_editor.connection.cursor() as cursor:
        cursor.execute(
            "SELECT sql FROM sqlite_master WHERE type = 'table' AND name = %s", [table_name]
        )
        row = cursor.fetchone()
        if row is None:
            if schema_editor.collect_sql:  # sqlmigrate before 0001 exists: nothing to read
                schema_editor.collected_sql.append(
                    f"-- rebuild of {table_name} (its definition is read from sqlite_master "
                    "when the migration runs)"
                )
                return
            raise ProgrammingError(f"table {table_name} does not exist")
        cursor.execute(
            "SELECT sql FROM sqlite_master WHERE tbl_name = %s AND type IN ('index', 'trigger') "
            "AND sql IS NOT NULL ORDER BY type, name",
            [table_name],
        )
        dependents = [sql for (sql,) in cursor.fetchall()]
        cursor.execute(f"PRAGMA table_info({quote(table_name)})")
        columns = ", ".join(quote(column[1]) for column in cursor.fetchall())
        cursor.execute("SELECT 1 FROM sqlite_master WHERE name = 'sqlite_sequence'")
        sequence = None
        if cursor.fetchone() is not None:
            cursor.execute("SELECT seq FROM sqlite_sequence WHERE name = %s", [table_name])
            sequence = cursor.fetchone()

    definition = transform(row[0])
    if definition == row[0]:
        return
    new_name = f"new__{table_name}"
    create_sql = _CREATE_TABLE.sub(f"CREATE TABLE {quote(new_name)} (", definition, count=1)
    schema_editor.execute(create_sql, None)
    schema_editor.execute(
        f"INSERT INTO {quote(new_name)} ({columns}) SELECT {columns} FROM {quote(table_name)}"
    )
    schema_editor.execute(f"DROP TABLE {quote(table_name)}")
    schema_editor.execute(f"ALTER TABLE {quote(new_name)} RENAME TO {quote(table_name)}")
    for sql in dependents:
        schema_editor.execute(sql, None)
    if sequence is not None:
        schema_editor.execute("DELETE FROM sqlite_sequence WHERE name = %s", [table_name])
        schema_editor.execute(
            "INSERT INTO sqlite_sequence (name, seq) VALUES (%s, %s)", [table_name, sequence[0]]
        )
    if not schema_editor.collect_sql:
        _check_foreign_keys(schema_editor, table_name)


def _check_foreign_keys(schema_editor: BaseDatabaseSchemaEditor, table_name: str) -> None:
    with schema_editor.connection.cursor() as cursor:
        cursor.execute(f"PRAGMA foreign_key_check({schema_editor.quote_name(table_name)})")
        violation = cursor.fetchone()
    if violation is not None:
        _, rowid, parent, _ = violation
        raise IntegrityError(
            f"{table_name} row {rowid} references a missing {parent} row; "
            "delete or repair orphan rows before adding the delete rules"
        )
