"""Progress bars of the long management commands (``activity_rebuild`` here,
``prune_solid_objects`` in ``solid_objects``).

A bar is drawn by tqdm on the command's *real* stderr stream: Django's ``OutputWrapper``
appends a newline to every write and, on a terminal, colours stderr red, so a bar written
through it becomes one red line per refresh. The bar is drawn only on a terminal and not at
``--verbosity 0`` (a log file or a pipe gets the command's summary lines, not carriage
returns). While a bar is drawn, every console handler (a ``StreamHandler`` on stdout or
stderr) writes through tqdm, so a log line appears above the bar instead of cutting it:
those of the ``solid_objects`` and ``tilttek_activity`` loggers, the root logger's (a
project that logs everything through the root logger) and any other logger's. Handlers
writing elsewhere (files, syslog) are left alone, and a logger without a console handler
gets none.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from typing import Any, TextIO

from tqdm import tqdm
from tqdm.contrib.logging import logging_redirect_tqdm

#: The packages' loggers (redirected like any other logger with a console handler).
LOGGERS = ("solid_objects", "tilttek_activity")


def _writes_to_console(handler: logging.Handler) -> bool:
    return isinstance(handler, logging.StreamHandler) and getattr(handler, "stream", None) in (
        sys.stdout,
        sys.stderr,
    )


def console_loggers() -> list[logging.Logger]:
    """The root logger and every other logger that has a console handler of its own."""
    known = list(logging.Logger.manager.loggerDict.values())  # a copy: loggers come and go
    loggers = [logging.root, *(logger for logger in known if isinstance(logger, logging.Logger))]
    return [logger for logger in loggers if any(map(_writes_to_console, logger.handlers))]


def real_stream(stream: Any) -> TextIO:
    """The stream under a Django ``OutputWrapper`` (or ``stream`` itself)."""
    # OutputWrapper keeps the stream in its private _out, which django-stubs does not declare.
    return getattr(stream, "_out", stream)  # type: ignore[no-any-return]


def shown(stream: TextIO, verbosity: int) -> bool:
    """Whether a bar is drawn on ``stream``: a terminal, and not ``--verbosity 0``."""
    isatty = getattr(stream, "isatty", None)
    return verbosity > 0 and callable(isatty) and bool(isatty())


class Bars:
    """Makes the bars of one command run; :func:`progress_bars` opens and closes it."""

    def __init__(self, stream: TextIO, enabled: bool) -> None:
        self.stream = stream
        self.enabled = enabled
        self._open: list[tqdm[Any]] = []

    def new(self, *, total: int | None = None, desc: str | None = None, unit: str = "rows") -> Any:
        """A new bar below the previous ones (closed by :meth:`close` at the latest)."""
        bar = tqdm(
            total=total,
            desc=desc,
            unit=unit,
            file=self.stream,
            disable=not self.enabled,
            leave=True,
        )
        self._open.append(bar)
        return bar

    def close(self) -> None:
        while self._open:
            self._open.pop().close()


@contextmanager
def progress_bars(command_stderr: Any, verbosity: int) -> Iterator[Bars]:
    """Bars on the command's real stderr (disabled where they are not shown), with the
    console's log lines (root logger included) routed above them while the block runs."""
    stream = real_stream(command_stderr)
    bars = Bars(stream, shown(stream, verbosity))
    with ExitStack() as stack:
        if bars.enabled:
            # Only loggers that have a console handler: tqdm's helper gives every logger it
            # is passed a handler, which would print a propagated record twice.
            stack.enter_context(logging_redirect_tqdm(loggers=console_loggers()))
        stack.callback(bars.close)
        yield bars
