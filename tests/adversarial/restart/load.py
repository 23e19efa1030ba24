"""The load of a restart test, in a process of its own::

    python -m tests.adversarial.restart.load PLAN_JSON REPORT_PATH

on the database named by ``DATABASE_URL`` / ``SOLID_TEST_DATABASE_NAME`` (a private server).
It runs until its stdin closes (the test's signal to stop) or ``plan["seconds"]`` pass, then
writes its report (JSON) to ``REPORT_PATH``.

- ``plan["callers"]`` sync caller threads; thread ``t`` owns the actors
  ``restart-sync-<t>-<k>`` (``k < plan["actors_per_caller"]``) and calls them in turn: each
  call appends the actor's next number ``n`` (``Counter.append``) with the idempotency key
  ``<actor>:<n>``. A call that fails is tried again, same number and key, at that actor's
  next turn, so every number is applied exactly once and in order.
- one enqueuer thread does the same with ``enqueue()`` over the actors ``restart-async-<k>``
  (run by the worker processes), about ``plan["enqueue_rate"]`` messages a second.

No thread ever calls ``close_old_connections()``: the library must recover its connections
by itself. Every call is recorded (wall-clock start and end, outcome, error class): ``ok``,
``typed`` (a ``SolidObjectsError``, e.g. ``DatabaseUnavailable`` or ``SyncTimeout``) or
``raw`` (anything else: a bug).
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
import traceback
from collections.abc import Callable
from typing import Any

#: After a failed call a thread waits this long before its next one (seconds), so an outage
#: is not a busy loop.
FAILURE_PAUSE = 0.1
#: At most this many raw errors keep their traceback in the report.
KEEP_TRACEBACKS = 10


class Recorder:
    """Thread-safe list of call records, plus per-actor progress."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.calls: list[dict[str, Any]] = []
        self.tracebacks: list[str] = []
        self.actors: dict[str, dict[str, Any]] = {}

    def record(self, entry: dict[str, Any], trace: str | None = None) -> None:
        with self._lock:
            self.calls.append(entry)
            if trace is not None and len(self.tracebacks) < KEEP_TRACEBACKS:
                self.tracebacks.append(trace)

    def progress(self, actor: str, kind: str, last_ok: int, pending: int | None) -> None:
        with self._lock:
            self.actors[actor] = {"kind": kind, "last_ok": last_ok, "pending": pending}


def attempt(
    recorder: Recorder,
    kind: str,
    thread: int,
    actor: str,
    n: int,
    call: Callable[[], Any],
) -> bool:
    """Make one call and record it; ``True`` when it succeeded."""
    from solid_objects import SolidObjectsError

    entry: dict[str, Any] = {"kind": kind, "thread": thread, "actor": actor, "n": n}
    entry["start"] = time.time()
    trace = None
    try:
        entry["result"] = call()
        entry["outcome"] = "ok"
    except SolidObjectsError as exc:
        entry["outcome"] = "typed"
        entry["error"] = type(exc).__name__
        entry["committed"] = getattr(exc, "committed", None)
    except Exception as exc:
        entry["outcome"] = "raw"
        entry["error"] = f"{type(exc).__module__}.{type(exc).__name__}: {exc}"
        trace = traceback.format_exc()
    entry["end"] = time.time()
    recorder.record(entry, trace)
    return entry["outcome"] == "ok"


def sync_caller(thread: int, actors: list[str], recorder: Recorder, stop: threading.Event) -> None:
    from tests.testapp.actors.core import Counter

    done = dict.fromkeys(actors, 0)
    while not stop.is_set():
        for actor in actors:
            if stop.is_set():
                break
            n = done[actor] + 1
            ok = attempt(
                recorder,
                "sync",
                thread,
                actor,
                n,
                lambda actor=actor, n=n: (
                    Counter.ref(actor).sync(idempotency_key=f"{actor}:{n}").append(n)
                ),
            )
            if ok:
                done[actor] = n
            recorder.progress(actor, "sync", done[actor], None if ok else n)
            if not ok:
                stop.wait(FAILURE_PAUSE)


def enqueuer(actors: list[str], rate: float, recorder: Recorder, stop: threading.Event) -> None:
    from tests.testapp.actors.core import Counter

    done = dict.fromkeys(actors, 0)
    interval = 1.0 / rate
    while not stop.is_set():
        for actor in actors:
            if stop.is_set():
                break
            n = done[actor] + 1
            ok = attempt(
                recorder,
                "enqueue",
                0,
                actor,
                n,
                lambda actor=actor, n=n: (
                    Counter.ref(actor).enqueue(idempotency_key=f"{actor}:{n}").append(n).sequence
                ),
            )
            if ok:
                done[actor] = n
            recorder.progress(actor, "async", done[actor], None if ok else n)
            stop.wait(interval if ok else FAILURE_PAUSE)


def run(plan: dict[str, Any], report_path: str) -> None:
    import django

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.settings")
    django.setup()
    from django.db import connections

    recorder = Recorder()
    stop = threading.Event()
    started = time.time()

    def closing(target: Callable[..., None], *args: Any) -> Callable[[], None]:
        def body() -> None:
            try:
                target(*args)
            finally:
                connections.close_all()

        return body

    threads = [
        threading.Thread(
            target=closing(
                sync_caller,
                t,
                [f"restart-sync-{t}-{k}" for k in range(plan["actors_per_caller"])],
                recorder,
                stop,
            ),
            name=f"caller-{t}",
        )
        for t in range(plan["callers"])
    ]
    threads.append(
        threading.Thread(
            target=closing(
                enqueuer,
                [f"restart-async-{k}" for k in range(plan["async_actors"])],
                plan["enqueue_rate"],
                recorder,
                stop,
            ),
            name="enqueuer",
        )
    )
    for thread in threads:
        thread.start()
    print("load started", flush=True)

    def watch_stdin() -> None:
        sys.stdin.read()  # returns when the test closes our stdin
        stop.set()

    threading.Thread(target=watch_stdin, daemon=True).start()
    stop.wait(plan["seconds"])
    stop.set()
    for thread in threads:
        thread.join(60)
    report = {
        "started": started,
        "stopped": time.time(),
        "calls": recorder.calls,
        "actors": recorder.actors,
        "tracebacks": recorder.tracebacks,
        "alive_threads": [t.name for t in threads if t.is_alive()],
    }
    with open(report_path, "w") as out:
        json.dump(report, out)
    print("load stopped", flush=True)


if __name__ == "__main__":
    run(json.loads(sys.argv[1]), sys.argv[2])
