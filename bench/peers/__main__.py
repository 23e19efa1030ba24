"""``python -m bench.peers`` (``make bench-peers``): the project beside the queues a user would
pick instead, on the same database server, alternated round by round in one run.

Each peer is installed from its package registry into its own environment under the
git-ignored ``.bench-peers/`` and driven by a small script run by that environment's
interpreter (``bench/peers/<peer>_side.py``), with the peer's recommended (default) worker
settings. Workloads, the same on both sides, the
same worker processes and threads as the peer's (procrastinate: 2 processes, one job at a
time each; dj-queue: its default, one process with 3 threads):

- ``independent``: N one-off messages, each to its own actor (a task queue's shape), against
  N independent jobs;
- ``ordered``: N messages to one actor, against N jobs sharing one ordering key (procrastinate
  ``lock=``).

Rates are on the database clock (first start to last completion) and every side verifies
its outcome. The result is the median of the per-round project/peer ratios, written to
``.bench-results/peers-<database>.json`` (``--save``: ``bench/results/``). See
``docs/benchmarks.md``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import signal
import statistics
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent.parent
PEERS_DIR = ROOT / ".bench-peers"
PROCRASTINATE = "procrastinate[psycopg]==3.10.0"
DJ_QUEUE = "dj-queue==0.14.2"


def _run(cmd: list[str], **kwargs: Any) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, check=True, text=True, capture_output=True, **kwargs)


def install_procrastinate() -> Path:
    venv = PEERS_DIR / "procrastinate"
    python = venv / "bin" / "python"
    if not python.exists():
        _run([sys.executable, "-m", "venv", str(venv)])
    check = subprocess.run(
        [str(python), "-c", "import procrastinate, psycopg"], capture_output=True, text=True
    )
    if check.returncode:
        _run([str(python), "-m", "pip", "install", "-q", PROCRASTINATE])
    return python


def python_312() -> str | None:
    """An interpreter >= 3.12 (every dj-queue release requires one): on PATH or pyenv's."""
    candidates = [shutil.which(f"python3.{minor}") for minor in (14, 13, 12)]
    candidates += sorted(str(p) for p in Path.home().glob(".pyenv/versions/3.1[2-9]*/bin/python"))
    for candidate in candidates:
        if (
            candidate
            and subprocess.run([candidate, "-c", "pass"], capture_output=True).returncode == 0
        ):
            return candidate
    return None


def install_dj_queue(vendor: str) -> Path:
    venv = PEERS_DIR / "dj-queue"
    python = venv / "bin" / "python"
    if not python.exists():
        base = python_312()
        if base is None:
            raise RuntimeError(
                "every dj-queue release requires Python >= 3.12 and none is installed"
            )
        _run([base, "-m", "venv", str(venv)])
    driver = "psycopg" if vendor == "postgresql" else "MySQLdb"
    check = subprocess.run(
        [str(python), "-c", f"import dj_queue, {driver}"], capture_output=True, text=True
    )
    if check.returncode:
        extra = "psycopg[binary]" if vendor == "postgresql" else "mysqlclient"
        _run([str(python), "-m", "pip", "install", "-q", DJ_QUEUE, extra])
    return python


def why_not_node_sibling() -> str | None:
    npm = shutil.which("npm")
    if npm is None:
        return "no npm on this machine"
    out = subprocess.run(
        [npm, "view", "solid-objects", "version"], capture_output=True, text=True, timeout=120
    )
    if out.returncode:
        first = next((line for line in out.stderr.splitlines() if "404" in line), "")
        return f"the npm registry has no package named solid-objects ({first.strip()[:120]})"
    return None


