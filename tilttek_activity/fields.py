"""A ``CharField`` compared byte for byte on every database, trailing spaces included."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, TypeVar

from django.db import models

from .db.collations import binary_collation

__all__ = ["BinaryCharField", "binary_collation"]

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
    """``varchar`` with the collation of :func:`binary_collation`.

    Verbs, references and keys use it, so ``Order.`` and ``order.`` are two verbs, ``k`` and
    ``k `` two keys, a range ``verb >= 'a' AND verb < 'b'`` means code-point order everywhere
    and a unique index never folds case, accents or trailing spaces. (tilttek_activity keeps
    its own copy so it installs without ``solid_objects``.)
    """

    def db_parameters(self, connection: Any) -> dict[str, Any]:
        params = super().db_parameters(connection)
        params["collation"] = binary_collation(connection)
        return params
