"""A second, real database alias: another PostgreSQL/MariaDB database on the same server
(named after the test database), or another SQLite file. Added to ``settings.DATABASES``
(the dict the connection handler reads) and removed afterwards; :func:`empty` recreates it
between tests."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from django.conf import settings
from django.db import connections

ALIAS = "second"


def empty(alias: str = ALIAS) -> None:
    """Drop and recreate the second database (nothing of a previous test stays)."""
    connections[alias].close()
    config = settings.DATABASES[alias]
    default = connections["default"]
    if default.vendor == "sqlite":
        Path(config["NAME"]).unlink(missing_ok=True)
        return
    with default.cursor() as cursor:
        cursor.execute(f"DROP DATABASE IF EXISTS {config['NAME']}")
        cursor.execute(f"CREATE DATABASE {config['NAME']}")


@contextmanager
def second_database(tmp_path: Path) -> Iterator[str]:
    default = connections["default"]
    config = dict(default.settings_dict)
    if default.vendor == "sqlite":
        config["NAME"] = str(tmp_path / "second.sqlite3")
    else:
        config["NAME"] = f"{default.settings_dict['NAME']}_second"[:60]
    config["TEST"] = {**default.settings_dict["TEST"], "NAME": config["NAME"], "MIRROR": None}
    settings.DATABASES[ALIAS] = config
    empty(ALIAS)
    try:
        yield ALIAS
    finally:
        connections[ALIAS].close()
        if default.vendor != "sqlite":
            with default.cursor() as cursor:
                cursor.execute(f"DROP DATABASE IF EXISTS {config['NAME']}")
        del connections[ALIAS]
        del settings.DATABASES[ALIAS]
