"""PostgreSQL ``LISTEN/NOTIFY``: the statements of wake-up hints that travel through the
database, and whether enqueues send them.

A hint's payload names the doorbell it rings: ``""`` (new actor work, the payload enqueues
send) or another doorbell name (``"result"``, ``"effect"``...). A ``NOTIFY`` inside a
transaction goes out when (and only if) the transaction commits; in autocommit at once.
"""

from __future__ import annotations

from typing import Any

from ..conf import SolidObjectsSettings, get_settings
from .dialect import Dialect

#: The channel every hint of ``solid_objects`` travels on.
CHANNEL = "solid_objects"

#: Send one hint (``payload`` names the doorbell; ``""`` is new actor work).
NOTIFY = "SELECT pg_notify(%(channel)s, %(payload)s)"

#: Start listening (on the listener's own connection; the channel is an identifier).
LISTEN = f"LISTEN {CHANNEL}"

#: The channels the listener's session listens on (a pooling proxy may drop the LISTEN).
LISTENING_CHANNELS = "SELECT pg_listening_channels()"


def payload(kind: str) -> str:
    """The payload of a hint ringing doorbell ``kind``."""
    return "" if kind == "work" else kind


def hint_params(kind: str = "work", *, payload_text: str | None = None) -> dict[str, Any]:
    """The parameters of :data:`NOTIFY` for doorbell ``kind`` (or an explicit payload)."""
    text = payload(kind) if payload_text is None else payload_text
    return {"channel": CHANNEL, "payload": text}


def send(cursor: Any, kind: str = "work", *, payload_text: str | None = None) -> None:
    """Send one hint on ``cursor`` (at commit inside a transaction, else at once)."""
    cursor.execute(NOTIFY, hint_params(kind, payload_text=payload_text))


_cache: tuple[SolidObjectsSettings, bool] | None = None


def notify_enabled(dialect: Dialect) -> bool:
    """Whether enqueues and commits on ``dialect``'s database send ``NOTIFY``: it carries
    hints (:attr:`Dialect.listen_notify`) and the wake-up mode is ``"auto"`` or
    ``"postgresql"``."""
    if not dialect.listen_notify:
        return False
    global _cache
    settings = get_settings()
    cached = _cache
    if cached is None or cached[0] is not settings:
        cached = _cache = (settings, settings.WAKE_UP in ("auto", "postgresql"))
    return cached[1]
