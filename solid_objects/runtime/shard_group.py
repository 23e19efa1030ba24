"""A worker process that serves several shards: one supervisor per alias.

With ``SOLID_OBJECTS["DATABASES"]`` a worker command serves every shard by default (or the
one its ``--database`` names). Each alias gets a :class:`~.supervisor.Supervisor` of its
own, running in a thread of its own: its process rows, heartbeats, lease renewal,
dead-process cleanup, periodic tasks (retention) and wake-up transport are that alias's,
exactly as in a process serving one database, and a role thread that crashes is replaced
by its shard's supervisor as usual.

The :class:`SupervisorGroup` owns what belongs to the OS process: the SIGTERM/SIGINT
handlers (a first signal stops every supervisor, which finish their turns in flight and
mark their rows stopped; a second one exits at once) and the exit code. A supervisor that
fails outright (its database refused the registration, say) stops the others and the error
ends the process, as it would end a worker of one database.

One alias needs no group: :func:`~.launch.build_workers` then returns the single
supervisor, so an unsharded worker runs exactly as before.
"""

from __future__ import annotations

import logging
import os
import signal
import threading
from collections.abc import Sequence
from typing import Any

from ..conf import get_settings
from ..errors import UnknownDatabase
from . import lifecycle
from .supervisor import Supervisor

logger = logging.getLogger("solid_objects")

#: How often the main thread looks at the supervisor threads (signals are handled meanwhile).
WATCH_TICK = 0.5


class NotAShard(UnknownDatabase, ValueError):
    """A worker's ``--database`` names an alias that holds no actors (an
    :class:`~solid_objects.errors.UnknownDatabase`, as the operator commands raise)."""


def served_aliases(database: str | None = None) -> tuple[str, ...]:
    """The aliases a worker command serves: ``(database,)``, which must be a shard, or every
    shard of ``SOLID_OBJECTS["DATABASES"]`` (``(DATABASE,)`` unsharded)."""
    shards = get_settings().shards
    if database is None:
        return shards
    if database not in shards:
        known = ", ".join(repr(alias) for alias in shards)
        raise NotAShard(
            f"--database {database!r} is not a database that holds actors (the shards are "
            f'{known}: SOLID_OBJECTS["DATABASES"], or SOLID_OBJECTS["DATABASE"] unsharded)',
            alias=database,
            known=shards,
        )
    return (database,)


class SupervisorGroup:
    """Runs one supervisor per shard in this process; ``run()`` blocks until every one has
    stopped and returns the exit code (0 after a graceful stop)."""

    def __init__(
        self, supervisors: Sequence[Supervisor], *, install_signal_handlers: bool = True
    ) -> None:
        self.supervisors = list(supervisors)
        self.install_signal_handlers = install_signal_handlers
        for supervisor in self.supervisors:
            supervisor.install_signal_handlers = False  # the group's, for all of them
        self._signals = 0
        self._ended = threading.Event()
        self._failures: list[BaseException] = []
        self._codes: dict[str, int] = {}

    @property
    def aliases(self) -> list[str]:
        return [supervisor.alias for supervisor in self.supervisors]

    def request_stop(self, *_: Any) -> None:
        """SIGTERM/SIGINT: stop every supervisor gracefully; a second call exits at once."""
        self._signals += 1
        if self._signals > 1:
            logger.warning("second stop signal: exiting now")
            os._exit(1)
        logger.info("stop requested: finishing the turns in flight on every shard")
        self.stop()

    def stop(self) -> None:
        for supervisor in self.supervisors:
            supervisor.stop()

    def run(self) -> int:
        if self.install_signal_handlers:
            signal.signal(signal.SIGTERM, self.request_stop)
            signal.signal(signal.SIGINT, self.request_stop)
            lifecycle.ensure_visible()
        threads = [
            threading.Thread(
                target=self._run_one,
                args=(supervisor,),
                name=f"solid-objects-shard-{supervisor.alias}",
                daemon=True,
            )
            for supervisor in self.supervisors
        ]
        for thread in threads:
            thread.start()
        try:
            while any(thread.is_alive() for thread in threads):
                self._ended.wait(WATCH_TICK)
                self._ended.clear()
                if self._failures:
                    self.stop()  # one shard could not run: stop the others, then fail
        finally:
            self.stop()
            for thread in threads:
                thread.join()
        if self._failures:
            raise self._failures[0]
        return max(self._codes.values(), default=0)

    def _run_one(self, supervisor: Supervisor) -> None:
        try:
            self._codes[supervisor.alias] = supervisor.run()
        except BaseException as exc:
            logger.exception("the supervisor of database %r failed", supervisor.alias)
            self._failures.append(exc)
        finally:
            self._ended.set()
