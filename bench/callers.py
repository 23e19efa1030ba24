"""Caller threads for the concurrent-callers measure.

``python -m bench.callers OUT START_AT CALLS ACTOR_ID [ACTOR_ID ...]``: one thread per
ACTOR_ID (the same id may repeat: several threads calling one actor), each making CALLS
synchronous calls to its ``BenchCounter`` from the start line on, on its own connection.
Writes the latencies (ms), the statements of every connection of the process during the
calls, and the finishing time to OUT (JSON). Started by :func:`bench.measures.callers`.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time


def main() -> None:
    output, start_at, calls, actor_ids = (
        sys.argv[1],
        float(sys.argv[2]),
        int(sys.argv[3]),
        sys.argv[4:],
    )
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "bench.settings")
    import django

    django.setup()
    from django.db import connections

    from bench import statements
    from bench.actors import BenchCounter

    statements.install()
    samples: list[float] = []
    errors: list[str] = []
    lock = threading.Lock()
    ready = threading.Barrier(len(actor_ids) + 1)

    def call(actor_id: str) -> None:
        try:
            ref = BenchCounter.ref(actor_id)
            ref.snapshot()  # connect before the start line
            ready.wait()
            while time.time() < start_at:
                time.sleep(0.0005)
            mine = []
            for _ in range(calls):
                started = time.perf_counter()
                ref.sync(timeout=60).add(1)
                mine.append((time.perf_counter() - started) * 1000)
            with lock:
                samples.extend(mine)
        except Exception as exc:  # reported, and the measure fails
            with lock:
                errors.append(repr(exc)[:300])
        finally:
            connections.close_all()

    threads = [threading.Thread(target=call, args=(actor_id,)) for actor_id in actor_ids]
    for thread in threads:
        thread.start()
    ready.wait()
    before = statements.count()
    for thread in threads:
        thread.join()
    finished = time.time()
    with open(output, "w") as out:
        json.dump(
            {
                "samples": samples,
                "errors": errors,
                "statements": statements.count() - before,
                "finished": finished,
            },
            out,
        )


if __name__ == "__main__":
    main()
