"""One restart run against a private server (:mod:`.servers`), with real processes:

1. two ``run_actor_worker`` processes (one with ``--threads 2``) and the load process
   (:mod:`.load`: sync callers and an enqueuer) start on the private server;
2. once work flows, the server is restarted ``len(schedule)`` times, fast and immediate in
   turn: stopped, kept down ``HOLD_DOWN`` seconds (so callers meet the outage), started again;
   after each start the run waits (bounded) until every caller thread has made a successful
   call and the workers have completed more messages;
3. the load stops; the workers, never restarted, drain what is left; they are stopped with
   SIGTERM and must exit 0;
4. the rows are checked (:func:`violations`) and the figures gathered (:func:`figures`).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from solid_objects.conf import table
from tests.support import processes
from tests.support.processes import Commands
from tests.support.waiting import wait_until

from .servers import PrivateServer

REPO_ROOT = Path(__file__).resolve().parents[3]
#: The private server's database name.
DATABASE = "restart"
#: Seconds the server stays down at each restart (callers must meet the outage).
HOLD_DOWN = 1.0
#: Upper bound of every wait of the run (seconds); the machine is shared and slow.
PATIENCE = 60.0
#: After a restart, every caller thread must have a successful call within this (seconds).
RECOVERY_BOUND = 15.0
#: Between restarts the load runs at least this long (seconds).
RUN_BETWEEN = 2.0
#: Worker and load settings: quick polling and heartbeats, a short lease so that even a
#: lease the library could not give back (see solid_objects.db.connections) expires soon.
SETTINGS: dict[str, Any] = {
    "POLLING_INTERVAL": 0.05,
    "IDLE_POLLING_INTERVAL": 0.25,
    "PROCESS_HEARTBEAT_INTERVAL": 0.5,
    "PROCESS_ALIVE_THRESHOLD": 5.0,
    "LEASE_DURATION": 10.0,
    "LEASE_RENEWAL_INTERVAL": 3.0,
    "SYNC_TIMEOUT": 5.0,
}
PLAN: dict[str, Any] = {
    "callers": 3,
    "actors_per_caller": 2,
    "async_actors": 8,
    "enqueue_rate": 150.0,
    "seconds": 240.0,  # an upper bound: the test closes the load's stdin long before
}
SCHEDULE = ("fast", "immediate", "fast", "immediate", "fast", "immediate")


def on_server(
    server: PrivateServer, database: str = DATABASE, host: str | None = None
) -> dict[str, str]:
    """What the suite's children need besides the usual environment to use ``database`` of
    the server (through ``host``, one of its addresses)."""
    return {
        "DATABASE_URL": server.url(database, host),
        "DJANGO_SETTINGS_MODULE": "tests.settings",
    }


def migrate(server: PrivateServer, database: str = DATABASE) -> None:
    """Create ``database`` and migrate the project's schema into it."""
    server.create_database(database)
    done = subprocess.run(
        [sys.executable, "tests/manage.py", "migrate", "--noinput", "-v", "0"],
        cwd=REPO_ROOT,
        env=processes.environment(database, SETTINGS, "INFO", on_server(server, database)),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"migrate failed:\n{done.stdout}\n{done.stderr}")


@dataclass
class Restart:
    mode: str
    down_at: float
    up_at: float = 0.0

    @property
    def outage(self) -> float:
        return self.up_at - self.down_at


