"""This process's listener of cross-process hints: which transport, its probe, starting it
once per process and alias, and sharing it between a worker and sync callers."""

from __future__ import annotations

import logging
import os
import threading

from ...conf import get_settings
from .hints import resolve_mode
from .listener import ListenerThread, ProbeResult, running, running_lock
from .postgresql import PostgreSQLListener
from .redis import RedisSubscriber

logger = logging.getLogger("solid_objects")

TRANSPORTS: dict[str, type[ListenerThread]] = {
    "postgresql": PostgreSQLListener,
    "redis": RedisSubscriber,
}


def probe(alias: str | None = None) -> ProbeResult:
    """Check the configured transport without keeping it (``solid_objects_doctor``)."""
    alias = alias or get_settings().DATABASE
    mode = resolve_mode(alias)
    transport_class = TRANSPORTS.get(mode)
    if transport_class is None:
        return ProbeResult(True, mode, "no cross-process transport; workers poll")
    transport = transport_class(alias)
    try:
        return transport.probe()
    finally:
        transport.stop()


def ensure_listener(alias: str) -> None:
    """Make sure this process hears cross-process hints (a sync caller is about to wait for
    a message another process is running). Worker processes already listen; elsewhere the
    listener starts once per process, in the background, so this wait still polls."""
    key = (os.getpid(), alias)
    if key in running:
        return
    with running_lock:
        if key in running:
            return
        running[key] = None
    if resolve_mode(alias) not in TRANSPORTS:
        return

    def start_in_background() -> None:
        try:
            start(alias)
        except Exception:
            logger.warning("wake-ups: the result listener did not start", exc_info=True)

    threading.Thread(
        target=start_in_background, name="solid-objects-wakeup-start", daemon=True
    ).start()


def hears_hints(alias: str) -> bool:
    """Whether this process's listener of ``alias`` is running and receiving hints (another
    process's commits then reach its waiters without a look at the database)."""
    with running_lock:
        listener = running.get((os.getpid(), alias))
    return isinstance(listener, ListenerThread) and listener.alive and listener.listening


def start(alias: str | None = None) -> ListenerThread | None:
    """Probe and start this process's listener; ``None`` when workers only poll."""
    alias = alias or get_settings().DATABASE
    mode = resolve_mode(alias)
    transport_class = TRANSPORTS.get(mode)
    if transport_class is None:
        logger.info("wake-ups: %s (no cross-process transport)", mode)
        return None
    key = (os.getpid(), alias)
    with running_lock:
        current = running.get(key)
    if isinstance(current, ListenerThread) and current.mode == mode and current.alive:
        return current  # a caller's listener already runs in this process: share it
    transport = transport_class(alias)
    result = transport.probe()
    if not result.ok:
        transport.stop()
        logger.warning(
            "wake-ups: the %s probe failed (%s); falling back to polling", mode, result.detail
        )
        return None
    logger.info("wake-ups: %s (probe %.1f ms)", mode, (result.seconds or 0.0) * 1000)
    transport.start()
    with running_lock:
        running[key] = transport
    return transport
