"""What the database itself says about a table, read from its catalogue.

PostgreSQL: ``information_schema`` and ``pg_catalog``; MySQL/MariaDB: ``information_schema``;
SQLite: ``sqlite_master`` and the ``table_info`` / ``index_list`` / ``index_info`` /
``foreign_key_list`` pragmas. Django's models and introspection are never consulted, so these
readings can disagree with the models and make a test fail.

Everything is normalised to the same small vocabulary (:class:`Column`, :class:`Index`,
:class:`ForeignKey`) so one table of expectations serves every database.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

FAMILIES = {
    "bigint": "bigint",
    "integer": "integer",
    "int": "integer",
    "character varying": "string",
    "varchar": "string",
    "text": "text",
    "longtext": "text",
    "jsonb": "json",
    "json": "json",
    "timestamp with time zone": "datetime",
    "datetime": "datetime",
    "numeric": "decimal",
    "decimal": "decimal",
}
PG_DELETE_RULES = {
    "a": "NO ACTION",
    "r": "RESTRICT",
    "c": "CASCADE",
    "n": "SET NULL",
    "d": "SET DEFAULT",
}


@dataclass(frozen=True)
class Column:
    family: str  # one of FAMILIES' values, or the raw type when unknown
    size: Any  # length, (precision, scale), datetime precision, or None when not reported
    null: bool
    default: str | None  # literal text without quotes or casts
    binary: bool  # compares byte for byte (collation C / *_bin / SQLite BINARY)
    auto: bool  # identity / auto_increment / AUTOINCREMENT


@dataclass(frozen=True)
class Index:
    name: str
    columns: tuple[str, ...]
    unique: bool
    partial: bool


@dataclass(frozen=True)
class ForeignKey:
    name: str
    column: str
    target: str
    target_column: str
    on_delete: str
    deferrable: bool
    initially_deferred: bool  # checked at commit (SQLite: ``DEFERRABLE INITIALLY DEFERRED``)


def normalize_default(raw: Any) -> str | None:
    if raw is None:
        return None
    value = str(raw).strip()
    value = re.sub(r"::[a-z ]+(\(\d+\))?$", "", value)  # PostgreSQL casts
    while value.startswith("(") and value.endswith(")"):
        value = value[1:-1]
    if value.upper() == "NULL":
        return None
    if len(value) >= 2 and value[0] == value[-1] == "'":
        value = value[1:-1]
    return value


class Catalogue:
    """Base: runs queries on a Django connection (any alias, even a scratch database)."""

    def __init__(self, connection: Any) -> None:
        self.connection = connection

    def rows(self, sql: str, params: Any = ()) -> list[tuple[Any, ...]]:
        with self.connection.cursor() as cursor:
            cursor.execute(sql, params)
            return list(cursor.fetchall())

    def tables(self) -> set[str]:
        raise NotImplementedError

    def columns(self, table: str) -> dict[str, Column]:
        raise NotImplementedError

    def primary_key(self, table: str) -> tuple[str, ...]:
        raise NotImplementedError

    def indexes(self, table: str) -> list[Index]:
        """Every index but the primary key's, unique constraints included."""
        raise NotImplementedError

    def checks(self, table: str) -> set[str]:
        """Names of the table's CHECK constraints (JSON validity checks excluded)."""
        raise NotImplementedError

    def foreign_keys(self, table: str) -> list[ForeignKey]:
        raise NotImplementedError


