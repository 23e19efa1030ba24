"""The procrastinate side of ``make bench-peers``: run by the interpreter of its own virtual
environment (``.bench-peers/procrastinate``), never imported by the project.

``python procrastinate_side.py DSN reset``: an empty schema with procrastinate's tables.
``python procrastinate_side.py DSN defer N independent|ordered``: N no-op jobs (ordered: one
``lock``, procrastinate's per-key ordering).
``python procrastinate_side.py DSN work``: one worker (its defaults: concurrency 1, LISTEN/
NOTIFY) that exits when the queue is empty.
``python procrastinate_side.py DSN rate N``: prints JSON {rate, jobs} measured on the
database clock from the first start to the last success, after checking all N succeeded.
"""

from __future__ import annotations

import json
import sys

import procrastinate
import psycopg

DSN = sys.argv[1]
app = procrastinate.App(connector=procrastinate.PsycopgConnector(conninfo=DSN))


@app.task(name="noop")
def noop(n: int) -> int:
    return n


def main() -> None:
    command = sys.argv[2]
    if command == "reset":
        with psycopg.connect(DSN, autocommit=True) as conn:
            conn.execute("DROP SCHEMA IF EXISTS public CASCADE")
            conn.execute("CREATE SCHEMA public")
        with app.open():
            app.schema_manager.apply_schema()
    elif command == "defer":
        count, mode = int(sys.argv[3]), sys.argv[4]
        with app.open():
            deferrer = noop.configure(lock="hot") if mode == "ordered" else noop
            for start in range(0, count, 500):
                deferrer.batch_defer(*({"n": n} for n in range(start, min(count, start + 500))))
    elif command == "work":
        app.run_worker(wait=False, install_signal_handlers=False)
    elif command == "rate":
        expected = int(sys.argv[3])
        with psycopg.connect(DSN) as conn:
            done, not_done = conn.execute(
                "SELECT COUNT(*) FILTER (WHERE status = 'succeeded'), "
                "COUNT(*) FILTER (WHERE status <> 'succeeded') FROM procrastinate_jobs"
            ).fetchone()
            first, last = conn.execute(
                "SELECT MIN(at) FILTER (WHERE type = 'started'), "
                "MAX(at) FILTER (WHERE type = 'succeeded') FROM procrastinate_events"
            ).fetchone()
        if done != expected or not_done:
            raise SystemExit(f"procrastinate: {done} of {expected} jobs succeeded")
        seconds = max((last - first).total_seconds(), 1e-6)
        print(json.dumps({"rate": done / seconds, "jobs": done}))
    else:
        raise SystemExit(f"unknown command {command!r}")


if __name__ == "__main__":
    main()
