"""ASGI entry point of the example shop: pages over HTTP, live values over WebSockets.

- ``/ws/solid-objects/`` is the live-pages socket (``solid_objects.routing``), behind the
  session/auth middleware (the subscription policy sees the visitor) and an Origin check;
- the static files (the client script) are served by Django's static handler, which is fine
  for a demo; a real site serves them from its web server or a CDN (whitenoise, collectstatic);
- ``EmbeddedBroadcasts`` delivers the broadcast outbox from this process while the channel
  layer is the in-memory one (no Redis needed). With ``channels_redis`` configured
  (``REDIS_URL``), it stands aside and the worker's broadcast role delivers across processes.
"""

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "example_project.settings")
django_asgi_app = get_asgi_application()  # sets Django up before the imports below

from channels.auth import AuthMiddlewareStack  # noqa: E402
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from channels.security.websocket import AllowedHostsOriginValidator  # noqa: E402
from django.contrib.staticfiles.handlers import ASGIStaticFilesHandler  # noqa: E402

from solid_objects.live.embedded import EmbeddedBroadcasts  # noqa: E402
from solid_objects.routing import websocket_urlpatterns  # noqa: E402

application = EmbeddedBroadcasts(
    ProtocolTypeRouter(
        {
            "http": ASGIStaticFilesHandler(django_asgi_app),
            "websocket": AllowedHostsOriginValidator(
                AuthMiddlewareStack(URLRouter(websocket_urlpatterns))
            ),
        }
    )
)