class PostgresCatalogue(Catalogue):
    def tables(self) -> set[str]:
        return {
            name
            for (name,) in self.rows(
                "SELECT table_name FROM information_schema.tables "
                "WHERE table_schema = current_schema() AND table_type = 'BASE TABLE'"
            )
        }

    def columns(self, table: str) -> dict[str, Column]:
        result = {}
        for row in self.rows(
            "SELECT column_name, data_type, character_maximum_length, numeric_precision, "
            "numeric_scale, datetime_precision, is_nullable, column_default, collation_name, "
            "is_identity FROM information_schema.columns "
            "WHERE table_schema = current_schema() AND table_name = %s",
            [table],
        ):
            name, data_type, length, precision, scale, dt_precision, null, default = row[:8]
            collation, identity = row[8:]
            family = FAMILIES.get(data_type, data_type)
            size = {"string": length, "decimal": (precision, scale), "datetime": dt_precision}
            result[name] = Column(
                family=family,
                size=size.get(family),
                null=null == "YES",
                default=normalize_default(default),
                binary=collation == "C",
                auto=identity == "YES",
            )
        return result

    def _indexes(self, table: str) -> list[tuple[Index, bool]]:
        rows = self.rows(
            "SELECT i.relname, ix.indisunique, ix.indisprimary, ix.indpred IS NOT NULL, "
            "  array(SELECT a.attname FROM unnest(ix.indkey::smallint[]) WITH ORDINALITY "
            "        AS k(attnum, ord) JOIN pg_attribute a "
            "        ON a.attrelid = ix.indrelid AND a.attnum = k.attnum ORDER BY k.ord) "
            "FROM pg_index ix JOIN pg_class i ON i.oid = ix.indexrelid "
            "JOIN pg_class t ON t.oid = ix.indrelid "
            "JOIN pg_namespace n ON n.oid = t.relnamespace "
            "WHERE t.relname = %s AND n.nspname = current_schema()",
            [table],
        )
        return [
            (Index(name, tuple(columns), unique, partial), primary)
            for name, unique, primary, partial, columns in rows
        ]

    def primary_key(self, table: str) -> tuple[str, ...]:
        return next(index.columns for index, primary in self._indexes(table) if primary)

    def indexes(self, table: str) -> list[Index]:
        return [index for index, primary in self._indexes(table) if not primary]

    def checks(self, table: str) -> set[str]:
        return {
            name
            for (name,) in self.rows(
                "SELECT c.conname FROM pg_constraint c JOIN pg_class t ON t.oid = c.conrelid "
                "JOIN pg_namespace n ON n.oid = t.relnamespace "
                "WHERE c.contype = 'c' AND t.relname = %s AND n.nspname = current_schema()",
                [table],
            )
        }

    def foreign_keys(self, table: str) -> list[ForeignKey]:
        rows = self.rows(
            "SELECT c.conname, a.attname, ft.relname, fa.attname, c.confdeltype, c.condeferrable, "
            "c.condeferred "
            "FROM pg_constraint c JOIN pg_class t ON t.oid = c.conrelid "
            "JOIN pg_namespace n ON n.oid = t.relnamespace "
            "JOIN pg_class ft ON ft.oid = c.confrelid "
            "JOIN pg_attribute a ON a.attrelid = c.conrelid AND a.attnum = c.conkey[1] "
            "JOIN pg_attribute fa ON fa.attrelid = c.confrelid AND fa.attnum = c.confkey[1] "
            "WHERE c.contype = 'f' AND t.relname = %s AND n.nspname = current_schema()",
            [table],
        )
        return [
            ForeignKey(
                name, column, target, target_column, PG_DELETE_RULES[rule], deferrable, deferred
            )
            for name, column, target, target_column, rule, deferrable, deferred in rows
        ]


