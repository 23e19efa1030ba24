"""The start and stop lines of a worker process, on the ``solid_objects.process`` logger.

A project that configured no handler for ``solid_objects`` (Django's default ``LOGGING``
has none) would see neither line: Python only prints warnings then. A worker command
started from a terminal or a service manager calls :func:`ensure_visible`, which attaches a
plain stderr handler to that one logger in exactly that case, so the lines show up once,
and never twice when logging is configured.
"""

from __future__ import annotations

import logging
import os
import socket
import sys
from collections import Counter
from collections.abc import Iterable

logger = logging.getLogger("solid_objects.process")
_fallback: logging.Handler | None = None


def ensure_visible() -> None:
    """Show the lifecycle lines on stderr when no logging handler would show them."""
    global _fallback
    if _fallback is not None or logger.hasHandlers():
        return
    _fallback = logging.StreamHandler(sys.stderr)
    _fallback.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(message)s"))
    logger.addHandler(_fallback)
    if logger.getEffectiveLevel() > logging.INFO:
        logger.setLevel(logging.INFO)


def describe_roles(labels: Iterable[str]) -> str:
    """``"actors x2, effects"``: the role names of a process with their thread counts."""
    counts = Counter(label.rsplit("-", 1)[0] for label in labels)
    return ", ".join(name if n == 1 else f"{name} x{n}" for name, n in counts.items())


def started(roles: str, alias: str, vendor: str, wake_ups: str, process_ids: list[str]) -> None:
    logger.info(
        "solid_objects worker started: pid %s on %s, roles %s, database %r (%s), "
        "wake-ups %s, process rows %s",
        os.getpid(),
        socket.gethostname(),
        roles,
        alias,
        vendor,
        wake_ups,
        ", ".join(process_ids),
    )


def stopped(seconds: float, clean: bool) -> None:
    logger.info(
        "solid_objects worker stopped: pid %s after %.1fs%s",
        os.getpid(),
        seconds,
        "" if clean else " (some turns were still running at the shutdown timeout)",
    )
