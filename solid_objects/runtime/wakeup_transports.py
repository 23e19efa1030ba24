"""Cross-process wake-up transports (PostgreSQL LISTEN/NOTIFY, Redis pub/sub).

Publishing happens after the enqueueing transaction commits (Redis) or inside it (NOTIFY,
sent by the PostgreSQL dialect). Until a transport is started in this process, publishing
is a no-op and waiters rely on polling.
"""

from __future__ import annotations

from collections.abc import Callable

_publishers: list[Callable[[], None]] = []


def add_publisher(publisher: Callable[[], None]) -> None:
    _publishers.append(publisher)


def publish_work() -> None:
    for publisher in _publishers:
        try:
            publisher()
        except Exception:
            import logging

            logging.getLogger("solid_objects").debug("wake-up publish failed", exc_info=True)
