from django.apps import AppConfig


class TilttekActivityConfig(AppConfig):
    name = "tilttek_activity"
    verbose_name = "Activity journal"
    default_auto_field = "django.db.models.BigAutoField"
