"""The tables as the database catalogue sees them after ``migrate`` (seed: the journal doc)."""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.core.management import call_command
from django.db import connection

from tilttek_activity import record_activity

from .factories import ActivityFactory

pytestmark = pytest.mark.django_db

ENTRY = "tilttek_activity_entry"
CHECKPOINT = "tilttek_activity_checkpoint"

# name -> (normalised type, length, nullable)
ENTRY_COLUMNS = {
    "position": ("bigint", None, False),
    "kind": ("varchar", 16, False),
    "idempotency_key": ("varchar", 255, False),
    "member": ("varchar", 320, False),
    "verb": ("varchar", 128, False),
    "object": ("varchar", 320, True),
    "quantity": ("integer", None, False),
    "context": ("json", None, False),
    "occurred_at": ("datetime", None, False),
    "recorded_at": ("datetime", None, False),
}
CHECKPOINT_COLUMNS = {
    "projection": ("varchar", 64, False),
    "position": ("bigint", None, False),
    "updated_at": ("datetime", None, False),
}
ENTRY_INDEXES = {
    "tilttek_activity_entry_key": (("idempotency_key", "kind"), True),
    # With the position: a feed reads a page backwards from the index (migration 0003).
    "tilttek_activity_entry_member": (("member", "position"), False),
    "tilttek_activity_entry_object": (("object", "position"), False),
    "tilttek_activity_entry_verb": (("verb", "occurred_at"), False),
}
TYPES = {
    "bigint": "bigint",
    "integer": "integer",
    "int": "integer",
    "character varying": "varchar",
    "varchar": "varchar",
    "jsonb": "json",
    "json": "json",
    "longtext": "json",  # MariaDB's JSON is LONGTEXT + CHECK (json_valid(...))
    "text": "json",  # SQLite's JSON is TEXT + CHECK (JSON_VALID(...))
    "timestamp with time zone": "datetime",
    "datetime": "datetime",
}


def catalogue(table: str) -> dict[str, Any]:
    return {
        "postgresql": postgresql_catalogue,
        "mysql": mysql_catalogue,
        "sqlite": sqlite_catalogue,
    }[connection.vendor](table)


def postgresql_catalogue(table: str) -> dict[str, Any]:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT column_name, data_type, character_maximum_length, is_nullable = 'YES', "
            "collation_name, is_identity = 'YES' "
            "FROM information_schema.columns "
            "WHERE table_schema = current_schema() AND table_name = %s",
            [table],
        )
        columns = {
            name: (TYPES[kind], length, nullable)
            for name, kind, length, nullable, _, _ in cursor.fetchall()
        }
        cursor.execute(
            "SELECT column_name, collation_name, is_identity = 'YES' "
            "FROM information_schema.columns "
            "WHERE table_schema = current_schema() AND table_name = %s",
            [table],
        )
        details = {name: (collation, identity) for name, collation, identity in cursor}
        cursor.execute(
            """
            SELECT i.relname, ix.indisunique, ix.indisprimary,
                   array_agg(a.attname::text ORDER BY k.ord)
            FROM pg_index ix
            JOIN pg_class t ON t.oid = ix.indrelid
            JOIN pg_class i ON i.oid = ix.indexrelid
            CROSS JOIN LATERAL unnest(ix.indkey) WITH ORDINALITY AS k(attnum, ord)
            JOIN pg_attribute a ON a.attrelid = t.oid AND a.attnum = k.attnum
            WHERE t.relname = %s
            GROUP BY i.relname, ix.indisunique, ix.indisprimary
            """,
            [table],
        )
        indexes = {}
        primary = ()
        for name, unique, is_primary, cols in cursor.fetchall():
            if is_primary:
                primary = tuple(cols)
            else:
                indexes[name] = (tuple(cols), unique)
        cursor.execute(
            "SELECT conname, pg_get_constraintdef(oid) FROM pg_constraint "
            "WHERE conrelid = %s::regclass AND contype = 'c'",
            [table],
        )
        checks = dict(cursor.fetchall())
    return {
        "columns": columns,
        "collations": {name: collation for name, (collation, _) in details.items()},
        "auto_increment": details["position"][1] if table == ENTRY else None,
        "primary": primary,
        "indexes": indexes,
        "checks": checks,
    }


