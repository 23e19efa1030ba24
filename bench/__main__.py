"""``python -m bench``: measure the runtime and the journal against raw baselines.

Runs against ``DATABASE_URL`` (SQLite by default), prints a table and writes
``.bench-results/<database>.json`` (ignored by git); ``--save`` writes the committed
``bench/results/<database>.json`` instead. See ``docs/benchmarks.md``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from dataclasses import asdict
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    parser.add_argument(
        "--only",
        default="",
        help="comma-separated measures: "
        "raw,enqueue,processing,sustained,sync,callers,defaults,full,wakeup,state,encoding,idle,"
        "journal,"
        "tasks,shards; and "
        "memory "
        "(worker RSS over --memory-turns turns: minutes, never in a default run)",
    )
    parser.add_argument("--quick", action="store_true", help="small counts (a smoke run)")
    parser.add_argument(
        "--output", default=None, help="JSON path (default .bench-results/<database>.json)"
    )
    parser.add_argument(
        "--save",
        action="store_true",
        help="write the committed bench/results/<database>.json (the published figures)",
    )
    for name, default in (
        ("hot-messages", 2000),
        ("warm-actors", 200),
        ("warm-rounds", 10),
        ("cold-actors", 1000),
        ("sync-samples", 200),
        ("wakeup-samples", 30),
        ("catch-up-entries", 100_000),
        ("activity-writes", 2000),
        ("bulk-rows", 20000),
        ("memory-turns", 100_000),
        ("task-count", 1000),
        ("sustained-messages", 10_000),
        ("callers", 16),
        ("caller-calls", 100),
    ):
        parser.add_argument(f"--{name}", type=int, default=default)
    args = parser.parse_args(argv)

    sys.path.insert(0, str(ROOT))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "bench.settings")
    import django

    django.setup()
    from django.core.management import call_command
    from django.db import connection

    from bench import statements
    from bench.catalogue import MEASURES, OPT_IN, run_group
    from bench.measures import RAW1, Params, Result, baseline_summary

    statements.install()

    _ensure_database()
    call_command("migrate", verbosity=0)
    params = Params(
        hot_messages=args.hot_messages,
        warm_actors=args.warm_actors,
        warm_rounds=args.warm_rounds,
        cold_actors=args.cold_actors,
        sync_samples=args.sync_samples,
        wakeup_samples=args.wakeup_samples,
        catch_up_entries=args.catch_up_entries,
        activity_writes=args.activity_writes,
        bulk_rows=args.bulk_rows,
        memory_turns=args.memory_turns,
        task_count=args.task_count,
        sustained_messages=args.sustained_messages,
        callers=args.callers,
        caller_calls=args.caller_calls,
    )
    if args.save and (args.only or args.quick):
        parser.error("--save publishes a whole run: not with --only or --quick")
    if args.quick:
        params = Params(
            enqueue_count=200,
            hot_messages=300,
            warm_actors=50,
            warm_rounds=4,
            cold_actors=100,
            sync_samples=50,
            wakeup_samples=10,
            big_state_messages=100,
            activity_writes=300,
            bulk_rows=2000,
            catch_up_entries=5000,
            raw_seconds=1.0,
            raw_sample_seconds=0.5,
            idle_seconds=5.0,
            task_count=200,
            sustained_messages=1000,
            caller_calls=20,
        )
    aliases = {"contention": "callers"}  # the older name of the concurrent-callers measure
    selected = [aliases.get(name, name) for name in args.only.split(",") if name] or [
        name for name in MEASURES if name not in OPT_IN
    ]
    if "raw" not in selected:
        selected.insert(0, "raw")
    results: list[Result] = []
    failures: list[str] = []
    started = time.time()
    started_at = datetime.now(UTC).isoformat(timespec="seconds")
    for name in selected:
        print(f"… {name}", file=sys.stderr, flush=True)
        try:
            results.extend(run_group(name, params))
        except Exception as exc:
            failures.append(f"{name}: {exc!r}"[:300])
            results.append(Result(f"{name} (FAILED)", float("nan"), "", note=repr(exc)[:200]))
    # The baseline rows: every sample of the run (before and after each measure), with spread.
    results[:0] = baseline_summary()
    database = connection.vendor
    version = _server_version()
    _print_table(database, version, results)
    if args.output:
        output = Path(args.output)
    else:
        # A run with a failed measure is never published.
        publish = args.save and not failures
        folder = ROOT / "bench" / "results" if publish else ROOT / ".bench-results"
        output = folder / f"{database}.json"
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(
        json.dumps(
            {
                "database": database,
                "server_version": version,
                "python": platform.python_version(),
                "django": django.get_version(),
                "cpu_count": os.cpu_count(),
                "quick": args.quick,
                "started_at": started_at,
                "command": ["python", "-m", "bench", *(argv if argv is not None else sys.argv[1:])],
                "commit": _git_commit(),
                "one_run": True,
                "failures": failures,
                "seconds": round(time.time() - started, 1),
                "reference_baseline": RAW1,
                "results": [asdict(r) for r in results],
            },
            indent=2,
            default=str,
        )
        + "\n"
    )
    print(f"\nwritten {output}")
    if failures:
        print("\nFAILED measures (no figure published for them):", file=sys.stderr)
        for failure in failures:
            print(f"  {failure}", file=sys.stderr)
        return 1
    return 0


def _git_commit() -> str:
    import subprocess

    try:
        out = subprocess.run(
            ["git", "-C", str(ROOT), "rev-parse", "HEAD"],
            capture_output=True,
            text=True,
            check=True,
        )
    except (OSError, subprocess.CalledProcessError):
        return ""
    return out.stdout.strip()


def _ensure_database() -> None:
    """Create the PostgreSQL / MariaDB database named in DATABASE_URL when missing."""
    from django.db import connection

    if connection.vendor == "sqlite":
        return
    try:
        connection.ensure_connection()
    except Exception:
        name = connection.settings_dict["NAME"]
        creation = connection.creation
        with creation._nodb_cursor() as cursor:
            cursor.execute(f"CREATE DATABASE {connection.ops.quote_name(name)}")


def _server_version() -> str:
    from django.db import connection

    with connection.cursor() as cursor:
        if connection.vendor == "sqlite":
            cursor.execute("SELECT sqlite_version()")
        else:
            cursor.execute("SELECT version()")
        return str(cursor.fetchone()[0])[:80]


def _print_table(database: str, version: str, results: list) -> None:
    print(f"\n{database} ({version}), {os.cpu_count()} CPUs\n")
    print(f"{'measure':<84} {'value':>12} {'unit':<11} {'ratio':>6}  note")
    print("-" * 130)
    for r in results:
        ratio = f"{r.ratio:.0%}" if r.ratio is not None else ""
        value = f"{r.value:,.1f}" if r.value == r.value else "n/a"
        print(f"{r.name:<84} {value:>12} {r.unit:<11} {ratio:>6}  {r.note}")


if __name__ == "__main__":
    raise SystemExit(main())
