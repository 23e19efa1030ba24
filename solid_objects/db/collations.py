"""The collation that compares strings byte for byte on each database."""

from __future__ import annotations

from typing import Any


def binary_collation(connection: Any) -> str | None:
    """The collation comparing strings byte for byte, trailing spaces included.

    MySQL's and MariaDB's ``utf8mb4_bin`` ignore trailing spaces (PAD SPACE): there ``"a"``
    and ``"a "`` would be one actor and two everywhere else. Their NO PAD twins are exact.
    """
    if connection.vendor == "postgresql":
        return "C"
    if connection.vendor == "mysql":
        if connection.mysql_is_mariadb:
            return "utf8mb4_nopad_bin"
        return "utf8mb4_0900_bin" if connection.mysql_version >= (8, 0, 17) else "utf8mb4_bin"
    return None  # SQLite compares with BINARY unless told otherwise