class MysqlCatalogue(Catalogue):
    """MySQL 8 and MariaDB (whose JSON is LONGTEXT plus a ``json_valid`` check)."""

    def tables(self) -> set[str]:
        return {
            name
            for (name,) in self.rows(
                "SELECT TABLE_NAME FROM information_schema.TABLES "
                "WHERE TABLE_SCHEMA = DATABASE() AND TABLE_TYPE = 'BASE TABLE'"
            )
        }

    def engine(self, table: str) -> str:
        return self.rows(
            "SELECT ENGINE FROM information_schema.TABLES "
            "WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = %s",
            [table],
        )[0][0]

    def _all_checks(self, table: str) -> dict[str, str]:
        if self.connection.mysql_is_mariadb:
            sql = (
                "SELECT CONSTRAINT_NAME, CHECK_CLAUSE FROM information_schema.CHECK_CONSTRAINTS "
                "WHERE CONSTRAINT_SCHEMA = DATABASE() AND TABLE_NAME = %s"
            )
        else:
            sql = (
                "SELECT tc.CONSTRAINT_NAME, cc.CHECK_CLAUSE "
                "FROM information_schema.TABLE_CONSTRAINTS tc "
                "JOIN information_schema.CHECK_CONSTRAINTS cc "
                "ON cc.CONSTRAINT_SCHEMA = tc.CONSTRAINT_SCHEMA "
                "AND cc.CONSTRAINT_NAME = tc.CONSTRAINT_NAME "
                "WHERE tc.CONSTRAINT_SCHEMA = DATABASE() AND tc.TABLE_NAME = %s "
                "AND tc.CONSTRAINT_TYPE = 'CHECK'"
            )
        return dict(self.rows(sql, [table]))

    def _json_columns(self, table: str) -> set[str]:
        found = set()
        for name, clause in self._all_checks(table).items():
            match = re.fullmatch(r"json_valid\(`(\w+)`\)", clause.strip(), re.I)
            if match and match.group(1) == name:
                found.add(name)
        return found

    def columns(self, table: str) -> dict[str, Column]:
        json_columns = self._json_columns(table)
        result = {}
        for row in self.rows(
            "SELECT COLUMN_NAME, DATA_TYPE, CHARACTER_MAXIMUM_LENGTH, NUMERIC_PRECISION, "
            "NUMERIC_SCALE, DATETIME_PRECISION, IS_NULLABLE, COLUMN_DEFAULT, COLLATION_NAME, "
            "EXTRA FROM information_schema.COLUMNS "
            "WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = %s",
            [table],
        ):
            name, data_type, length, precision, scale, dt_precision, null, default = row[:8]
            collation, extra = row[8:]
            family = "json" if name in json_columns else FAMILIES.get(data_type, data_type)
            size = {"string": length, "decimal": (precision, scale), "datetime": dt_precision}
            result[name] = Column(
                family=family,
                size=size.get(family),
                null=null == "YES",
                default=normalize_default(default),
                binary=bool(collation) and collation.endswith("_bin"),
                auto="auto_increment" in extra,
            )
        return result

    def _indexes(self, table: str) -> dict[str, Index]:
        found: dict[str, Index] = {}
        for name, non_unique, column in self.rows(
            "SELECT INDEX_NAME, NON_UNIQUE, COLUMN_NAME FROM information_schema.STATISTICS "
            "WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = %s "
            "ORDER BY INDEX_NAME, SEQ_IN_INDEX",
            [table],
        ):
            previous = found.get(name)
            columns = (previous.columns if previous else ()) + (column,)
            found[name] = Index(name, columns, not non_unique, partial=False)
        return found

    def primary_key(self, table: str) -> tuple[str, ...]:
        return self._indexes(table)["PRIMARY"].columns

    def indexes(self, table: str) -> list[Index]:
        return [index for name, index in self._indexes(table).items() if name != "PRIMARY"]

    def checks(self, table: str) -> set[str]:
        return set(self._all_checks(table)) - self._json_columns(table)

    def foreign_keys(self, table: str) -> list[ForeignKey]:
        rows = self.rows(
            "SELECT rc.CONSTRAINT_NAME, k.COLUMN_NAME, k.REFERENCED_TABLE_NAME, "
            "k.REFERENCED_COLUMN_NAME, rc.DELETE_RULE "
            "FROM information_schema.REFERENTIAL_CONSTRAINTS rc "
            "JOIN information_schema.KEY_COLUMN_USAGE k "
            "ON k.CONSTRAINT_SCHEMA = rc.CONSTRAINT_SCHEMA "
            "AND k.CONSTRAINT_NAME = rc.CONSTRAINT_NAME AND k.TABLE_NAME = rc.TABLE_NAME "
            "WHERE rc.CONSTRAINT_SCHEMA = DATABASE() AND rc.TABLE_NAME = %s",
            [table],
        )
        return [ForeignKey(*row, deferrable=False, initially_deferred=False) for row in rows]


