"""Running a ``tests/manage.py`` command on a pseudo-terminal, as an operator would."""

from __future__ import annotations

import fcntl
import os
import pty
import struct
import subprocess
import sys
import termios
from collections.abc import Mapping
from typing import Any

from .processes import REPO_ROOT, environment, test_database_name

#: The start of the ANSI sequence Django's stderr ``OutputWrapper`` colours errors with.
RED = "\x1b[31"


def run_on_terminal(*argv: str, settings: Mapping[str, Any] | None = None) -> tuple[int, str]:
    """``tests/manage.py *argv`` with stdout and stderr on a pseudo-terminal (and
    ``SOLID_OBJECTS`` overrides ``settings``); its exit code and everything it wrote."""
    leader, follower = pty.openpty()
    # 30 rows, 100 columns: a terminal has a size (a bare pseudo-terminal says 0 x 0)
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 30, 100, 0, 0))
    proc = subprocess.Popen(
        [sys.executable, "tests/manage.py", *argv],
        cwd=REPO_ROOT,
        env={**environment(test_database_name(), settings, log_level="INFO")},
        stdin=subprocess.DEVNULL,
        stdout=follower,
        stderr=follower,
    )
    os.close(follower)
    chunks = []
    while True:
        try:
            chunk = os.read(leader, 65536)
        except OSError:  # EIO: the child closed the terminal
            break
        if not chunk:
            break
        chunks.append(chunk)
    os.close(leader)
    return proc.wait(60), b"".join(chunks).decode(errors="replace")


def screen(output: str) -> list[str]:
    """The non-blank lines a terminal shows for ``output``: each carriage return goes back
    to the start of the line and what follows overwrites what was there."""
    shown = []
    for line in output.replace("\r\n", "\n").split("\n"):
        cells: list[str] = []
        for segment in line.split("\r"):
            cells[: len(segment)] = segment
        text = "".join(cells).rstrip()
        if text:
            shown.append(text)
    return shown
