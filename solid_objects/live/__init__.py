"""Live pages: observables of committed actor state, rendered by ``{% observe %}`` and kept
current in the browser over a WebSocket (PRODUCT §A10; docs/live-pages.md).

- :mod:`.tokens`: signed, expiring, viewer-bound subscription tokens;
- :mod:`.policy`: the ``AUTHORIZE_SUBSCRIPTION`` question, asked at render and at subscribe;
- :mod:`.values`: an observable's committed value, read from a snapshot;
- :mod:`.embedded`: broadcast delivery inside the ASGI process (no external service).
"""

#: The path of the WebSocket route (:mod:`solid_objects.routing`), which the script opens.
WEBSOCKET_PATH = "ws/solid-objects/"
