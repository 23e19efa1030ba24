"""Scratch databases for tests that run ``manage.py migrate`` in a subprocess.

A fresh SQLite file, or on PostgreSQL/MariaDB a database named after the test database
(``<test db>_<purpose>_<random>``) created and dropped around the test, so engineers sharing
a server never collide. ``tests/settings.py`` points a subprocess at it through
``SOLID_TEST_DATABASE_NAME`` and reads ``SOLID_TEST_SETTINGS_JSON`` into ``SOLID_OBJECTS``.
"""

from __future__ import annotations

import copy
import json
import secrets
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from django.db import connection
from django.db.utils import load_backend

from tests.support import processes


@contextmanager
def scratch_database(purpose: str, tmp_path: Path) -> Iterator[str]:
    """The NAME of an empty database that exists for the duration of the block."""
    if connection.vendor == "sqlite":
        yield str(tmp_path / f"{purpose}.sqlite3")
        return
    name = f"{connection.settings_dict['NAME']}_{purpose}_{secrets.token_hex(3)}"
    quoted = connection.ops.quote_name(name)
    options = " CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci"
    with connection._nodb_cursor() as cursor:
        cursor.execute(f"CREATE DATABASE {quoted}{options if connection.vendor == 'mysql' else ''}")
    try:
        yield name
    finally:
        with connection._nodb_cursor() as cursor:
            cursor.execute(f"DROP DATABASE IF EXISTS {quoted}")


@contextmanager
def connect(database: str) -> Iterator[Any]:
    """A Django connection to the scratch database (closed on exit)."""
    settings_dict = copy.deepcopy(connection.settings_dict)
    settings_dict["NAME"] = database
    wrapper = load_backend(settings_dict["ENGINE"]).DatabaseWrapper(settings_dict, "scratch")
    try:
        yield wrapper
    finally:
        wrapper.close()


def manage(
    database: str, *args: str, solid_objects: dict[str, Any] | None = None, ok: bool = True
) -> subprocess.CompletedProcess[str]:
    """Run ``tests/manage.py <args>`` against the scratch database (``solid_objects``: its
    ``SOLID_OBJECTS`` overrides)."""
    result = processes.run(database, *args, settings=solid_objects)
    if ok and result.returncode != 0:
        pytest.fail(f"manage.py {' '.join(args)} failed:\n{result.stdout}\n{result.stderr}")
    return result


def shell(database: str, code: str, **kwargs: Any) -> Any:
    """Run ``code`` in ``manage.py shell``; it prints one JSON document, returned decoded."""
    output = manage(database, "shell", "-c", code, **kwargs).stdout
    return json.loads(output.strip().splitlines()[-1])
