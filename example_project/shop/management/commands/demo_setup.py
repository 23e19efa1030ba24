"""``manage.py demo_setup``: make sure the demo admin user (admin / admin) exists."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError, CommandParser

USERNAME = "admin"
PASSWORD = "admin"


class Command(BaseCommand):
    help = (
        "Create the demo superuser admin / admin, or restore its password and rights. "
        "Safe to run again. Refuses when DEBUG is off unless --force is given."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--force", action="store_true", help="run even though DEBUG is off")

    def handle(self, *args: Any, force: bool = False, **options: Any) -> None:
        if not settings.DEBUG and not force:
            raise CommandError("DEBUG is off: this looks like a real site; use --force if not")
        user_model = get_user_model()
        user, created = user_model._default_manager.get_or_create(
            **{user_model.USERNAME_FIELD: USERNAME}, defaults={"email": "admin@example.com"}
        )
        ready = user.is_active and user.is_staff and user.is_superuser
        if created or not ready or not user.check_password(PASSWORD):
            user.is_active = user.is_staff = user.is_superuser = True
            user.set_password(PASSWORD)
            user.save()
            action = "created" if created else "reset"
        else:
            action = "already there"
        self.stdout.write(f"demo admin user {USERNAME} / {PASSWORD}: {action}")
