"""ASGI entry point of the example shop (HTTP; live pages add a websocket route here)."""

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "example_project.settings")

application = get_asgi_application()
