"""Settings the mypy plugin of django-stubs loads (``make typecheck``).

They install the two apps and the contrib apps their models point at, on an in-memory SQLite
database: type checking never connects to a database and needs no ``DATABASE_URL``.
"""

from __future__ import annotations

SECRET_KEY = "typing-not-secret"
USE_TZ = True
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
INSTALLED_APPS = [
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.admin",
    "solid_objects",
    "tilttek_activity",
]
DATABASES = {"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": ":memory:"}}
