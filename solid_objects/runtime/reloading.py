"""``run_actor_worker --reload``: restart the worker when a Python file changes (the
default when ``DEBUG`` is on, like ``runserver``).

The command's process becomes a small parent that starts the real worker as a child
(Django's autoreload child arguments and its ``RUN_MAIN`` variable) and starts it again
whenever it exits with :data:`RELOAD_CODE`. The child runs the supervisor as usual, in its
main thread with its signal handlers, plus a watcher thread polling the modification times
of every loaded module (Django's ``iter_all_python_module_files``). On a change the watcher
asks the supervisor to stop, so the turns in flight finish, leases are released and the
process rows are marked stopped, exactly as on SIGTERM, before the child exits for the
reload. SIGTERM and SIGINT sent to the parent are passed on to the child, and the parent
exits with the child's code (0 if the child saw a change while that signal stopped it:
a signal always ends the parent).
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from django.utils import autoreload

logger = logging.getLogger("solid_objects.process")

#: The exit code that asks the parent for a restart (Django's own autoreloader uses 3).
RELOAD_CODE = 3
#: How often the watcher looks at modification times (seconds).
WATCH_INTERVAL = 1.0


def in_child() -> bool:
    return os.environ.get(autoreload.DJANGO_AUTORELOAD_ENV) == "true"


def run_parent() -> int:
    """Start the worker child again and again while it asks for a reload; its exit code."""
    arguments = autoreload.get_child_arguments()
    environment = {**os.environ, autoreload.DJANGO_AUTORELOAD_ENV: "true"}
    stopping = threading.Event()
    while True:
        child = subprocess.Popen(arguments, env=environment, close_fds=False)

        def forward(signum: int, frame: Any, _child: subprocess.Popen[bytes] = child) -> None:
            stopping.set()
            if _child.poll() is None:
                _child.send_signal(signum)

        previous = {sig: signal.signal(sig, forward) for sig in (signal.SIGTERM, signal.SIGINT)}
        try:
            code = child.wait()
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)
        if code != RELOAD_CODE:
            return code
        if stopping.is_set():  # a change seen while a signal stopped it: no restart
            return 0


def _snapshot() -> dict[Path, float]:
    times = {}
    for path in autoreload.iter_all_python_module_files():
        try:
            times[path] = path.stat().st_mtime
        except OSError:
            continue
    return times


class Watcher:
    """A daemon thread that calls ``stop_worker()`` once a loaded module changes (the
    changed file is kept in :attr:`changed`)."""

    def __init__(self, stop_worker: Callable[[], None]) -> None:
        self.stop_worker = stop_worker
        self.changed: Path | None = None
        self.stopped = threading.Event()
        self.before = _snapshot()  # taken now: a change made while the worker starts counts
        self.thread = threading.Thread(
            target=self._run, name="solid-objects-reload-watch", daemon=True
        )

    def _run(self) -> None:
        before = self.before
        while not self.stopped.wait(WATCH_INTERVAL):
            after = _snapshot()
            changed = next(
                (path for path, mtime in after.items() if before.get(path, mtime) != mtime), None
            )
            if changed is not None:
                self.changed = changed
                logger.info("%s changed: reloading the worker", changed)
                self.stop_worker()
                return
            before = after


def run_child(run_worker: Callable[[], int], stop_worker: Callable[[], None]) -> int:
    """Run the worker with the watcher; :data:`RELOAD_CODE` if a change stopped it."""
    watcher = Watcher(stop_worker)
    watcher.thread.start()
    try:
        code = run_worker()
    finally:
        watcher.stopped.set()
    return RELOAD_CODE if watcher.changed is not None else code
