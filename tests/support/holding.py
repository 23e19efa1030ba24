"""Holding a child process at a named pause point, so a test can SIGKILL it exactly there.

``tests/manage.py`` installs :func:`hold_at` when ``SOLID_TEST_HOLD_AT`` names a point of
:mod:`solid_objects.pause_points`: the first thread to reach it creates the file
``SOLID_TEST_HOLD_FILE`` and then blocks for good; the test waits for the file and kills the
process (:meth:`tests.support.processes.Commands.kill`).
"""

from __future__ import annotations

import threading
from pathlib import Path

from solid_objects import pause_points


def hold_at(point: str, flag: Path) -> None:
    forever = threading.Event()

    def hold(name: str) -> None:
        flag.write_text(name)
        forever.wait()

    pause_points.install(point, hold)
