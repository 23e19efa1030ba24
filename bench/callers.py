"""A caller process for the contention measure: ``python -m bench.callers ACTOR CALLS OUT``.

Makes CALLS synchronous calls to one ``BenchCounter`` and writes their latencies (ms, JSON
list) to OUT. Started by :func:`bench.measures.contention`, several at once, beside a worker.
"""

from __future__ import annotations

import json
import os
import sys
import time


def main() -> None:
    actor_id, calls, output, start_at = (
        sys.argv[1],
        int(sys.argv[2]),
        sys.argv[3],
        float(sys.argv[4]),
    )
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "bench.settings")
    import django

    django.setup()
    from bench.actors import BenchCounter

    ref = BenchCounter.ref(actor_id)
    ref.snapshot()  # connect before the start line
    while time.time() < start_at:
        time.sleep(0.001)
    samples = []
    for _ in range(calls):
        started = time.perf_counter()
        ref.sync(timeout=30).add(1)
        samples.append((time.perf_counter() - started) * 1000)
    with open(output, "w") as out:
        json.dump(samples, out)


if __name__ == "__main__":
    main()
