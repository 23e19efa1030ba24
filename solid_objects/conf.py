"""The ``SOLID_OBJECTS`` settings dict: defaults, typed access and the table prefix.

Everything reads settings through :func:`get_settings`, which is cached and reset by Django's
``setting_changed`` signal so ``override_settings`` works in tests. Validation lives in
:mod:`solid_objects.checks` (system checks); this module only coerces what it can.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, fields
from datetime import timedelta
from functools import lru_cache
from typing import Any

from django.conf import settings as django_settings
from django.core.signals import setting_changed
from django.dispatch import receiver
from django.utils.module_loading import import_string

DEFAULT_TABLE_PREFIX = "solid_objects_"
WAKE_UP_CHOICES = ("auto", "in_process", "postgresql", "redis", "polling")


def backoff_ceiling(attempt: int) -> float:
    """``min(2 ** (attempt - 1), 60)`` seconds: the exponential ceiling of the default."""
    return float(min(2 ** max(attempt - 1, 0), 60))


def default_retry_delay(attempt: int) -> float:
    """Full jitter: a random delay between 0 and :func:`backoff_ceiling` seconds, so the
    retries of failures that happened together (an outage, a provider's hiccup) spread out
    instead of arriving together again."""
    return random.uniform(0.0, backoff_ceiling(attempt))


def deny_all_subscriptions(*args: Any, **kwargs: Any) -> bool:
    """Default ``AUTHORIZE_SUBSCRIPTION`` policy: nobody may subscribe."""
    return False


DEFAULTS: dict[str, Any] = {
    "TABLE_PREFIX": DEFAULT_TABLE_PREFIX,
    "DATABASE": "default",
    "DATABASES": None,
    "POLLING_INTERVAL": 0.1,
    "IDLE_POLLING_INTERVAL": 1.0,
    "SYNC_TIMEOUT": 5.0,
    "LEASE_DURATION": 30.0,
    "LEASE_RENEWAL_INTERVAL": 10.0,
    "IDLE_DEACTIVATION_TIMEOUT": 30.0,
    "MAX_MESSAGES_PER_ACTIVATION_PASS": 50,
    "MAX_ACTIVATION_DURATION": 5.0,
    "MAX_TURNS_PER_COMMIT": 16,
    "MAX_ACTORS_PER_COMMIT": 32,
    "MAX_COMMIT_DELAY": 0.02,
    "MAX_MAILBOX_LENGTH": 10_000,
    "MAX_ATTEMPTS": 5,
    "RETRY_DELAY": default_retry_delay,
    "MAX_PAYLOAD_BYTES": 1024 * 1024,
    "MAX_RESULT_BYTES": 1024 * 1024,
    "MAX_STATE_BYTES": 5 * 1024 * 1024,
    "WARN_STATE_BYTES": 64 * 1024,
    "PROCESS_HEARTBEAT_INTERVAL": 15.0,
    "PROCESS_ALIVE_THRESHOLD": 60.0,
    "SHUTDOWN_TIMEOUT": 15.0,
    "MESSAGE_RETENTION": timedelta(days=30),
    "PROCESS_RETENTION": timedelta(days=7),
    "PRUNE_BATCH_SIZE": 1000,
    "WAKE_UP": "auto",
    "REDIS_URL": None,
    "AUTHORIZE_SUBSCRIPTION": deny_all_subscriptions,
    "SCHEDULES": {},
}


@dataclass(frozen=True)
class SolidObjectsSettings:
    TABLE_PREFIX: str
    DATABASE: str
    #: The shard aliases (``None``: every actor lives on ``DATABASE``); see shards.py.
    DATABASES: tuple[str, ...] | None
    POLLING_INTERVAL: float
    IDLE_POLLING_INTERVAL: float
    SYNC_TIMEOUT: float
    LEASE_DURATION: float
    LEASE_RENEWAL_INTERVAL: float
    IDLE_DEACTIVATION_TIMEOUT: float
    MAX_MESSAGES_PER_ACTIVATION_PASS: int
    MAX_ACTIVATION_DURATION: float
    MAX_TURNS_PER_COMMIT: int
    MAX_ACTORS_PER_COMMIT: int
    MAX_COMMIT_DELAY: float
    MAX_MAILBOX_LENGTH: int
    MAX_ATTEMPTS: int
    RETRY_DELAY: Callable[[int], float]
    MAX_PAYLOAD_BYTES: int
    MAX_RESULT_BYTES: int
    MAX_STATE_BYTES: int
    WARN_STATE_BYTES: int
    PROCESS_HEARTBEAT_INTERVAL: float
    PROCESS_ALIVE_THRESHOLD: float
    SHUTDOWN_TIMEOUT: float
    MESSAGE_RETENTION: timedelta
    PROCESS_RETENTION: timedelta
    PRUNE_BATCH_SIZE: int
    WAKE_UP: str
    REDIS_URL: str | None
    AUTHORIZE_SUBSCRIPTION: Callable[..., bool]
    SCHEDULES: dict[str, Any]

    def retry_delay(self, attempt: int) -> float:
        return float(self.RETRY_DELAY(attempt))

    @property
    def shards(self) -> tuple[str, ...]:
        """The aliases that hold actors: ``DATABASES``, or ``(DATABASE,)`` without it."""
        return self.DATABASES or (self.DATABASE,)


def user_settings() -> dict[str, Any]:
    """The raw ``SOLID_OBJECTS`` dict (``{}`` when absent or not a dict)."""
    value = getattr(django_settings, "SOLID_OBJECTS", None) or {}
    return value if isinstance(value, dict) else {}


def _as_seconds(value: Any) -> Any:
    return value.total_seconds() if isinstance(value, timedelta) else value


def _as_timedelta(value: Any) -> Any:
    if isinstance(value, int | float) and not isinstance(value, bool):
        return timedelta(seconds=value)
    return value


def _as_aliases(value: Any) -> Any:
    """A list of alias names as a tuple; anything else (reported by check E015) as ``None``."""
    if isinstance(value, list | tuple) and value and all(isinstance(a, str) for a in value):
        return tuple(value)
    return None


def _resolve_callable(value: Any) -> Any:
    return import_string(value) if isinstance(value, str) else value


COERCE: dict[str, Callable[[Any], Any]] = {
    "DATABASES": _as_aliases,
    "MESSAGE_RETENTION": _as_timedelta,
    "PROCESS_RETENTION": _as_timedelta,
    "RETRY_DELAY": _resolve_callable,
    "AUTHORIZE_SUBSCRIPTION": _resolve_callable,
}
SECONDS = {
    "POLLING_INTERVAL",
    "IDLE_POLLING_INTERVAL",
    "SYNC_TIMEOUT",
    "LEASE_DURATION",
    "LEASE_RENEWAL_INTERVAL",
    "IDLE_DEACTIVATION_TIMEOUT",
    "MAX_ACTIVATION_DURATION",
    "MAX_COMMIT_DELAY",
    "PROCESS_HEARTBEAT_INTERVAL",
    "PROCESS_ALIVE_THRESHOLD",
    "SHUTDOWN_TIMEOUT",
}


@lru_cache(maxsize=1)
def get_settings() -> SolidObjectsSettings:
    """The effective settings, defaults merged with ``settings.SOLID_OBJECTS``.

    Values are coerced leniently (timedeltas to seconds, dotted paths to callables); wrong
    types are reported by the system checks, which run before any worker starts.
    """
    raw = user_settings()
    merged = {**DEFAULTS, **raw}
    shards = merged.get("DATABASES")
    if "DATABASE" not in raw and isinstance(shards, list | tuple) and shards:
        merged["DATABASE"] = shards[0]  # the home alias of a sharded project: its first shard
    values: dict[str, Any] = {}
    for field in fields(SolidObjectsSettings):
        value = merged[field.name]
        if field.name in SECONDS:
            value = _as_seconds(value)
        coerce = COERCE.get(field.name)
        if coerce is not None:
            value = coerce(value)
        values[field.name] = value
    return SolidObjectsSettings(**values)


@receiver(setting_changed)
def _reset_settings(*, setting: str, **kwargs: Any) -> None:
    if setting == "SOLID_OBJECTS":
        get_settings.cache_clear()


def table_prefix() -> str:
    """The table prefix, read from settings before any model class is built."""
    prefix = user_settings().get("TABLE_PREFIX", DEFAULT_TABLE_PREFIX)
    return prefix if isinstance(prefix, str) else DEFAULT_TABLE_PREFIX


def table(name: str) -> str:
    """The prefixed name of one of our tables, e.g. ``table("instances")``."""
    return f"{table_prefix()}{name}"
