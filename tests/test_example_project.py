"""The example shop works end to end on the database under test (in a subprocess with the
example project's own settings): the cart actor, its payment effect and callbacks, the
abandoned-cart reminder, the activity views and the counters projection."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.db import connection

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.django_db(transaction=True)


def _database_url(tmp_path: Path) -> str:
    settings = connection.settings_dict
    vendor = connection.vendor
    if vendor == "sqlite":
        return f"sqlite:///{tmp_path / 'shop.sqlite3'}"
    user = settings["USER"] or ""
    host = settings["HOST"] or "127.0.0.1"
    port = settings["PORT"] or ("5432" if vendor == "postgresql" else "3306")
    scheme = "postgres" if vendor == "postgresql" else "mysql"
    return f"{scheme}://{user}@{host}:{port}/{settings['NAME']}"


def test_the_example_shop_walkthrough(tmp_path: Path) -> None:
    env = {
        **os.environ,
        "DATABASE_URL": _database_url(tmp_path),
        "PYTHONPATH": str(ROOT),
        "DJANGO_SETTINGS_MODULE": "example_project.settings",
        # As a copy of the project would run: no DEBUG, a real secret (plain HTTP here).
        "DJANGO_DEBUG": "0",
        "DJANGO_SECRET_KEY": "walkthrough-secret",
        "DJANGO_HTTPS": "0",
    }
    manage = [sys.executable, str(ROOT / "example_project" / "manage.py")]
    migrate = subprocess.run(
        [*manage, "migrate", "-v0"], env=env, capture_output=True, text=True, timeout=300
    )
    assert migrate.returncode == 0, migrate.stderr
    run = subprocess.run(
        [*manage, "shell", "-c", "from shop.walkthrough import main; main()"],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    assert run.stdout.count("ok: ") == 16, run.stdout
