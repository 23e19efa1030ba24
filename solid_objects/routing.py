"""WebSocket routes of live pages: include them in your ASGI application.

::

    from channels.auth import AuthMiddlewareStack
    from channels.routing import ProtocolTypeRouter, URLRouter
    from solid_objects.routing import websocket_urlpatterns

    application = ProtocolTypeRouter({
        "http": django_asgi_app,
        "websocket": AuthMiddlewareStack(URLRouter(websocket_urlpatterns)),
    })
"""

from __future__ import annotations

from django.urls import path

from .consumers import ObservableConsumer
from .live import WEBSOCKET_PATH

websocket_urlpatterns = [
    # An ASGI application where Django routes views: Channels' URLRouter dispatches it, but
    # django-stubs types path() for views only.
    path(
        WEBSOCKET_PATH,
        ObservableConsumer.as_asgi(),  # type: ignore[arg-type]
        name="solid_objects_observe",
    ),
]
