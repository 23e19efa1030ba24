"""Which cross-process hint mode is in force, and sending hints once a commit is durable.

``SOLID_OBJECTS["WAKE_UP"]``:

- ``"auto"`` (default): PostgreSQL ``LISTEN/NOTIFY`` when the database carries hints, else
  Redis when ``REDIS_URL`` is set, else in-process only;
- ``"postgresql"``: every enqueue sends ``NOTIFY`` inside its own statement (see
  :mod:`solid_objects.db.notify`), so the hint goes out exactly when the enqueue commits;
- ``"redis"``: after an enqueue commits, the enqueuing process publishes on a channel named
  after the database and table prefix (:mod:`.redis`);
- ``"in_process"``: doorbells only reach waiters of the same process;
- ``"polling"``: no cross-process hints; workers find work by polling.
"""

from __future__ import annotations

from collections.abc import Sequence

from django.db import connections

from ...conf import SolidObjectsSettings, get_settings
from ...db import notify
from ...db.vendors import dialect_for
from . import progress
from .redis import publisher


def resolve_mode(alias: str | None = None) -> str:
    """``"postgresql"``, ``"redis"``, ``"in_process"`` or ``"polling"`` for this settings."""
    settings = get_settings()
    mode = settings.WAKE_UP
    if mode != "auto":
        return mode
    if dialect_for(connections[alias or settings.DATABASE]).listen_notify:
        return "postgresql"
    if settings.REDIS_URL:
        return "redis"
    return "in_process"


_mode_cache: tuple[SolidObjectsSettings, str] | None = None


def hint_mode() -> str:
    """The mode in force for this process's settings and default alias (cached)."""
    global _mode_cache
    settings = get_settings()
    cached = _mode_cache
    if cached is None or cached[0] is not settings:
        cached = _mode_cache = (settings, resolve_mode())
    return cached[1]


def publish_work() -> None:
    """After an enqueue committed: tell other processes there is actor work."""
    publish("work")


def publish(kind: str = "work") -> None:
    """After a commit: ring doorbell ``kind`` of other processes where the hint does not
    travel with the commit itself (Redis)."""
    if hint_mode() == "redis":
        publisher.publish(kind)


def publish_result(alias: str, finished: Sequence[tuple[int, int]] = ()) -> None:
    """After a commit that finished sync calls of other processes: ring their ``result``
    doorbells (a ``NOTIFY`` in autocommit, or a Redis message), so a waiting caller reads
    its outcome at once instead of at its next poll. ``finished`` (``(instance_id, highest
    final sequence)`` of the actors committed) travels in the ``NOTIFY`` payload, so only
    the callers whose message it finished read the database."""
    mode = hint_mode()
    if mode == "postgresql":
        connection = connections[alias]
        if connection.in_atomic_block:
            return  # only ever called after the commit; never delay a caller's transaction
        with connection.cursor() as cursor:
            notify.send(cursor, "result", payload_text=progress.payload(finished))
    elif mode == "redis":
        publisher.publish("result")