@dataclass
class Run:
    """The processes of one run; :meth:`kill_all` (the fixture's finalizer) ends them."""

    server: PrivateServer
    directory: Path
    workers: list[subprocess.Popen[bytes]] = field(default_factory=list)
    load: subprocess.Popen[bytes] | None = None
    restarts: list[Restart] = field(default_factory=list)
    worker_rows: dict[int, set[str]] = field(default_factory=dict)
    report: dict[str, Any] = field(default_factory=dict)
    #: Size of each worker's log when the server came back the last time.
    log_offsets: dict[int, int] = field(default_factory=dict)
    #: Starts (and at the end kills) every process of the run, on the private server.
    processes: Commands = field(init=False)

    def __post_init__(self) -> None:
        self.processes = Commands(self.directory, DATABASE, on_server(self.server))

    # -- processes -------------------------------------------------------------------------
    def start_worker(self, *args: str) -> subprocess.Popen[bytes]:
        # DEBUG: the signal log names the owner of every activation claimed.
        proc = self.processes.start("run_actor_worker", *args, settings=SETTINGS, log_level="DEBUG")
        self.workers.append(proc)
        return proc

    def start_load(self) -> None:
        self.load = self.processes.start_program(
            [
                "-m",
                "tests.adversarial.restart.load",
                json.dumps(PLAN),
                str(self.directory / "load.json"),
            ],
            name="load",
            settings=SETTINGS,
            log_level="ERROR",
            stdin=subprocess.PIPE,
        )

    def stop_load(self) -> dict[str, Any]:
        assert self.load is not None and self.load.stdin is not None
        self.load.stdin.close()
        try:
            code = self.load.wait(PATIENCE)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"the load did not stop:\n{self.logs()}") from None
        assert code == 0, f"the load exited with {code}:\n{self.logs()}"
        self.report = json.loads((self.directory / "load.json").read_text())
        return self.report

    def stop_workers(self) -> list[int]:
        for proc in self.workers:
            proc.send_signal(signal.SIGTERM)
        codes = []
        for proc in self.workers:
            try:
                codes.append(proc.wait(PATIENCE))
            except subprocess.TimeoutExpired:
                raise AssertionError(f"worker {proc.pid} did not stop:\n{self.logs()}") from None
        return codes

    def worker_log(self, proc: subprocess.Popen[bytes]) -> Path:
        return self.processes.log_path(proc)

    def claims_since_last_restart(self) -> dict[int, int]:
        """Activations each worker process claimed after the server came back the last time
        (counted in its log past the offset noted then)."""
        counts = {}
        for proc in self.workers:
            with self.worker_log(proc).open("rb") as log:
                log.seek(self.log_offsets.get(proc.pid, 0))
                counts[proc.pid] = log.read().count(b"activation_claimed ")
        return counts

    def kill_all(self) -> None:
        self.processes.kill_all()

    def logs(self) -> str:
        parts = []
        for path in sorted(self.directory.glob("*.log")):
            lines = path.read_text(errors="replace").splitlines()
            parts.append(f"--- {path.name} (last 30 lines) ---\n" + "\n".join(lines[-30:]))
        parts.append(f"--- server log ---\n{self.server.log_tail()}")
        return "\n".join(parts)

    # -- the database, read directly ---------------------------------------------------------
    def query(self, sql: str, params: list[Any] | None = None) -> list[tuple[Any, ...]]:
        connection = self.server.connect(DATABASE)
        try:
            cursor = connection.cursor()
            cursor.execute(sql, params or [])
            return list(cursor.fetchall())
        finally:
            connection.close()

    def completed_messages(self) -> int:
        return int(
            self.query(f"SELECT COUNT(*) FROM {table('messages')} WHERE completed_at IS NOT NULL")[
                0
            ][0]
        )

    def running_worker_rows(self) -> dict[int, set[str]]:
        pids = [proc.pid for proc in self.workers]
        marks = ", ".join(["%s"] * len(pids))
        rows = self.query(
            f"SELECT pid, id FROM {table('processes')} WHERE kind = 'worker' "
            f"AND shutdown_state = 'running' AND pid IN ({marks})",
            pids,
        )
        found: dict[int, set[str]] = {}
        for pid, row_id in rows:
            found.setdefault(int(pid), set()).add(str(row_id))
        return found

    # -- waiting ------------------------------------------------------------------------------
    def wait(self, predicate: Any, what: str, timeout: float = PATIENCE) -> Any:
        """:func:`wait_until` ``predicate`` holds; an error of ``predicate`` counts as not
        yet (the server may still be starting), a worker that exits fails at once."""

        def checked() -> Any:
            try:
                value = predicate()
            except Exception:  # the server may still be starting: try again
                value = None
            for proc in self.workers:
                if not value and proc.poll() is not None:
                    raise AssertionError(
                        f"worker {proc.pid} exited with {proc.returncode}:\n{self.logs()}"
                    )
            return value

        return wait_until(checked, timeout, interval=0.1, what=what, details=self.logs)

    def sync_progress(self) -> dict[str, int]:
        """Completed sync messages per caller thread (the load's records are only known at
        its end; while it runs, progress is read from the rows)."""
        counts: dict[str, int] = {}
        for actor_id, count in self.query(
            f"SELECT actor_id, COUNT(*) FROM {table('messages')} WHERE delivery_mode = 'sync' "
            "AND completed_at IS NOT NULL GROUP BY actor_id"
        ):
            caller = str(actor_id).rsplit("-", 1)[0]  # restart-sync-<t>-<k> -> restart-sync-<t>
            counts[caller] = counts.get(caller, 0) + int(count)
        return counts

    # -- the run ------------------------------------------------------------------------------
    def execute(self, schedule: tuple[str, ...] = SCHEDULE) -> None:
        self.start_worker()
        self.start_worker("--threads", "2")
        self.worker_rows = self.wait(
            lambda: (rows := self.running_worker_rows()) and len(rows) == 2 and rows,
            "both workers to register",
        )
        self.start_load()
        self.wait(lambda: self.completed_messages() >= 100, "the load to get going")
        for mode in schedule:
            before = self.completed_messages()
            ran_until = time.monotonic() + RUN_BETWEEN
            self.wait(
                lambda before=before, ran_until=ran_until: (
                    self.completed_messages() >= before + 50 and time.monotonic() >= ran_until
                ),
                "work between restarts",
            )
            progress = self.sync_progress()
            restart = Restart(mode, down_at=time.time())
            self.server.stop(mode)
            threading.Event().wait(HOLD_DOWN)  # the outage itself, not a synchronisation
            self.server.start()
            restart.up_at = time.time()
            self.restarts.append(restart)
            self.log_offsets = {p.pid: self.worker_log(p).stat().st_size for p in self.workers}
            self.wait(
                lambda progress=progress: self._every_caller_progressed(progress),
                "every caller thread to complete a call again",
                timeout=RECOVERY_BOUND,
            )
            after = self.completed_messages()
            self.wait(
                lambda after=after: self.completed_messages() >= after + 50, "workers to recover"
            )
        # The same worker processes, never restarted, each take work again after the last one.
        self.wait(
            lambda: all(self.claims_since_last_restart().values()),
            "every worker to claim an activation after the last restart",
        )

    def _every_caller_progressed(self, before: dict[str, int]) -> bool:
        now = self.sync_progress()
        return len(now) == PLAN["callers"] and all(
            now[caller] > before.get(caller, 0) for caller in now
        )

    def drain(self) -> None:
        def empty() -> bool:
            left = self.query(
                f"SELECT (SELECT COUNT(*) FROM {table('ready_messages')}) + "
                f"(SELECT COUNT(*) FROM {table('claimed_messages')})"
            )[0][0]
            return int(left) == 0

        self.wait(empty, "the workers to drain every mailbox")


