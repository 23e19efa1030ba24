"""The ``TILTTEK_ACTIVITY`` settings dict: defaults, validation and typed access.

:func:`get_settings` is cached and reset by Django's ``setting_changed`` signal, so
``override_settings`` works in tests. :func:`problems` is the single source of truth for
validation: the system checks (:mod:`tilttek_activity.checks`) report its findings at start-up
and :func:`get_settings` raises ``ImproperlyConfigured`` with the same message when the checks
were skipped.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from functools import lru_cache
from typing import Any

from django.conf import settings as django_settings
from django.core.exceptions import ImproperlyConfigured
from django.core.signals import setting_changed
from django.dispatch import receiver

from .errors import InvalidActivity
from .text import shown

SETTING = "TILTTEK_ACTIVITY"
MAX_BATCH_SIZE = 10_000

DEFAULTS: dict[str, Any] = {
    # Database alias holding the journal, the checkpoints and (usually) the projections.
    "DATABASE": "default",
    # How far in the future ``occurred_at`` may be (clock skew); None disables the bound.
    "MAX_FUTURE": timedelta(minutes=5),
    # Entries per catch-up transaction (``catch_up(batch_size=None)``).
    "BATCH_SIZE": 500,
    # Rows per multi-row INSERT in ``record_activities``.
    "BULK_BATCH_SIZE": 500,
    # Where a database offers no evidence about running transactions (MySQL/MariaDB without
    # the PROCESS privilege, other backends), a hole is passed once it has been missing for
    # this long.
    "GAP_SETTLE_SECONDS": 5.0,
    # A hole still open after this long is logged as a warning (a long transaction stalls
    # every projection behind it).
    "GAP_WARN_SECONDS": 60.0,
    # Idle sleep of ``activity_catch_up --follow`` and ``wait_until_projected``'s poll ceiling.
    "POLL_INTERVAL": 0.5,
}


@dataclass(frozen=True, slots=True)
class ActivitySettings:
    DATABASE: str
    MAX_FUTURE: timedelta | None
    BATCH_SIZE: int
    BULK_BATCH_SIZE: int
    GAP_SETTLE_SECONDS: float
    GAP_WARN_SECONDS: float
    POLL_INTERVAL: float


def setting_name(key: str) -> str:
    """``TILTTEK_ACTIVITY["KEY"]``, the way every message names a setting."""
    return f'{SETTING}["{key}"]'


def user_settings() -> Any:
    return getattr(django_settings, SETTING, None)


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _positive_int(value: Any, maximum: int) -> str | None:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 < value <= maximum:
        return f"must be an integer between 1 and {maximum}"
    return None


def _seconds(value: Any, *, positive: bool) -> str | None:
    if not _is_number(value) or value < 0 or (positive and value == 0) or value != value:
        return (
            "must be a positive number of seconds"
            if positive
            else ("must be a number of seconds, zero or more")
        )
    return None


def problems(raw: Any = None) -> list[tuple[str | None, str]]:
    """Every problem with the settings as ``(key, message)``; key None = the dict itself."""
    raw = user_settings() if raw is None else raw
    if raw is None:
        return []
    if not isinstance(raw, dict):
        return [(None, f"settings.{SETTING} must be a dict")]
    found: list[tuple[str | None, str]] = []
    for key in raw:
        if key not in DEFAULTS:
            known = ", ".join(DEFAULTS)
            found.append((key, f"{setting_name(str(key))} is not a known setting ({known})"))
    merged = {**DEFAULTS, **raw}
    database = merged["DATABASE"]
    if not isinstance(database, str) or database not in django_settings.DATABASES:
        found.append(("DATABASE", f"{setting_name('DATABASE')} must name an entry of DATABASES"))
    max_future = merged["MAX_FUTURE"]
    if max_future is not None and not (
        (isinstance(max_future, timedelta) and max_future >= timedelta(0))
        or (_is_number(max_future) and max_future >= 0)
    ):
        found.append(
            (
                "MAX_FUTURE",
                f"{setting_name('MAX_FUTURE')} must be a timedelta (or seconds), zero or more, "
                "or None",
            )
        )
    for key in ("BATCH_SIZE", "BULK_BATCH_SIZE"):
        message = _positive_int(merged[key], MAX_BATCH_SIZE)
        if message:
            found.append((key, f"{setting_name(key)} {message}"))
    for key, positive in (
        ("GAP_SETTLE_SECONDS", False),
        ("GAP_WARN_SECONDS", True),
        ("POLL_INTERVAL", True),
    ):
        message = _seconds(merged[key], positive=positive)
        if message:
            found.append((key, f"{setting_name(key)} {message}"))
    return found


@lru_cache(maxsize=1)
def get_settings() -> ActivitySettings:
    """The effective settings: defaults merged with ``settings.TILTTEK_ACTIVITY``."""
    found = problems()
    if found:
        raise ImproperlyConfigured(found[0][1])
    merged = {**DEFAULTS, **(user_settings() or {})}
    max_future = merged["MAX_FUTURE"]
    if _is_number(max_future):
        max_future = timedelta(seconds=max_future)
    return ActivitySettings(
        DATABASE=merged["DATABASE"],
        MAX_FUTURE=max_future,
        BATCH_SIZE=merged["BATCH_SIZE"],
        BULK_BATCH_SIZE=merged["BULK_BATCH_SIZE"],
        GAP_SETTLE_SECONDS=float(merged["GAP_SETTLE_SECONDS"]),
        GAP_WARN_SECONDS=float(merged["GAP_WARN_SECONDS"]),
        POLL_INTERVAL=float(merged["POLL_INTERVAL"]),
    )


def database_alias(using: str | None = None) -> str:
    """``using`` when given, else ``TILTTEK_ACTIVITY["DATABASE"]``.

    An alias that is not a key of ``DATABASES`` raises ``InvalidActivity("using")`` (not
    Django's ``ConnectionDoesNotExist``), like every other bad argument.
    """
    if using is None:
        return get_settings().DATABASE
    if not isinstance(using, str) or using not in django_settings.DATABASES:
        raise InvalidActivity("using", f"{shown(using)} is not an alias of settings.DATABASES")
    return using


@receiver(setting_changed)
def _reset_settings(*, setting: str, **kwargs: Any) -> None:
    if setting in (SETTING, "DATABASES"):
        get_settings.cache_clear()
