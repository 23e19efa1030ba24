"""Settings for the test suite. The database comes from ``DATABASE_URL`` (django-environ)."""

from __future__ import annotations

import os
from pathlib import Path

import environ

BASE_DIR = Path(__file__).resolve().parent
env = environ.Env()

SECRET_KEY = "tests-not-secret"
DEBUG = os.environ.get("SOLID_TEST_DEBUG") == "1"  # a child of the suite (reloader tests)
USE_TZ = True
TIME_ZONE = "UTC"
ROOT_URLCONF = "tests.urls"
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
STATIC_URL = "/static/"
# The test actors declare observables and most tests need no Channels layer; the check that
# warns about that (W005) is tested on its own (tests/live/test_checks.py).
SILENCED_SYSTEM_CHECKS = ["solid_objects.W005"]

INSTALLED_APPS = [
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.admin",
    "solid_objects",
    "tilttek_activity",
    "tests.testapp",
]
MIDDLEWARE = [
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
]
TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ]
        },
    }
]

SQLITE_DIR = Path(os.environ.get("SOLID_TEST_SQLITE_DIR", BASE_DIR.parent / ".test-db"))
SQLITE_DIR.mkdir(parents=True, exist_ok=True)

DATABASES = {"default": env.db("DATABASE_URL", default=f"sqlite:///{SQLITE_DIR / 'main.sqlite3'}")}
_db = DATABASES["default"]
_vendor = _db["ENGINE"].rsplit(".", 1)[-1]
if _vendor == "sqlite3":
    # A file, not :memory:, so worker subprocesses share the test database; WAL and
    # IMMEDIATE transactions are what we document for concurrent SQLite use.
    _db["TEST"] = {"NAME": str(SQLITE_DIR / "test.sqlite3")}
    _db.setdefault("OPTIONS", {}).update(
        {
            "timeout": 30,
            "transaction_mode": "IMMEDIATE",
            "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
        }
    )
elif _vendor == "postgresql" and os.environ.get("SOLID_TEST_PG_SERVER_BINDING"):
    # The recommended production options (docs/install.md): server-side binding, and
    # prepared statements for the runtime's hot statements.
    _db.setdefault("OPTIONS", {}).update({"server_side_binding": True, "prepare_threshold": 2})
elif _vendor == "mysql":
    _db.setdefault("OPTIONS", {}).update({"charset": "utf8mb4"})
    _db["TEST"] = {"CHARSET": "utf8mb4", "COLLATION": "utf8mb4_unicode_ci"}

# Worker subprocesses started by the tests connect straight to the test database.
if os.environ.get("SOLID_TEST_DATABASE_NAME"):
    _db["NAME"] = os.environ["SOLID_TEST_DATABASE_NAME"]
    _db.pop("TEST", None)

# A second database of the same server (or a second SQLite file): the shard tests
# (tests/shards/) put actors on both with SOLID_OBJECTS["DATABASES"]. Unsharded tests never
# touch it.
SHARD_B = "shard_b"
_shard = {**_db, "TEST": dict(_db.get("TEST") or {}), "OPTIONS": dict(_db.get("OPTIONS") or {})}
if _vendor == "sqlite3":
    _shard["NAME"] = str(SQLITE_DIR / "shard_b.sqlite3")
    _shard["TEST"]["NAME"] = str(SQLITE_DIR / "test_shard_b.sqlite3")
else:
    _shard["NAME"] = f"{_db['NAME']}_shard_b"
if os.environ.get("SOLID_TEST_SHARD_B_NAME"):  # a worker subprocess: straight to the test db
    _shard["NAME"] = os.environ["SOLID_TEST_SHARD_B_NAME"]
    _shard.pop("TEST", None)
DATABASES[SHARD_B] = _shard

SOLID_OBJECTS = {
    "PROCESS_HEARTBEAT_INTERVAL": 1.0,
    "PROCESS_ALIVE_THRESHOLD": 5.0,
    "SHUTDOWN_TIMEOUT": 10.0,
}
if os.environ.get("SOLID_TEST_SETTINGS_JSON"):
    import json

    SOLID_OBJECTS.update(json.loads(os.environ["SOLID_TEST_SETTINGS_JSON"]))

TILTTEK_ACTIVITY: dict[str, object] = {}

# The django.tasks backend (Django 6.x; the django-tasks backport on Django 5.2).
TASKS = {
    "default": {
        "BACKEND": "solid_objects.tasks.SolidObjectsBackend",
        "QUEUES": ["default", "emails", "parallel"],
        "OPTIONS": {"ORDERED_QUEUES": ["ledger"]},
    }
}

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "loggers": {
        "solid_objects": {"handlers": ["console"], "level": os.environ.get("SOLID_LOG", "WARNING")},
        "tilttek_activity": {"handlers": ["console"], "level": "WARNING"},
    },
}
if os.environ.get("SOLID_TEST_PLAIN_LOGGING"):  # a project that configures no logging
    LOGGING = {"version": 1, "disable_existing_loggers": False}
if os.environ.get("SOLID_TEST_ROOT_LOGGING"):  # a project logging through the root logger only
    LOGGING = {
        "version": 1,
        "disable_existing_loggers": False,
        "handlers": {"console": {"class": "logging.StreamHandler"}},
        "root": {"handlers": ["console"], "level": os.environ.get("SOLID_LOG", "WARNING")},
    }
