"""A ``CharField`` compared byte for byte on every database, trailing spaces included."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, TypeVar

from django.db import models

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


def binary_collation(connection: Any) -> str | None:
    """The collation comparing strings byte for byte, trailing spaces included.

    PostgreSQL: ``C``. MySQL's and MariaDB's ``utf8mb4_bin`` is a PAD SPACE collation: it
    ignores trailing spaces, so ``"k"`` and ``"k "`` would be one idempotency key (and
    ``member="user:x"`` would also find ``"user:x "``) there and two everywhere else. Their NO
    PAD twins are exact: ``utf8mb4_nopad_bin`` (MariaDB 10.2+) and ``utf8mb4_0900_bin``
    (MySQL 8.0.17+; older MySQL has none and keeps ``utf8mb4_bin``). SQLite compares with
    ``BINARY`` already.
    """
    if connection.vendor == "postgresql":
        return "C"
    if connection.vendor == "mysql":
        if connection.mysql_is_mariadb:
            return "utf8mb4_nopad_bin"
        return "utf8mb4_0900_bin" if connection.mysql_version >= (8, 0, 17) else "utf8mb4_bin"
    return None


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