class SqliteCatalogue(Catalogue):
    """SQLite keeps constraint names only in the ``CREATE TABLE`` text: they are read there."""

    def sql(self, table: str) -> str:
        return self.rows(
            "SELECT sql FROM sqlite_master WHERE type = 'table' AND name = %s", [table]
        )[0][0]

    def tables(self) -> set[str]:
        return {
            name
            for (name,) in self.rows(
                "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%%'"
            )
        }

    def _table_info(self, table: str) -> list[tuple[Any, ...]]:
        return self.rows(f'PRAGMA table_info("{table}")')

    def columns(self, table: str) -> dict[str, Column]:
        sql = self.sql(table)
        json_columns = set(re.findall(r'JSON_VALID\("(\w+)"\)', sql))
        autoincrement = re.search(r"\bAUTOINCREMENT\b", sql, re.I) is not None
        result = {}
        for _, name, declared, not_null, default, pk in self._table_info(table):
            match = re.fullmatch(r"(\w+)(?:\((\d+)(?:,\s*(\d+))?\))?", declared.strip().lower())
            base, length, scale = match.groups() if match else (declared, None, None)
            family = "json" if name in json_columns else FAMILIES.get(base, base)
            if family == "integer" and pk:  # INTEGER PRIMARY KEY is the 64-bit rowid
                family = "bigint"
            size = None
            if family == "string" and length:
                size = int(length)
            elif family == "decimal" and length:
                size = (int(length), int(scale or 0))
            definition = re.search(rf'"{name}"\s+[^,]*', sql)
            collate = re.search(r"COLLATE\s+(\w+)", definition.group(0) if definition else "", re.I)
            result[name] = Column(
                family=family,
                size=size,
                null=not not_null and not pk,
                default=normalize_default(default),
                binary=collate is None or collate.group(1).upper() == "BINARY",
                auto=bool(pk) and autoincrement,
            )
        return result

    def primary_key(self, table: str) -> tuple[str, ...]:
        info = sorted((row[5], row[1]) for row in self._table_info(table) if row[5])
        return tuple(name for _, name in info)

    def _named_uniques(self, table: str) -> dict[tuple[str, ...], str]:
        found = {}
        for name, columns in re.findall(
            r'CONSTRAINT\s+"(\w+)"\s+UNIQUE\s*\(([^)]*)\)', self.sql(table)
        ):
            found[tuple(re.findall(r'"(\w+)"', columns))] = name
        return found

    def indexes(self, table: str) -> list[Index]:
        uniques = self._named_uniques(table)
        result = []
        for _, name, unique, origin, partial in self.rows(f'PRAGMA index_list("{table}")'):
            if origin == "pk":
                continue
            info = sorted(self.rows(f'PRAGMA index_info("{name}")'))
            columns = tuple(column for _, _, column in info)
            if origin == "u":  # sqlite_autoindex_<table>_N: named by its table constraint
                name = uniques.get(columns, name)
            result.append(Index(name, columns, bool(unique), bool(partial)))
        return result

    def checks(self, table: str) -> set[str]:
        return set(re.findall(r'CONSTRAINT\s+"(\w+)"\s+CHECK\b', self.sql(table)))

    def foreign_keys(self, table: str) -> list[ForeignKey]:
        sql = self.sql(table)
        names = dict(
            (column, name)
            for name, column in re.findall(
                r'CONSTRAINT\s+"(\w+)"\s+FOREIGN\s+KEY\s*\("(\w+)"\)', sql
            )
        )
        result = []
        for row in self.rows(f'PRAGMA foreign_key_list("{table}")'):
            _, _, target, column, target_column, _, on_delete, _ = row
            clause = re.search(rf'FOREIGN\s+KEY\s*\("{column}"\)[^,]*', sql)
            inline = re.search(rf'"{column}"[^,]*REFERENCES[^,]*', sql)
            text = (clause or inline).group(0) if (clause or inline) else ""
            deferrable = (
                re.search(r"\bDEFERRABLE\b", text, re.I) is not None
                and re.search(r"\bNOT\s+DEFERRABLE\b", text, re.I) is None
            )
            result.append(
                ForeignKey(
                    name=names.get(column, ""),
                    column=column,
                    target=target,
                    target_column=target_column,
                    on_delete=on_delete,
                    deferrable=deferrable,
                    # SQLite: DEFERRABLE alone, or INITIALLY IMMEDIATE, is still immediate.
                    initially_deferred=deferrable
                    and re.search(r"\bINITIALLY\s+DEFERRED\b", text, re.I) is not None,
                )
            )
        return result


def catalogue_for(connection: Any) -> Catalogue:
    vendors = {"postgresql": PostgresCatalogue, "mysql": MysqlCatalogue, "sqlite": SqliteCatalogue}
    return vendors[connection.vendor](connection)
