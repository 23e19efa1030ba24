from __future__ import annotations

from django.apps import AppConfig


class TilttekActivityConfig(AppConfig):
    name = "tilttek_activity"
    verbose_name = "Activity journal"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from . import checks  # noqa: F401  (registers the system checks)
        from .projections import autodiscover

        autodiscover()
