"""tilttek_activity: an append-only activity journal with exactly-once projections.

The public API is re-exported lazily (PEP 562), so ``import tilttek_activity`` works before
Django's app registry is ready (``INSTALLED_APPS`` imports this module first).
"""

from __future__ import annotations

from importlib import import_module
from importlib.metadata import PackageNotFoundError
from importlib.metadata import version as _distribution_version
from typing import TYPE_CHECKING, Any

from .errors import (
    ActivityError,
    ActivityNotFound,
    IdempotencyConflict,
    InvalidActivity,
    UnexpectedValueError,
    UnknownProjection,
)

try:
    #: The installed distribution's version (``django-solid-objects``, from its metadata).
    __version__: str = _distribution_version("django-solid-objects")
except PackageNotFoundError:  # imported from a checkout that was never installed
    __version__ = "0+unknown"

if TYPE_CHECKING:
    from .aio import acancel_activity, aentries, arecord_activities, arecord_activity
    from .catchup import CatchUpResult, catch_up, follow, wait_until_projected
    from .journal import cancel_activity, record_activities, record_activity
    from .projections import Projection
    from .reading import entries
    from .rebuilding import rebuild
    from .references import reference
    from .signals import activity_cancelled, activity_recorded, hole_skipped
    from .values import ActivityEntry, Recorded

__all__ = [
    "ActivityEntry",
    "ActivityError",
    "ActivityNotFound",
    "CatchUpResult",
    "IdempotencyConflict",
    "InvalidActivity",
    "Projection",
    "Recorded",
    "UnexpectedValueError",
    "UnknownProjection",
    "acancel_activity",
    "activity_cancelled",
    "activity_recorded",
    "aentries",
    "arecord_activities",
    "arecord_activity",
    "cancel_activity",
    "catch_up",
    "entries",
    "follow",
    "hole_skipped",
    "rebuild",
    "record_activities",
    "record_activity",
    "reference",
    "wait_until_projected",
]

_LAZY = {
    "acancel_activity": "aio",
    "aentries": "aio",
    "arecord_activities": "aio",
    "arecord_activity": "aio",
    "ActivityEntry": "values",
    "Recorded": "values",
    "CatchUpResult": "catchup",
    "catch_up": "catchup",
    "follow": "catchup",
    "wait_until_projected": "catchup",
    "cancel_activity": "journal",
    "record_activities": "journal",
    "record_activity": "journal",
    "Projection": "projections",
    "entries": "reading",
    "rebuild": "rebuilding",
    "reference": "references",
    "activity_cancelled": "signals",
    "activity_recorded": "signals",
    "hole_skipped": "signals",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
