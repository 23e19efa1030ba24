"""System checks: the ``TILTTEK_ACTIVITY`` settings and the registered projections."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core import checks

from . import conf


@checks.register(checks.Tags.compatibility)
def check_settings(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    """One error per invalid ``TILTTEK_ACTIVITY`` entry, each naming the setting."""
    errors: list[checks.CheckMessage] = [
        checks.Error(message, id="tilttek_activity.E001", obj=conf.setting_name(key or "*"))
        for key, message in conf.problems()
    ]
    if not settings.USE_TZ:
        errors.append(
            checks.Error(
                "tilttek_activity stores and returns aware UTC datetimes: set USE_TZ = True",
                id="tilttek_activity.E003",
            )
        )
    return errors


@checks.register()
def check_projections(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    """Projection names fit the checkpoint column; verb prefixes are valid verbs."""
    from .projections import registry

    return [
        checks.Error(message, id="tilttek_activity.E002", obj=cls)
        for cls, message in registry.problems()
    ]