def mysql_catalogue(table: str) -> dict[str, Any]:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT COLUMN_NAME, DATA_TYPE, CHARACTER_MAXIMUM_LENGTH, IS_NULLABLE = 'YES', "
            "COLLATION_NAME, EXTRA FROM information_schema.COLUMNS "
            "WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = %s",
            [table],
        )
        rows = cursor.fetchall()
        columns = {
            name: (TYPES[kind], length if TYPES[kind] == "varchar" else None, bool(nullable))
            for name, kind, length, nullable, _, _ in rows
        }
        collations = {name: collation for name, _, _, _, collation, _ in rows}
        extras = {name: extra for name, _, _, _, _, extra in rows}
        cursor.execute(
            "SELECT INDEX_NAME, NON_UNIQUE, COLUMN_NAME FROM information_schema.STATISTICS "
            "WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = %s "
            "ORDER BY INDEX_NAME, SEQ_IN_INDEX",
            [table],
        )
        grouped: dict[str, tuple[list[str], bool]] = {}
        for name, non_unique, column in cursor.fetchall():
            grouped.setdefault(name, ([], not non_unique))[0].append(column)
        cursor.execute(
            "SELECT cc.CONSTRAINT_NAME, cc.CHECK_CLAUSE "
            "FROM information_schema.CHECK_CONSTRAINTS cc "
            "JOIN information_schema.TABLE_CONSTRAINTS tc "
            "  ON tc.CONSTRAINT_SCHEMA = cc.CONSTRAINT_SCHEMA "
            " AND tc.CONSTRAINT_NAME = cc.CONSTRAINT_NAME "
            "WHERE tc.TABLE_SCHEMA = DATABASE() AND tc.TABLE_NAME = %s "
            "AND tc.CONSTRAINT_TYPE = 'CHECK'",
            [table],
        )
        checks = dict(cursor.fetchall())
        cursor.execute(
            "SELECT ENGINE FROM information_schema.TABLES "
            "WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = %s",
            [table],
        )
        engine = cursor.fetchone()[0]
    primary = tuple(grouped.pop("PRIMARY", ([], True))[0])
    return {
        "columns": columns,
        "collations": collations,
        "auto_increment": "auto_increment" in (extras.get("position") or "") and engine == "InnoDB"
        if table == ENTRY
        else None,
        "primary": primary,
        "indexes": {name: (tuple(cols), unique) for name, (cols, unique) in grouped.items()},
        "checks": checks,
        "engine": engine,
    }


def sqlite_catalogue(table: str) -> dict[str, Any]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT sql FROM sqlite_master WHERE type = 'table' AND name = %s", [table])
        sql = cursor.fetchone()[0]
        cursor.execute(f'PRAGMA table_info("{table}")')
        info = cursor.fetchall()
        columns = {}
        primary = []
        for _, name, declared, notnull, _, pk in info:
            base = declared.lower().split("(")[0].strip()
            length = re.search(r"\((\d+)\)", declared)
            kind = TYPES[base]
            if name in ("position",) and base == "integer":
                kind = "bigint"  # SQLite has one INTEGER type; the rowid alias is 64-bit
            columns[name] = (kind, int(length.group(1)) if length else None, not notnull)
            if pk:
                primary.append(name)
        cursor.execute(f'PRAGMA index_list("{table}")')
        indexes = {}
        for _, name, unique, _, _ in cursor.fetchall():
            cursor.execute(f'PRAGMA index_xinfo("{name}")')
            cols = [(col, collation) for _, _, col, _, collation, key in cursor.fetchall() if key]
            indexes[name] = (tuple(col for col, _ in cols), bool(unique), [c for _, c in cols])
    # A UniqueConstraint is declared inline on SQLite (CONSTRAINT "name" UNIQUE (...)) and
    # backed by an automatic index: map the name to it.
    uniques = {
        tuple(col.strip().strip('"') for col in cols.split(",")): name
        for name, cols in re.findall(r'CONSTRAINT "(\w+)" UNIQUE \(([^)]*)\)', sql)
    }
    named = {}
    for name, (cols, unique, _) in indexes.items():
        if not name.startswith("sqlite_autoindex_"):
            named[name] = (cols, unique)
        elif cols in uniques:
            named[uniques[cols]] = (cols, unique)
        else:
            assert cols == tuple(primary), (name, cols)  # the primary key of a text column
    checks = dict(re.findall(r'CONSTRAINT "(\w+)" CHECK \((.*?)\)(?:,|\)$)', sql))
    collations = {}
    for name, (_, _, index_collations) in indexes.items():
        for col, collation in zip(indexes[name][0], index_collations, strict=True):
            collations[col] = collation
    return {
        "columns": columns,
        "collations": collations,
        "auto_increment": "AUTOINCREMENT" in sql if table == ENTRY else None,
        "primary": tuple(primary),
        "indexes": named,
        "checks": checks,
        "sql": sql,
    }