class Procrastinate:
    name = "procrastinate"
    #: its default worker (concurrency 1), two processes; the project runs the same
    project_workers, project_args = 2, ()

    def __init__(self, python: Path, dsn: str) -> None:
        self.python, self.dsn = python, dsn
        self.script = str(Path(__file__).with_name("procrastinate_side.py"))

    def _side(self, *args: str) -> str:
        cmd = [str(self.python), "-W", "ignore", self.script, self.dsn, *args]
        return _run(cmd).stdout

    def drain(self, workload: str, count: int) -> float:
        self._side("reset")
        self._side("defer", str(count), workload)
        cmd = [str(self.python), "-W", "ignore", self.script, self.dsn, "work"]
        procs = [subprocess.Popen(cmd, stderr=subprocess.DEVNULL) for _ in range(2)]
        for proc in procs:
            if proc.wait(1200):
                raise RuntimeError(f"a procrastinate worker failed (status {proc.returncode})")
        return float(json.loads(self._side("rate", str(count)))["rate"])


class DjQueue:
    name = "dj-queue"
    #: dj-queue's default topology: one worker process with 3 threads; the project the same
    project_workers, project_args = 1, ("--threads", "3")

    def __init__(self, python: Path, url: str) -> None:
        self.python, self.url = python, url
        self.script = str(Path(__file__).with_name("dj_queue_side.py"))

    def _side(self, *args: str) -> str:
        return _run([str(self.python), "-W", "ignore", self.script, self.url, *args]).stdout

    def drain(self, workload: str, count: int) -> float:
        self._side("reset")
        self._side("enqueue", str(count), workload)
        cmd = [str(self.python), "-W", "ignore", self.script, self.url, "work"]
        proc = subprocess.Popen(
            cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
        )
        try:
            deadline = time.monotonic() + 1200
            while json.loads(self._side("rate", str(count), "--count"))["done"] < count:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"dj-queue did not finish (status {proc.poll()})")
                time.sleep(0.5)
        finally:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(60)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        return float(json.loads(self._side("rate", str(count)))["rate"])


def project_drain(workload: str, count: int, peer: Procrastinate | DjQueue) -> tuple[float, float]:
    from bench.measures import _drain

    workers, args = peer.project_workers, peer.project_args
    if workload == "independent":
        rate, statements = _drain("peers independent", count, 1, workers, args=args)
    else:
        rate, statements = _drain("peers ordered", 1, count, workers, args=args)
    return rate.value, statements.value


