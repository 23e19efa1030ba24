"""PostgreSQL ``LISTEN/NOTIFY``: the statements of wake-up hints that travel through the
database, and whether enqueues send them.

A hint's payload names the doorbell it rings: ``""`` (new actor work, the payload enqueues
send) or another doorbell name (``"result"``, ``"effect"``...). A ``NOTIFY`` inside a
transaction goes out when (and only if) the transaction commits; in autocommit at once.
"""

from __future__ import annotations

from typing import Any

from ..conf import get_settings
from .dialect import Dialect

#: The channel every hint of ``solid_objects`` travels on.
CHANNEL = "solid_objects"

#: Send one hint (``payload`` names the doorbell; ``""`` is new actor work).
NOTIFY = "SELECT pg_notify(%(channel)s, %(payload)s)"

#: Start listening (on the listener's own connection; the channel is an identifier).
LISTEN = "LISTEN " + CHANNEL

#: The channels the listener's session listens on (a pooling proxy may drop the LISTEN).
LISTENING_CHANNELS = "SELECT pg_listening_channels()"


def payload(kind: str) -> str:
    """The payload of a hint ringing doorbell ``kind``."""
    return "" if kind == "work" else kind


def send(cursor: Any, kind: str = "work", *, payload_text: str | None = None) -> None:
    """Send one hint ringing doorbell ``kind`` (or carrying ``payload_text``) on ``cursor``:
    at commit inside a transaction, else at once."""
    text = payload(kind) if payload_text is None else payload_text
    cursor.execute(NOTIFY, {"channel": CHANNEL, "payload": text})


def listen(listener: Any) -> None:
    """Start listening on ``listener``, a psycopg connection in autocommit of its own."""
    listener.execute(LISTEN)


def listening_channels(listener: Any) -> list[str]:
    """The channels ``listener`` listens on, as the server sees its session."""
    return [row[0] for row in listener.execute(LISTENING_CHANNELS)]


def notify_enabled(dialect: Dialect) -> bool:
    """Whether enqueues and commits on ``dialect``'s database send ``NOTIFY``: it carries
    hints (:attr:`Dialect.listen_notify`) and the wake-up mode is ``"auto"`` or
    ``"postgresql"``."""
    return dialect.listen_notify and get_settings().WAKE_UP in ("auto", "postgresql")