# -- checks and figures ---------------------------------------------------------------------------
def _decode(value: Any) -> Any:
    if isinstance(value, (bytes, str)):
        return json.loads(value)
    return value


def violations(run: Run) -> list[str]:
    """Everything that breaks the promises, from the rows and the load's records."""
    found: list[str] = []
    report = run.report
    calls = report["calls"]
    raw = [c for c in calls if c["outcome"] == "raw"]
    if raw:
        found.append(f"{len(raw)} calls raised raw errors, e.g. {raw[0]['error']}")
        found.extend(report["tracebacks"][:3])
    if report["alive_threads"]:
        found.append(f"load threads did not stop: {report['alive_threads']}")
    for call in calls:
        if call["kind"] == "sync" and call["outcome"] == "ok" and call["result"] != call["n"]:
            found.append(f"{call['actor']}: append({call['n']}) returned {call['result']}")
    found.extend(_after_restart_failures(run))

    instances = {
        actor_id: (instance_id, _decode(state), int(revision))
        for instance_id, actor_id, state, revision in run.query(
            f"SELECT id, actor_id, state, state_revision FROM {table('instances')} "
            "WHERE actor_id LIKE 'restart-%%'"
        )
    }
    messages: dict[int, list[tuple[int, int, bool, bool]]] = {}
    for instance_id, sequence, arguments, completed, rejected in run.query(
        f"SELECT instance_id, sequence, arguments, completed_at IS NOT NULL, "
        f"rejected_at IS NOT NULL FROM {table('messages')} ORDER BY instance_id, sequence"
    ):
        n = _decode(arguments)["n"]
        messages.setdefault(int(instance_id), []).append(
            (int(sequence), n, bool(completed), bool(rejected))
        )
    for actor, progress in sorted(report["actors"].items()):
        if actor not in instances:
            if progress["last_ok"]:
                found.append(f"{actor}: no instance row")
            continue
        instance_id, state, revision = instances[actor]
        seen = (state or {}).get("seen", [])
        last_ok, pending = progress["last_ok"], progress["pending"]
        allowed = [list(range(1, last_ok + 1))]
        if pending is not None:
            allowed.append(list(range(1, pending + 1)))
        if seen not in allowed:
            found.append(f"{actor}: seen {_short(seen)}, expected 1..{last_ok} (pending {pending})")
        rows = messages.get(instance_id, [])
        if [n for _, n, _, _ in rows] != seen:
            found.append(f"{actor}: messages carry {_short([n for _, n, _, _ in rows])} != seen")
        if not all(completed and not rejected for _, _, completed, rejected in rows):
            found.append(f"{actor}: a message is not completed")
        if rows and revision != rows[-1][0]:
            found.append(f"{actor}: state_revision {revision} != last sequence {rows[-1][0]}")
    for name in ("ready_messages", "claimed_messages", "dead_letters"):
        count = int(run.query(f"SELECT COUNT(*) FROM {table(name)}")[0][0])
        if count:
            found.append(f"{count} rows left in {name}")
    return found


