from __future__ import annotations

from django.apps import AppConfig


class SolidObjectsConfig(AppConfig):
    name = "solid_objects"
    verbose_name = "Solid objects"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from . import checks  # noqa: F401  (registers the system checks)
        from .actor import autodiscover

        autodiscover()
