"""Settings for the example shop. Everything that differs per machine comes from the environment.

``DATABASE_URL`` (django-environ syntax) picks the database; by default it is the SQLite file
``example_project/db.sqlite3`` with the settings we recommend for SQLite (see docs/install.md).
"""

from __future__ import annotations

from pathlib import Path

import environ
from django.core.exceptions import ImproperlyConfigured

BASE_DIR = Path(__file__).resolve().parent.parent  # the example_project/ folder

env = environ.Env()

# Off unless asked for (``make demo`` asks: DJANGO_DEBUG=1). A copy of this project that
# forgets the variable runs without debug pages and refuses to start without a real secret.
DEBUG = env.bool("DJANGO_DEBUG", default=False)
if "DJANGO_SECRET_KEY" in env:
    SECRET_KEY = env.str("DJANGO_SECRET_KEY")
elif DEBUG:
    SECRET_KEY = "example-shop-debug-only-not-a-secret"  # only ever used with DEBUG on
else:
    raise ImproperlyConfigured("set DJANGO_SECRET_KEY (or DJANGO_DEBUG=1 for local development)")
ALLOWED_HOSTS = env.list("DJANGO_ALLOWED_HOSTS", default=["127.0.0.1", "localhost", "[::1]"])
# Behind HTTPS (the default without DEBUG): cookies only over TLS, HSTS, redirect to https.
HTTPS = env.bool("DJANGO_HTTPS", default=not DEBUG)
SESSION_COOKIE_SECURE = CSRF_COOKIE_SECURE = SECURE_SSL_REDIRECT = HTTPS
SECURE_HSTS_SECONDS = 3600 if HTTPS else 0
SESSION_COOKIE_HTTPONLY = True
CSRF_TRUSTED_ORIGINS = env.list("DJANGO_CSRF_TRUSTED_ORIGINS", default=[])

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "solid_objects",
    "tilttek_activity",
    "shop",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

ROOT_URLCONF = "example_project.urls"
WSGI_APPLICATION = "example_project.wsgi.application"
ASGI_APPLICATION = "example_project.asgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

DATABASES = {"default": env.db("DATABASE_URL", default=f"sqlite:///{BASE_DIR / 'db.sqlite3'}")}
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # The web server and the workers write concurrently: wait for the lock instead of failing,
    # take the write lock at BEGIN (no upgrade deadlocks), and let readers run beside a writer.
    DATABASES["default"].setdefault("OPTIONS", {}).update(
        {"timeout": 30, "transaction_mode": "IMMEDIATE", "init_command": "PRAGMA journal_mode=WAL;"}
    )
elif DATABASES["default"]["ENGINE"] == "django.db.backends.mysql":
    DATABASES["default"].setdefault("OPTIONS", {}).setdefault("charset", "utf8mb4")

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = BASE_DIR / "static"

LOGIN_URL = "admin:login"

# The two apps' settings (every key is optional; see docs/settings.md). A visitor may watch
# only their own cart live (shop/policies.py); the default policy would refuse everything.
SOLID_OBJECTS: dict[str, object] = {"AUTHORIZE_SUBSCRIPTION": "shop.policies.can_watch"}

# Observable changes (the cart's item count and status) go to Channels groups. Without
# REDIS_URL the in-memory layer keeps the demo free of services: the web process delivers the
# broadcasts itself (EmbeddedBroadcasts in asgi.py). With REDIS_URL, channels_redis carries
# them from the worker's broadcast role to every web process, on any host.
if env.str("REDIS_URL", default=""):
    CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "channels_redis.core.RedisChannelLayer",
            "CONFIG": {"hosts": [env.str("REDIS_URL")]},
        }
    }
else:
    CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}
TILTTEK_ACTIVITY: dict[str, object] = {}

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "loggers": {
        "solid_objects": {"handlers": ["console"], "level": env.str("SOLID_LOG", default="INFO")},
        "tilttek_activity": {"handlers": ["console"], "level": "INFO"},
    },
}
