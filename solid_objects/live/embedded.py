"""Broadcast delivery inside the ASGI process: live pages with no external service.

Channels' in-memory layer only reaches consumers of the process that holds it, so a separate
broadcast worker would hand every change to a layer nobody listens to. Wrapping the ASGI
application in :class:`EmbeddedBroadcasts` runs the broadcast role in the web process itself
(one thread, under its own supervisor: registered in the processes table, heartbeating,
cleaned up like any worker), and hands each ``group_send`` to the server's event loop, where
the consumers wait::

    application = EmbeddedBroadcasts(ProtocolTypeRouter({...}))

By default (``enabled=None``) it runs only when the default layer is process-local (the
in-memory layer): with ``channels_redis`` the broadcast role of ``run_actor_worker
--all-roles`` (or ``run_broadcast_worker``) delivers across processes and hosts instead;
``enabled=True`` runs it in the web process anyway. It serves **one** web process: with
several, each would deliver part of the rows to its own sockets only, so use a shared layer.
With shards (``SOLID_OBJECTS["DATABASES"]``) it delivers the rows of every shard, one
supervisor per shard.

The wrapper answers the ASGI ``lifespan`` protocol itself: the role starts at startup (or at
the first connection, for servers without lifespan) and stops at shutdown, finishing the
batch in flight and releasing its claims.
"""

from __future__ import annotations

import asyncio
import atexit
import logging
import threading
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from ..conf import get_settings
from ..outbox.broadcasts import BroadcastRole
from ..runtime.roles import Role, RoleHost
from ..runtime.shard_group import SupervisorGroup
from ..runtime.supervisor import Supervisor
from ..shards import databases
from .layers import default_layer, describe, is_process_local

logger = logging.getLogger("solid_objects")

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


class LoopBoundLayer:
    """Sends through ``layer`` on ``loop`` (the server's event loop) from any thread."""

    def __init__(self, layer: Any, loop: asyncio.AbstractEventLoop) -> None:
        self.layer = layer
        self.loop = loop

    async def group_send(self, group: str, message: dict[str, Any]) -> None:
        future = asyncio.run_coroutine_threadsafe(self.layer.group_send(group, message), self.loop)
        await asyncio.wrap_future(future)


class EmbeddedBroadcastRole(BroadcastRole):
    """The broadcast role, sending through the web process's event loop."""

    name = "broadcasts-embedded"

    def __init__(self, supervisor: RoleHost, index: int = 0, layer: Any = None) -> None:
        super().__init__(supervisor, index)
        self.layer = layer

    def channel_layer(self) -> Any:
        return self.layer


class EmbeddedDelivery:
    """The broadcast role's supervisor, run in a daemon thread of the web process."""

    def __init__(self, layer: Any, loop: asyncio.AbstractEventLoop) -> None:
        bound = LoopBoundLayer(layer, loop)

        def factory(host: Supervisor, index: int) -> Role:
            return EmbeddedBroadcastRole(host, index, bound)

        supervisors = [
            Supervisor(roles=[(factory, 1)], alias=alias, install_signal_handlers=False)
            for alias in databases()
        ]
        self.supervisor: Supervisor | SupervisorGroup = (
            supervisors[0]
            if len(supervisors) == 1
            else SupervisorGroup(supervisors, install_signal_handlers=False)
        )
        self.thread = threading.Thread(
            target=self._run, name="solid-objects-embedded-broadcasts", daemon=True
        )
        self._stopped = False

    def _run(self) -> None:
        try:
            self.supervisor.run()
        except Exception:
            logger.exception("embedded broadcast delivery stopped")

    def start(self) -> None:
        self.thread.start()
        atexit.register(self.stop)

    def stop(self, timeout: float | None = None) -> None:
        """Stop claiming, finish the batch in flight, release, mark the process stopped."""
        if self._stopped:
            return
        self._stopped = True
        if self.thread.is_alive():
            self.supervisor.request_stop()
            self.thread.join(get_settings().SHUTDOWN_TIMEOUT if timeout is None else timeout)


class EmbeddedBroadcasts:
    """ASGI middleware that runs broadcast delivery in this process (see the module doc)."""

    def __init__(self, application: ASGIApp, *, enabled: bool | None = None) -> None:
        self.application = application
        self.enabled = enabled
        self.delivery: EmbeddedDelivery | None = None
        self._lock = threading.Lock()
        self._decided = False

    def start(self) -> EmbeddedDelivery | None:
        """Start delivery on the running event loop (once); ``None`` when it does not run
        here (another layer, or disabled)."""
        with self._lock:
            if self._decided:
                return self.delivery
            self._decided = True
            layer = default_layer()
            enabled = is_process_local(layer) if self.enabled is None else self.enabled
            if not enabled:
                return None
            if layer is None:
                logger.warning("embedded broadcasts: no Channels layer configured; not started")
                return None
            self.delivery = EmbeddedDelivery(layer, asyncio.get_running_loop())
            self.delivery.start()
            logger.info("embedded broadcast delivery started (layer %s)", describe(layer))
            return self.delivery

    def stop(self) -> None:
        with self._lock:
            delivery, self.delivery, self._decided = self.delivery, None, False
        if delivery is not None:
            delivery.stop()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self._lifespan(receive, send)
            return
        if not self._decided:
            self.start()
        await self.application(scope, receive, send)

    async def _lifespan(self, receive: Receive, send: Send) -> None:
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                try:
                    self.start()
                except Exception as exc:
                    await send({"type": "lifespan.startup.failed", "message": str(exc)})
                    return
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await asyncio.get_running_loop().run_in_executor(None, self.stop)
                await send({"type": "lifespan.shutdown.complete"})
                return
