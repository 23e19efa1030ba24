"""Field helpers shared by the models."""

from __future__ import annotations

from typing import Any

from django.db import models

from ..limits import IDENTIFIER_LENGTH, UUID_LENGTH

__all__ = ["IDENTIFIER_LENGTH", "UUID_LENGTH", "BinaryCharField", "foreign_key"]


class BinaryCharField(models.CharField):
    """A ``CharField`` compared byte for byte on every database.

    PostgreSQL gets the ``C`` collation and MySQL/MariaDB ``utf8mb4_bin``; SQLite already
    compares with ``BINARY``. Identities and keys use it so ``Cart`` and ``cart`` are two
    actors and a unique index never folds case or accents.
    """

    COLLATIONS = {"postgresql": "C", "mysql": "utf8mb4_bin"}

    def db_parameters(self, connection: Any) -> dict[str, Any]:
        params = super().db_parameters(connection)
        params["collation"] = self.COLLATIONS.get(connection.vendor)
        return params


def foreign_key(to: str, *, related_name: str, null: bool = False, **kwargs: Any) -> Any:
    """A relation whose delete rule lives in the database, not in Django's collector.

    Every foreign key of these tables is declared ``db_constraint=False`` and
    ``on_delete=DO_NOTHING`` in Django's state; migration ``0002`` creates the real named
    constraints with ``ON DELETE CASCADE / SET NULL / RESTRICT`` per vendor (see
    :mod:`solid_objects.db.delete_rules`). Django 5.2 and 6.x therefore end with the same
    schema, and a raw SQL ``DELETE`` cascades exactly like ``ref.destroy()``.
    """
    return models.ForeignKey(
        to,
        on_delete=models.DO_NOTHING,
        db_constraint=False,
        related_name=related_name,
        null=null,
        blank=null,
        **kwargs,
    )