def _after_restart_failures(run: Run) -> list[str]:
    """A call that started after the server was back (and ended before the next outage) must
    not fail for the connection: the library recovered it by itself. And every caller
    thread made a successful call soon after each restart."""
    found = []
    calls = run.report["calls"]
    for restart in run.restarts:
        for thread in range(PLAN["callers"]):
            if not any(
                c["kind"] == "sync"
                and c["thread"] == thread
                and c["outcome"] == "ok"
                and restart.up_at <= c["end"] <= restart.up_at + RECOVERY_BOUND
                for c in calls
            ):
                found.append(
                    f"caller {thread}: no successful call within {RECOVERY_BOUND:.0f}s after "
                    f"the {restart.mode} restart"
                )
    windows = [
        (restart.up_at, later.down_at if later else float("inf"))
        for restart, later in zip(run.restarts, [*run.restarts[1:], None], strict=True)
    ]
    for call in run.report["calls"]:
        if call["outcome"] == "ok" or call.get("error") != "DatabaseUnavailable":
            continue
        for up_at, next_down in windows:
            if up_at <= call["start"] and call["end"] < next_down:
                found.append(
                    f"{call['actor']} ({call['kind']}) failed with DatabaseUnavailable "
                    f"{call['start'] - up_at:.2f}s after the server was back"
                )
    return found


def _short(values: list[Any]) -> str:
    return repr(values) if len(values) <= 12 else f"[{values[0]}..{values[-1]}] ({len(values)})"


def figures(run: Run, vendor: str) -> dict[str, Any]:
    calls = run.report["calls"]

    def count(kind: str, outcome: str, error: str | None = None) -> int:
        return sum(
            1
            for c in calls
            if c["kind"] == kind
            and c["outcome"] == outcome
            and (error is None or c.get("error") == error)
        )

    during = 0
    for call in calls:
        if call["outcome"] == "typed" and any(
            r.down_at <= call["end"] and call["start"] <= r.up_at for r in run.restarts
        ):
            during += 1
    messages = int(run.query(f"SELECT COUNT(*) FROM {table('messages')}")[0][0])
    return {
        "vendor": vendor,
        "restarts": len(run.restarts),
        "fast": sum(1 for r in run.restarts if r.mode == "fast"),
        "immediate": sum(1 for r in run.restarts if r.mode == "immediate"),
        "outage_seconds": [round(r.outage, 2) for r in run.restarts],
        "outage_total_seconds": round(sum(r.outage for r in run.restarts), 2),
        "sync_ok": count("sync", "ok"),
        "sync_failed_typed": count("sync", "typed"),
        "sync_database_unavailable": count("sync", "typed", "DatabaseUnavailable"),
        "sync_timeouts": count("sync", "typed", "SyncTimeout"),
        "enqueue_ok": count("enqueue", "ok"),
        "enqueue_failed_typed": count("enqueue", "typed"),
        "typed_failures_overlapping_an_outage": during,
        "raw_errors": count("sync", "raw") + count("enqueue", "raw"),
        "messages": messages,
        "worker_pids": [proc.pid for proc in run.workers],
        "worker_claims_after_last_restart": list(run.claims_since_last_restart().values()),
    }


def summary(figures: dict[str, Any]) -> str:
    return (
        f"restart {figures['vendor']}: {figures['restarts']} restarts ({figures['fast']} fast, "
        f"{figures['immediate']} immediate), outages {figures['outage_seconds']} s "
        f"(total {figures['outage_total_seconds']} s); sync calls ok {figures['sync_ok']}, "
        f"failed typed {figures['sync_failed_typed']} (DatabaseUnavailable "
        f"{figures['sync_database_unavailable']}, SyncTimeout {figures['sync_timeouts']}); "
        f"enqueues ok {figures['enqueue_ok']}, failed typed {figures['enqueue_failed_typed']}; "
        f"raw errors {figures['raw_errors']}; messages {figures['messages']}; "
        f"workers {figures['worker_pids']} never restarted, activations claimed after the "
        f"last restart {figures['worker_claims_after_last_restart']}"
    )


def merge_report(figures: dict[str, Any]) -> None:
    """Merge the figures into the JSON file named by ``SOLID_RESTART_REPORT``, if set."""
    path = os.environ.get("SOLID_RESTART_REPORT")
    if not path:
        return
    target = Path(path)
    existing = json.loads(target.read_text()) if target.exists() else {}
    existing[figures["vendor"]] = figures
    target.write_text(json.dumps(existing, indent=2, sort_keys=True))
