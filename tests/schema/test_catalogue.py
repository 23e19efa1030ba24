"""After ``migrate``, the database's own catalogue holds exactly the schema of SCHEMA.md.

One table of expectations (:mod:`tests.schema.expected`) is checked on every database and
Django version, so they all end with the same columns, indexes, checks and delete rules.
"""

from __future__ import annotations

from collections import Counter

import pytest
from django.db import connection

from solid_objects.conf import table

from .catalogue import Catalogue, MysqlCatalogue, catalogue_for
from .expected import SCHEMA, enforced_rule

pytestmark = pytest.mark.django_db
TABLES = sorted(SCHEMA)


@pytest.fixture
def catalogue() -> Catalogue:
    return catalogue_for(connection)


def test_the_ten_tables_exist_under_the_prefix(catalogue: Catalogue) -> None:
    ours = {name for name in catalogue.tables() if name.startswith(table(""))}
    assert ours == {table(name) for name in SCHEMA}


@pytest.mark.parametrize("name", TABLES)
def test_columns(catalogue: Catalogue, name: str) -> None:
    expected = SCHEMA[name].columns
    actual = catalogue.columns(table(name))
    assert sorted(actual) == sorted(expected)
    for column, want in expected.items():
        got = actual[column]
        where = f"{name}.{column}"
        assert got.family == want.family, where
        if got.size is not None:  # SQLite reports no datetime precision nor decimal size
            assert got.size == want.size, where
        assert got.null == want.null, where
        assert got.default == want.default, where
        assert got.auto == want.auto, where
        if want.binary:
            assert got.binary, f"{where} must compare byte for byte"


@pytest.mark.parametrize("name", TABLES)
def test_primary_key(catalogue: Catalogue, name: str) -> None:
    assert catalogue.primary_key(table(name)) == SCHEMA[name].primary_key


@pytest.mark.parametrize("name", TABLES)
def test_indexes(catalogue: Catalogue, name: str) -> None:
    spec = SCHEMA[name]
    indexes = catalogue.indexes(table(name))
    assert not [index.name for index in indexes if index.partial], "no partial indexes"

    named = {index.name: (index.columns, index.unique) for index in indexes}
    for index_name, want in spec.indexes.items():
        assert named.get(index_name) == want, index_name

    others = [index for index in indexes if index.name not in spec.indexes]
    implicit = spec.implicit + (spec.postgres_implicit if connection.vendor == "postgresql" else [])
    assert Counter(index.columns for index in others) == Counter(implicit)
    assert not [index.name for index in others if index.unique]


@pytest.mark.parametrize("name", TABLES)
def test_check_constraints(catalogue: Catalogue, name: str) -> None:
    assert catalogue.checks(table(name)) == SCHEMA[name].checks


@pytest.mark.parametrize("name", TABLES)
def test_foreign_keys_and_delete_rules(catalogue: Catalogue, name: str) -> None:
    """Checked at the statement, except RESTRICT on SQLite: at commit (``enforced_rule``)."""
    actual = {
        fk.name: (fk.column, fk.target, fk.target_column, fk.on_delete, fk.initially_deferred)
        for fk in catalogue.foreign_keys(table(name))
    }
    expected = {
        fk_name: (column, table(target), "id", *enforced_rule(rule, connection.vendor))
        for fk_name, (column, target, rule) in SCHEMA[name].foreign_keys.items()
    }
    assert actual == expected
    deferrable = {fk.name for fk in catalogue.foreign_keys(table(name)) if fk.deferrable}
    deferred = {fk_name for fk_name, found in actual.items() if found[-1]}
    assert deferrable == deferred, "a deferrable rule is initially deferred, never half-way"


@pytest.mark.parametrize("name", TABLES)
def test_every_foreign_key_column_leads_an_index(catalogue: Catalogue, name: str) -> None:
    """Cascades and SET NULL look children up by this column; InnoDB also requires it."""
    leading = {index.columns[0] for index in catalogue.indexes(table(name))}
    leading.add(catalogue.primary_key(table(name))[0])
    for column, _, _ in SCHEMA[name].foreign_keys.values():
        assert column in leading, f"{name}.{column}"


@pytest.mark.db_vendor("mysql")
@pytest.mark.parametrize("name", TABLES)
def test_mysql_tables_are_innodb(catalogue: MysqlCatalogue, name: str) -> None:
    assert catalogue.engine(table(name)) == "InnoDB"