def test_entry_table_matches_the_schema_document() -> None:
    found = catalogue(ENTRY)
    assert found["columns"] == ENTRY_COLUMNS
    assert found["primary"] == ("position",)
    assert found["auto_increment"], "position must come from the database's auto-increment"
    assert found["indexes"] == ENTRY_INDEXES
    kind_check = found["checks"]["tilttek_activity_entry_kind"]
    assert "recorded" in kind_check and "cancelled" in kind_check and "kind" in kind_check


def exact_collation() -> str:
    """The byte-for-byte, trailing-spaces-included collation of this database."""
    if connection.vendor == "mysql":
        return "utf8mb4_nopad_bin" if connection.mysql_is_mariadb else "utf8mb4_0900_bin"
    return {"postgresql": "C", "sqlite": "BINARY"}[connection.vendor]


def test_verb_and_identifiers_use_a_binary_no_pad_collation() -> None:
    collations = catalogue(ENTRY)["collations"]
    expected = exact_collation()
    assert collations["verb"] == expected
    assert collations["member"] == expected
    assert collations["object"] == expected
    assert collations["idempotency_key"] == expected
    if connection.vendor != "sqlite":  # (the primary key's collation is not in SQLite's SQL)
        assert catalogue(CHECKPOINT)["collations"]["projection"] == expected


@pytest.mark.django_db(transaction=True)
@pytest.mark.db_vendor("mysql")
def test_migration_0002_moves_mysql_identifiers_to_a_no_pad_collation() -> None:
    """A database migrated before 0002 has PAD SPACE ``utf8mb4_bin`` identifiers (trailing
    spaces ignored); 0002 moves it to the NO PAD twin and back."""
    call_command("migrate", "tilttek_activity", "0001", verbosity=0)
    try:
        assert set(identifier_collations().values()) == {"utf8mb4_bin"}
    finally:
        call_command("migrate", "tilttek_activity", verbosity=0)
    assert set(identifier_collations().values()) == {exact_collation()}
    assert catalogue(ENTRY)["columns"] == ENTRY_COLUMNS
    assert catalogue(ENTRY)["indexes"] == ENTRY_INDEXES
    assert catalogue(CHECKPOINT)["primary"] == ("projection",)


def identifier_collations() -> dict[str, str]:
    entry = catalogue(ENTRY)["collations"]
    names = ("idempotency_key", "member", "verb", "object")
    return {
        **{n: entry[n] for n in names},
        "projection": catalogue(CHECKPOINT)["collations"]["projection"],
    }


@pytest.mark.db_vendor("postgresql")
def test_postgresql_position_is_an_identity() -> None:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT is_identity, identity_generation FROM information_schema.columns "
            "WHERE table_name = %s AND column_name = 'position'",
            [ENTRY],
        )
        assert cursor.fetchone() == ("YES", "BY DEFAULT")


@pytest.mark.db_vendor("mysql")
def test_mysql_tables_are_innodb() -> None:
    assert catalogue(ENTRY)["engine"] == "InnoDB"
    assert catalogue(CHECKPOINT)["engine"] == "InnoDB"


def test_checkpoint_table_matches_the_schema_document() -> None:
    found = catalogue(CHECKPOINT)
    assert found["columns"] == CHECKPOINT_COLUMNS
    assert found["primary"] == ("projection",)


def test_positions_are_never_reused() -> None:
    first = record_activity(**ActivityFactory()).entry.position
    second = record_activity(**ActivityFactory()).entry.position
    with connection.cursor() as cursor:
        cursor.execute(f"DELETE FROM {ENTRY} WHERE position = %s", [second])
    third = record_activity(**ActivityFactory()).entry.position
    assert first < second < third


def test_migrations_are_in_sync_with_the_models() -> None:
    call_command("makemigrations", "tilttek_activity", "--check", "--dry-run", verbosity=0)
