"""The collation that compares strings byte for byte on each database (the journal's
verbs, references and keys)."""

from __future__ import annotations

from typing import Any


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
