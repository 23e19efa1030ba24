"""A ``CharField`` compared byte for byte on every database."""

from __future__ import annotations

from typing import Any

from django.db import models


class BinaryCharField(models.CharField):
    """``varchar`` with a binary collation: ``C`` on PostgreSQL, ``utf8mb4_bin`` on
    MySQL/MariaDB; SQLite already compares with ``BINARY``.

    Verbs, references and keys use it, so ``Order.`` and ``order.`` are two verbs, a range
    ``verb >= 'a' AND verb < 'b'`` means code-point order everywhere and a unique index never
    folds case or accents. (tilttek_activity keeps its own copy so it installs without
    ``solid_objects``.)
    """

    COLLATIONS = {"postgresql": "C", "mysql": "utf8mb4_bin"}

    def db_parameters(self, connection: Any) -> dict[str, Any]:
        params = super().db_parameters(connection)
        params["collation"] = self.COLLATIONS.get(connection.vendor)
        return params