def _peer_url(database: str, suffix: str) -> str:
    """A database of its own for a peer, on the same server as the project's."""
    from django.db import connection

    s = connection.settings_dict
    name = f"{s['NAME']}_{suffix}"
    with connection.cursor() as cursor:
        if database == "postgresql":
            cursor.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name])
            if cursor.fetchone() is None:
                cursor.execute(f"CREATE DATABASE {connection.ops.quote_name(name)}")
        else:
            cursor.execute(f"CREATE DATABASE IF NOT EXISTS {connection.ops.quote_name(name)}")
    scheme = "postgresql" if database == "postgresql" else "mysql"
    default_user = "postgres" if database == "postgresql" else "root"
    host = s.get("HOST") or "127.0.0.1"
    port = s.get("PORT") or (5432 if database == "postgresql" else 3306)
    password = f":{s['PASSWORD']}" if s.get("PASSWORD") else ""
    return f"{scheme}://{s.get('USER') or default_user}{password}@{host}:{port}/{name}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.peers", description=__doc__)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--messages", type=int, default=1000, help="per workload and round")
    parser.add_argument("--quick", action="store_true", help="2 rounds of 200 messages")
    parser.add_argument("--save", action="store_true", help="write bench/results/peers-<db>.json")
    args = parser.parse_args(argv)
    if args.save and args.quick:
        parser.error("--save publishes a whole run: not with --quick")
    if args.quick:
        args.rounds, args.messages = 2, 200

    sys.path.insert(0, str(ROOT))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "bench.settings")
    import django

    django.setup()
    from django.core.management import call_command
    from django.db import connection

    from bench import statements
    from bench.__main__ import _ensure_database, _git_commit, _server_version
    from bench.measures import RAW1, _raw_tables, sample

    statements.install()
    _ensure_database()
    call_command("migrate", verbosity=0)
    database = connection.vendor
    not_run: dict[str, str] = {}
    if reason := why_not_node_sibling():
        not_run["solid-objects (npm)"] = reason
    peers: list[Procrastinate | DjQueue] = []
    if database == "sqlite":
        not_run["dj-queue (PyPI)"] = "not compared on SQLite (one file, no shared server)"
    else:
        try:
            peers.append(DjQueue(install_dj_queue(database), _peer_url(database, "djq")))
        except (RuntimeError, subprocess.CalledProcessError) as exc:
            not_run["dj-queue (PyPI)"] = str(getattr(exc, "stderr", "") or exc)[-300:]
    if database == "postgresql":
        peers.append(Procrastinate(install_procrastinate(), _peer_url(database, "peers")))
    else:
        not_run["procrastinate (PyPI)"] = "procrastinate runs on PostgreSQL only"
    for peer_name, reason in not_run.items():
        print(f"not run: {peer_name}: {reason}", file=sys.stderr)

    started = time.time()
    started_at = datetime.now(UTC).isoformat(timespec="seconds")
    _raw_tables()
    rounds: list[dict[str, Any]] = []
    for number in range(args.rounds):
        for peer in peers:
            for workload in ("independent", "ordered"):
                print(f"… round {number + 1}: {workload} vs {peer.name}", file=sys.stderr)
                raw = sample(RAW1)
                if number % 2 == 0:
                    ours, per_message = project_drain(workload, args.messages, peer)
                    theirs = peer.drain(workload, args.messages)
                else:
                    theirs = peer.drain(workload, args.messages)
                    ours, per_message = project_drain(workload, args.messages, peer)
                rounds.append(
                    {
                        "round": number + 1,
                        "peer": peer.name,
                        "workload": workload,
                        "project": round(ours, 1),
                        "peer_rate": round(theirs, 1),
                        "ratio": ours / theirs,
                        "workers": f"{peer.project_workers} process(es) {peer.project_args}",
                        "project_statements_per_message": round(per_message, 2),
                        "raw_update_loop": round(raw, 1),
                    }
                )
    summary = []
    for peer in peers:
        for workload in ("independent", "ordered"):
            mine = [r for r in rounds if r["peer"] == peer.name and r["workload"] == workload]
            summary.append(
                {
                    "peer": peer.name,
                    "workload": workload,
                    "median_ratio": statistics.median(r["ratio"] for r in mine),
                    "ratios": [round(r["ratio"], 2) for r in mine],
                    "project_median": statistics.median(r["project"] for r in mine),
                    "peer_median": statistics.median(r["peer_rate"] for r in mine),
                }
            )
    print(f"\n{database} ({_server_version()}), {os.cpu_count()} CPUs\n")
    print(f"{'peer':<16} {'workload':<12} {'project/s':>10} {'peer/s':>10} {'ratio':>7}  rounds")
    for row in summary:
        print(
            f"{row['peer']:<16} {row['workload']:<12} {row['project_median']:>10,.1f} "
            f"{row['peer_median']:>10,.1f} {row['median_ratio']:>6.2f}x  {row['ratios']}"
        )
    for peer_name, reason in not_run.items():
        print(f"{peer_name:<16} not run: {reason}")
    folder = ROOT / "bench" / "results" if args.save else ROOT / ".bench-results"
    folder.mkdir(parents=True, exist_ok=True)
    output = folder / f"peers-{database}.json"
    output.write_text(
        json.dumps(
            {
                "database": database,
                "server_version": _server_version(),
                "python": platform.python_version(),
                "cpu_count": os.cpu_count(),
                "started_at": started_at,
                "command": ["python", "-m", "bench.peers", *(argv or sys.argv[1:])],
                "commit": _git_commit(),
                "one_run": True,
                "workers": {p.name: [p.project_workers, list(p.project_args)] for p in peers},
                "messages": args.messages,
                "peers": {"procrastinate": PROCRASTINATE, "dj-queue": DJ_QUEUE},
                "not_run": not_run,
                "summary": summary,
                "rounds": rounds,
                "seconds": round(time.time() - started, 1),
            },
            indent=2,
            default=str,
        )
        + "\n"
    )
    print(f"\nwritten {output}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
