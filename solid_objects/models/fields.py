"""Field helpers shared by the models."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, TypeVar

from django.db import models

from ..db.collations import binary_collation
from ..limits import IDENTIFIER_LENGTH, UUID_LENGTH

__all__ = ["IDENTIFIER_LENGTH", "UUID_LENGTH", "BinaryCharField", "foreign_key"]

# django-stubs makes fields generic in what they accept and return; Django's own fields take
# no subscript at run time, so there the subscript gives the plain class back.
_ST = TypeVar("_ST", contravariant=True)
_GT = TypeVar("_GT", covariant=True)

if TYPE_CHECKING:
    _CharField = models.CharField
else:

    class _Unsubscripted:
        def __getitem__(self, _: object) -> type[models.CharField]:
            return models.CharField

    _CharField = _Unsubscripted()


class BinaryCharField(_CharField[_ST, _GT]):
    """A ``CharField`` compared byte for byte on every database.

    PostgreSQL gets the ``C`` collation, MariaDB ``utf8mb4_nopad_bin`` and MySQL
    ``utf8mb4_0900_bin`` (see :func:`solid_objects.db.collations.binary_collation`); SQLite
    already compares with ``BINARY``. Identities and keys use it so ``Cart``, ``cart`` and
    ``cart `` are three actors and a unique index never folds case, accents or trailing
    spaces.
    """

    def db_parameters(self, connection: Any) -> dict[str, Any]:
        params = super().db_parameters(connection)
        params["collation"] = binary_collation(connection)
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
