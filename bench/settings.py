"""Settings for ``python -m bench``: the database comes from ``DATABASE_URL``.

The benchmark uses the named database itself (not a test copy): it migrates it and empties
our tables between measurements. Default: ``bench/.bench.sqlite3``.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import environ

BASE_DIR = Path(__file__).resolve().parent
env = environ.Env()

SECRET_KEY = "bench-not-secret"
DEBUG = False
USE_TZ = True
TIME_ZONE = "UTC"
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
INSTALLED_APPS = [
    "django.contrib.contenttypes",
    "django.contrib.auth",
    "solid_objects",
    "tilttek_activity",
    "bench",
]
DATABASES = {"default": env.db("DATABASE_URL", default=f"sqlite:///{BASE_DIR / '.bench.sqlite3'}")}
_db = DATABASES["default"]
if _db["ENGINE"].endswith("sqlite3"):
    _db.setdefault("OPTIONS", {}).update(
        {
            "timeout": 30,
            "transaction_mode": "IMMEDIATE",
            # BENCH_SQLITE_SYNCHRONOUS=FULL: an fsync per commit (the equal-durability runs).
            "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous="
            + os.environ.get("BENCH_SQLITE_SYNCHRONOUS", "NORMAL")
            + ";",
        }
    )
elif _db["ENGINE"].endswith("postgresql") and not os.environ.get("BENCH_CLIENT_BINDING"):
    # As recommended in docs/install.md: server-side binding and prepared statements (the
    # runtime's statements are long CTEs; planning them every time costs ~40% of a turn).
    _db.setdefault("OPTIONS", {}).update({"server_side_binding": True, "prepare_threshold": 2})
elif _db["ENGINE"].endswith("mysql"):
    _db.setdefault("OPTIONS", {}).update({"charset": "utf8mb4"})

# A second database of the same server (or a second SQLite file) for ``--only shards``
# (bench/shards.py); the other measures never touch it.
_second = {**_db, "OPTIONS": dict(_db.get("OPTIONS") or {})}
if _db["ENGINE"].endswith("sqlite3"):
    _second["NAME"] = str(BASE_DIR / ".bench_b.sqlite3")
else:
    _second["NAME"] = f"{_db['NAME']}_b"
DATABASES["bench_b"] = _second
DATABASE_ROUTERS = ["solid_objects.routers.SolidObjectsRouter"]

SOLID_OBJECTS = {"PROCESS_HEARTBEAT_INTERVAL": 2.0, "PROCESS_ALIVE_THRESHOLD": 10.0}
SOLID_OBJECTS.update(json.loads(os.environ.get("BENCH_SOLID_OBJECTS", "{}")))
TILTTEK_ACTIVITY: dict[str, object] = {}
TASKS = {
    "default": {
        "BACKEND": "solid_objects.tasks.SolidObjectsBackend",
        "OPTIONS": {"ORDERED_QUEUES": ["bench-ordered"]},
    }
}
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "loggers": {
        "solid_objects": {
            "handlers": ["console"],
            "level": os.environ.get("BENCH_LOG_LEVEL", "ERROR"),
        }
    },
}
