"""The SIGKILL soak driver: real ``run_actor_worker`` processes killed at random under load.

One run (:meth:`Soak.run`):

1. enqueue a first load (one message to every actor, then random ones);
2. start ``profile.workers`` workers, then for ``seconds`` (and at most ``max_kills`` kills)
   keep enqueuing so that about ``profile.backlog`` messages are always waiting (the workers
   stay busy, so kills land in the middle of turns; at most ``profile.max_messages`` in all)
   and SIGKILL a random worker every 0.5-2 s, starting its replacement at once (a worker
   that exits by itself is a violation, and is replaced too);
3. stop the survivors with SIGTERM (graceful release under load; each must exit 0);
4. start one clean worker and wait (bounded) until the mailboxes are empty, every dead
   process was cleaned up and no lease is held by anyone else; then stop it with SIGTERM;
5. check the invariants (:mod:`.invariants`) and gather the figures.

The short lease and alive threshold make both recovery paths frequent: a live worker takes
an expired lease and recovers the claim its dead owner left (``stale claim recovered``), and
the supervisors' dead-process cleanup (every ``PROCESS_ALIVE_THRESHOLD`` seconds) releases
what the dead still hold. The test process runs that cleanup too, every
``profile.cleanup_every`` seconds during the kill phase (:class:`Cleaner`), so that cleanup
meets takeovers and recoveries in flight, and half the kills it aims a cleanup at the moment
the dead worker's claimed lease expires (the interleaving of issue 9, defect 1, which it found
in each of three runs of the code before that fix). Each worker draws its own lease duration from
``profile.leases``: with the shortest, takeover comes well before cleanup; with the longest,
a dead worker's lease expires about when cleanup finds it dead, and the two race for the same
claims. Both paths are counted (from the workers' logs and the test's cleaner).

Randomness comes from one seed: the kill intervals and victims from one generator, the
message targets, the leases and the aimed cleanups from others. Kills happen at wall-clock
times, so a seed fixes the schedule of intervals and victims, not the exact instructions each
kill interrupts.
"""

from __future__ import annotations

import json
import math
import os
import random
import signal
import subprocess
import threading
import time
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from django.db import DatabaseError, connections
from django.db.models import Max, Min, Sum
from django.utils import timezone

from solid_objects.models import ClaimedMessage, DeadLetter, Instance, Message, ReadyMessage
from solid_objects.models import Process as ProcessRow
from solid_objects.runtime import processes
from solid_objects.shards import databases
from tests.runtime.helpers import Worker, start_thread
from tests.support.processes import Commands
from tests.testapp.actors.soak import SoakCounter

from .invariants import violations
from .ledger import FAIL, REJECT, Ledger

#: Seconds between kills are drawn uniformly from this range.
KILL_INTERVAL = (0.5, 2.0)
#: Main loop period (seconds): how often the loop looks at the clock, the workers and the rate.
TICK = 0.05
#: Messages enqueued during the kill phase go in batches of at most this many.
BATCH = 100
#: How often the kill phase looks at the backlog (seconds).
BACKLOG_EVERY = 0.25
#: Messages per transaction in the first load.
FIRST_LOAD_BATCH = 250
#: The cleaner's own loop period, and how long after a killed worker's lease expires (a
#: random delay in this range) its aimed cleanup runs (seconds).
AIM_TICK = 0.005
AIM_DELAY = (0.0, 0.06)
#: The share of killed workers the cleaner aims at.
AIM_SHARE = 0.5
#: An aimed cleanup never takes a process silent for less than this for dead (the workers
#: heartbeat every 0.5 s).
AIM_MIN_THRESHOLD = 1.0
#: Unexpected worker exits reported with their log tail (the others by one line).
LOGGED_EXITS = 3
#: Seconds a new worker may take to register its process row.
STARTUP_PATIENCE = 60.0
#: Stored on every message at enqueue: kills alone must never exhaust a message's attempts.
MAX_ATTEMPTS = 1000


@dataclass(frozen=True)
class Mode:
    """How the workers run: extra command-line arguments and settings."""

    name: str
    args: tuple[str, ...] = ()
    settings: dict[str, Any] = field(default_factory=dict)


MODES = (
    Mode("grouped", settings={"MAX_TURNS_PER_COMMIT": 16}),
    Mode("max-turns-1", settings={"MAX_TURNS_PER_COMMIT": 1}),
    Mode("threads-2", args=("--threads", "2")),
)
#: The aliases of the sharded mode (tests/settings.py defines ``shard_b``).
SHARDS = ("default", "shard_b")
#: Actors on two shards, every worker serving both (one supervisor per shard in each).
SHARDED_MODES = (Mode("sharded", settings={"MAX_TURNS_PER_COMMIT": 16, "DATABASES": SHARDS}),)


@dataclass(frozen=True)
class Profile:
    """The load of one database: how many actors and messages, how many workers at a time,
    and how short the lease and the alive threshold are."""

    actors: int
    first_load: int  # messages enqueued before the first worker starts
    backlog: int  # ready messages kept waiting while workers are being killed
    max_messages: int  # bound on all messages of a run
    workers: int
    leases: tuple[float, ...]  # each worker's LEASE_DURATION is one of these (renewed every third)
    alive: float  # PROCESS_ALIVE_THRESHOLD, hence the supervisors' cleanup cadence too
    cleanup_every: float  # the test process's own dead-process cleanup cadence


PROFILES = {
    "postgresql": Profile(
        actors=200,
        first_load=1500,
        backlog=400,
        max_messages=20_000,
        workers=3,
        leases=(1.0, 1.5, 2.0, 3.0),
        alive=3.0,
        cleanup_every=0.02,
    ),
    "mysql": Profile(
        actors=200,
        first_load=1500,
        backlog=400,
        max_messages=20_000,
        workers=3,
        leases=(1.0, 1.5, 2.0, 3.0),
        alive=3.0,
        cleanup_every=0.02,
    ),
    # One writer at a time: two workers, leases that outlast lock waits, and the test's own
    # cleanup less often (each one is a write transaction).
    "sqlite": Profile(
        actors=150,
        first_load=1000,
        backlog=300,
        max_messages=15_000,
        workers=2,
        leases=(3.0, 4.0, 5.0),
        alive=5.0,
        cleanup_every=0.25,
    ),
}


def env_float(name: str, default: float) -> float:
    value = os.environ.get(name, "").strip()
    return float(value) if value else default


def soak_seconds() -> float:
    """Seconds of killing per database and mode (``SOLID_SOAK_SECONDS``, default 50)."""
    return env_float("SOLID_SOAK_SECONDS", 50.0)


def soak_seed() -> int:
    """``SOLID_SOAK_SEED`` to replay a schedule; otherwise a fresh one (printed)."""
    value = os.environ.get("SOLID_SOAK_SEED", "").strip()
    return int(value) if value else random.SystemRandom().randrange(2**32)


class Cleaner:
    """Dead-process cleanup run by the test process in a thread of its own, on top of the
    workers' supervisors, so that it meets lease takeovers and recoveries far more often.

    Every ``interval`` seconds it runs the ordinary cleanup (``PROCESS_ALIVE_THRESHOLD``).
    Besides, half the killed workers are *aimed at* (:meth:`aim`): when the lease of an instance it
    still had a claim on expires, plus a random few milliseconds, the cleaner runs a cleanup
    whose threshold makes that worker dead at that very moment, which is when a live worker
    takes the expired lease over and recovers the claim (the interleaving of issue 9,
    defect 1)."""

    def __init__(self, interval: float, threshold: float, rng: random.Random) -> None:
        self.interval = interval
        self.threshold = threshold
        self.rng = rng
        self.runs = 0
        self.cleaned = 0
        self.aimed = 0  # aimed cleanups run
        self.errors: list[str] = []
        #: (alias, killed pid) -> when to clean it up there
        self._targets: dict[tuple[str, int], datetime | None] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: Worker | None = None

    def start(self) -> None:
        self._thread = start_thread(self._loop, name="soak-cleaner")

    def aim(self, pid: int) -> None:
        """Aim at a killed worker, or (one time in two) leave it to lease takeover and the
        ordinary cleanups."""
        if self.rng.random() >= AIM_SHARE:
            return
        with self._lock:
            for shard in databases():  # a worker has rows on every shard it serves
                self._targets[(shard, pid)] = None

    def _loop(self) -> None:
        next_run = time.monotonic() + self.interval
        while not self._stop.wait(AIM_TICK):
            try:
                self._aimed_cleanups()
                if time.monotonic() >= next_run:
                    next_run = time.monotonic() + self.interval
                    for shard in databases():
                        self.cleaned += len(processes.cleanup_dead(shard, self.threshold))
                    self.runs += 1
            except DatabaseError as exc:  # as the supervisor does: note it, carry on
                self.errors.append(repr(exc))
                for shard in databases():
                    connections[shard].close()

    def _aimed_cleanups(self) -> None:
        with self._lock:
            targets = dict(self._targets)
        for (shard, pid), due in targets.items():
            row = (
                ProcessRow.objects.using(shard)
                .filter(pid=pid, kind="worker")
                .exclude(shutdown_state=ProcessRow.ShutdownState.STOPPED)
                .values("id", "last_heartbeat_at")
                .first()
            )
            if row is None:  # never registered, or cleaned up already
                self._forget(shard, pid)
                continue
            if due is None:
                claimed = (
                    ClaimedMessage.objects.using(shard)
                    .filter(process_id=row["id"])
                    .values("instance_id")
                )
                expiry = (
                    Instance.objects.using(shard)
                    .filter(id__in=claimed, activation_owner_id=row["id"])
                    .aggregate(first=Min("activation_expires_at"))["first"]
                )
                if expiry is None:  # no stale claim left to race for
                    self._forget(shard, pid)
                    continue
                due = expiry + timedelta(seconds=self.rng.uniform(*AIM_DELAY))
                with self._lock:
                    self._targets[(shard, pid)] = due
            now = timezone.now()
            if now < due:
                continue
            silent = (now - row["last_heartbeat_at"]).total_seconds()
            threshold = max(AIM_MIN_THRESHOLD, silent - 0.01)
            self.cleaned += len(processes.cleanup_dead(shard, threshold))
            self.aimed += 1
            self._forget(shard, pid)

    def _forget(self, shard: str, pid: int) -> None:
        with self._lock:
            self._targets.pop((shard, pid), None)

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.outcome()


class DrainTimeout(AssertionError):
    """The clean worker did not finish the work in time."""


class Soak:
    def __init__(
        self,
        workers: Commands,
        vendor: str,
        mode: Mode,
        *,
        seconds: float,
        seed: int,
        profile: Profile | None = None,
        drain_seconds: float | None = None,
    ) -> None:
        self.workers = workers
        self.vendor = vendor
        self.mode = mode
        self.seconds = seconds
        self.seed = seed
        self.profile = profile or PROFILES[vendor]
        self.drain_seconds = drain_seconds or env_float("SOLID_SOAK_DRAIN_SECONDS", 300.0)
        self.max_kills = math.ceil(seconds / KILL_INTERVAL[0]) + 1
        self.kill_rng = random.Random(seed)
        self.lease_rng = random.Random(seed * 7919 + 2)
        self.leases: dict[int, float] = {}  # pid -> the worker's LEASE_DURATION
        self.ledger = Ledger(self.profile.actors, random.Random(seed * 7919 + 1))
        self.live: list[subprocess.Popen[bytes]] = []
        self.kill_schedule: list[tuple[float, int]] = []  # (seconds into the phase, pid)
        self.problems: list[str] = []  # the workers' own misbehaviour (exits, stops)
        self.started = 0
        self.exits = 0  # workers that exited without being killed
        self.first_load = 0
        self.timings: dict[str, float] = {}
        self.cleaner = Cleaner(
            self.profile.cleanup_every, self.profile.alive, random.Random(seed * 7919 + 3)
        )

    # -- settings -----------------------------------------------------------------------------
    def worker_settings(self, lease: float | None = None) -> dict[str, Any]:
        lease = lease or max(self.profile.leases)
        return {
            "POLLING_INTERVAL": 0.05,
            "IDLE_POLLING_INTERVAL": 0.25,
            "PROCESS_HEARTBEAT_INTERVAL": 0.5,
            "PROCESS_ALIVE_THRESHOLD": self.profile.alive,
            "LEASE_DURATION": lease,
            "LEASE_RENEWAL_INTERVAL": round(lease / 3, 3),
            "SHUTDOWN_TIMEOUT": 15.0,
            "MAX_ATTEMPTS": MAX_ATTEMPTS,
            **self.mode.settings,
        }

    # -- the run ------------------------------------------------------------------------------
    def run(self) -> dict[str, Any]:
        began = time.monotonic()
        self.ledger.every_actor_once()
        while len(self.ledger) < self.profile.first_load:
            self.ledger.random_messages(
                min(FIRST_LOAD_BATCH, self.profile.first_load - len(self.ledger))
            )
        self.first_load = len(self.ledger)
        self.timings["first_load"] = time.monotonic() - began
        for _ in range(self.profile.workers):
            self.live.append(self._start())
        killing = time.monotonic()
        self.cleaner.start()
        try:
            self._kill_phase()
        finally:
            self.cleaner.stop()
        self.timings["killing"] = time.monotonic() - killing
        stopping = time.monotonic()
        self._stop_survivors()
        self.timings["graceful_stop"] = time.monotonic() - stopping
        draining = time.monotonic()
        self._drain()
        self.timings["drain"] = time.monotonic() - draining
        self.timings["total"] = time.monotonic() - began
        found = self.problems + violations(self.ledger)
        return self.figures(found)

    def _start(self) -> subprocess.Popen[bytes]:
        self.started += 1
        lease = self.lease_rng.choice(self.profile.leases)
        proc = self.workers.start(
            "run_actor_worker", *self.mode.args, settings=self.worker_settings(lease)
        )
        self.leases[proc.pid] = lease
        return proc

    def _kill_phase(self) -> None:
        start = time.monotonic()
        deadline = start + self.seconds
        next_kill = start + self.kill_rng.uniform(*KILL_INTERVAL)
        next_look = start
        tick = threading.Event()
        while time.monotonic() < deadline and len(self.kill_schedule) < self.max_kills:
            self._replace_exited()
            if time.monotonic() >= next_look:
                next_look = time.monotonic() + BACKLOG_EVERY
                self._top_up()
            if time.monotonic() >= next_kill:
                self._kill_one(time.monotonic() - start)
                next_kill = time.monotonic() + self.kill_rng.uniform(*KILL_INTERVAL)
            tick.wait(TICK)

    def _top_up(self) -> None:
        """Enqueue (one batch) what keeps ``profile.backlog`` messages waiting."""
        room = self.profile.max_messages - len(self.ledger)
        ready = sum(ReadyMessage.objects.using(shard).count() for shard in databases())
        wanted = min(self.profile.backlog - ready, BATCH, room)
        if wanted > 0:
            self.ledger.random_messages(wanted)

    def _kill_one(self, at: float) -> None:
        victim = self.live.pop(self.kill_rng.randrange(len(self.live)))
        if victim.poll() is None:
            os.kill(victim.pid, signal.SIGKILL)
        victim.wait(30)
        self.kill_schedule.append((round(at, 2), victim.pid))
        self.cleaner.aim(victim.pid)
        self.live.append(self._start())

    def _replace_exited(self) -> None:
        for proc in list(self.live):
            if proc.poll() is None:
                continue
            self.exits += 1
            line = f"worker pid {proc.pid} exited by itself with code {proc.returncode}"
            if self.exits <= LOGGED_EXITS:  # a worker that cannot start would flood the report
                line += f"; log tail:\n{_tail(self.workers.log(proc))}"
            self.problems.append(line)
            self.live.remove(proc)
            self.live.append(self._start())

    def _stop_survivors(self) -> None:
        """SIGTERM each survivor once it has registered (so its handlers are installed: a
        process still importing Django just dies of the signal, which proves nothing)."""
        deadline = time.monotonic() + STARTUP_PATIENCE
        tick = threading.Event()
        waiting = [proc for proc in self.live if proc.poll() is None]
        while waiting and time.monotonic() < deadline:
            running = set.intersection(
                *(
                    set(
                        ProcessRow.objects.using(shard)
                        .filter(
                            kind="worker",
                            shutdown_state=ProcessRow.ShutdownState.RUNNING,
                            pid__in=[proc.pid for proc in waiting],
                        )
                        .values_list("pid", flat=True)
                    )
                    for shard in databases()
                )
            )
            waiting = [proc for proc in waiting if proc.pid not in running and proc.poll() is None]
            if waiting:
                tick.wait(TICK)
        for proc in waiting:
            self.problems.append(
                f"worker pid {proc.pid} did not register within {STARTUP_PATIENCE:.0f}s; "
                f"log tail:\n{_tail(self.workers.log(proc))}"
            )
        for proc in self.live:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in self.live:
            self._expect_clean_exit(proc, "a surviving worker")
        self.live = []

    def _expect_clean_exit(self, proc: subprocess.Popen[bytes], what: str) -> None:
        try:
            code = proc.wait(self.worker_settings()["SHUTDOWN_TIMEOUT"] + 45)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(30)
            self.problems.append(
                f"{what} (pid {proc.pid}) did not exit after SIGTERM; log tail:\n"
                f"{_tail(self.workers.log(proc))}"
            )
            return
        if code != 0:
            self.problems.append(
                f"{what} (pid {proc.pid}) exited with {code} after SIGTERM; log tail:\n"
                f"{_tail(self.workers.log(proc))}"
            )

    def _drain(self) -> None:
        clean = self._start()
        deadline = time.monotonic() + self.drain_seconds
        tick = threading.Event()
        while not self._drained(clean.pid):
            if clean.poll() is not None:
                raise DrainTimeout(
                    f"the clean worker exited with {clean.returncode} while draining "
                    f"(seed {self.seed}); {self._remaining()}\n{_tail(self.workers.log(clean))}"
                )
            if time.monotonic() > deadline:
                raise DrainTimeout(
                    f"not drained after {self.drain_seconds:.0f}s (seed {self.seed}): "
                    f"{self._remaining()}; kills {self.kill_schedule}\n"
                    f"clean worker log tail:\n{_tail(self.workers.log(clean))}"
                )
            tick.wait(0.25)
        clean.send_signal(signal.SIGTERM)
        self._expect_clean_exit(clean, "the clean worker")

    @staticmethod
    def _drained(clean_pid: int) -> bool:
        return all(Soak._drained_on(shard, clean_pid) for shard in databases())

    @staticmethod
    def _drained_on(shard: str, clean_pid: int) -> bool:
        if (
            ReadyMessage.objects.using(shard).exists()
            or ClaimedMessage.objects.using(shard).exists()
        ):
            return False
        others = ProcessRow.objects.using(shard).exclude(pid=clean_pid)
        if (
            others.filter(kind="worker")
            .exclude(shutdown_state=ProcessRow.ShutdownState.STOPPED)
            .exists()
        ):
            return False  # a dead worker not cleaned up yet
        return not Instance.objects.using(shard).filter(activation_owner__in=others).exists()

    @staticmethod
    def _remaining() -> str:
        return "; ".join(f"{shard}: {Soak._remaining_on(shard)}" for shard in databases())

    @staticmethod
    def _remaining_on(shard: str) -> str:
        undone = Message.objects.using(shard).filter(completed_at__isnull=True).count()
        workers = (
            ProcessRow.objects.using(shard)
            .filter(kind="worker")
            .exclude(shutdown_state=ProcessRow.ShutdownState.STOPPED)
            .count()
        )
        leased = Instance.objects.using(shard).filter(activation_owner__isnull=False).count()
        return (
            f"{ReadyMessage.objects.using(shard).count()} ready, "
            f"{ClaimedMessage.objects.using(shard).count()} claimed, "
            f"{undone} messages without completed_at (dead letters: "
            f"{DeadLetter.objects.using(shard).count()}), {workers} worker rows not stopped (the "
            f"clean worker's included), "
            f"{leased} instances leased"
        )

    # -- figures ------------------------------------------------------------------------------
    def figures(self, found: list[str]) -> dict[str, Any]:
        counts = {"attempts": 0, "max_attempt": 0, "committed": 0, "rerun": 0}
        for shard in databases():
            messages = Message.objects.using(shard).filter(actor_type=SoakCounter.actor_type)
            totals = messages.aggregate(
                attempts=Sum("attempt_count"), max_attempt=Max("attempt_count")
            )
            counts["attempts"] += totals["attempts"] or 0
            counts["max_attempt"] = max(counts["max_attempt"], totals["max_attempt"] or 0)
            counts["committed"] += (
                messages.filter(completed_at__isnull=False).count()
                + DeadLetter.objects.using(shard).filter(actor_type=SoakCounter.actor_type).count()
            )
            counts["rerun"] += messages.filter(attempt_count__gt=1).count()
        events = self.events()
        return {
            "vendor": self.vendor,
            "mode": self.mode.name,
            "seed": self.seed,
            "actors": self.profile.actors,
            "workers_at_a_time": self.profile.workers,
            "messages": len(self.ledger),
            "messages_first_load": self.first_load,
            "messages_while_killing": len(self.ledger) - self.first_load,
            "rejected_on_purpose": len(self.ledger.of_kind(REJECT)),
            "dead_letters_on_purpose": len(self.ledger.of_kind(FAIL)),
            "enqueue_batches_refused": self.ledger.refused_batches,
            "enqueue_refusals": self.ledger.refusals,
            "kills": len(self.kill_schedule),
            "workers_started": self.started,
            "shards": list(databases()),
            "turns_committed": counts["committed"],
            "attempts_counted": counts["attempts"],
            "messages_rerun": counts["rerun"],
            "max_attempt": counts["max_attempt"],
            **events,
            # The supervisors' cleanups are in their logs; the test's own are counted here.
            "dead_processes_cleaned": events["dead_processes_cleaned"] + self.cleaner.cleaned,
            "cleaned_by_the_test": self.cleaner.cleaned,
            "cleanups_by_the_test": self.cleaner.runs,
            "aimed_cleanups": self.cleaner.aimed,
            "cleanup_errors": len(self.cleaner.errors),
            "cleanup_error_samples": self.cleaner.errors[:5],
            "violations": len(found),
            "violation_lines": found,
            "seconds": {name: round(value, 1) for name, value in self.timings.items()},
            "settings": {
                **self.worker_settings(),
                "LEASE_DURATION": list(self.profile.leases),
                "LEASE_RENEWAL_INTERVAL": "LEASE_DURATION / 3",
            },
            "worker_leases": self.leases,
            "worker_args": list(self.mode.args),
            "kill_schedule": self.kill_schedule,
        }

    def events(self) -> dict[str, int]:
        """Recovery events the workers logged (the runtime logs its signals)."""
        counts = {
            "stale_claims_recovered": 0,
            "dead_processes_cleaned": 0,
            "activations_lost": 0,
            "live_workers_taken_for_dead": 0,
        }
        for proc in self.workers.procs:
            for line in self.workers.log(proc).splitlines():
                if "message_retried" in line and "reason=stale claim recovered" in line:
                    counts["stale_claims_recovered"] += 1
                elif "process_pruned" in line and "reason=dead" in line:
                    counts["dead_processes_cleaned"] += 1
                elif "activation_lost" in line:
                    counts["activations_lost"] += 1
                elif "was marked stopped by dead-process cleanup" in line:
                    counts["live_workers_taken_for_dead"] += 1
        return counts


def _tail(text: str, lines: int = 30) -> str:
    return "\n".join(text.splitlines()[-lines:])


def merge_report(figures: dict[str, Any]) -> None:
    """Merge the figures into the JSON file named by ``SOLID_SOAK_REPORT`` (if set), under
    ``"<vendor>/<mode>"``."""
    path = os.environ.get("SOLID_SOAK_REPORT", "").strip()
    if not path:
        return
    target = Path(path)
    report = json.loads(target.read_text()) if target.exists() and target.stat().st_size else {}
    report[f"{figures['vendor']}/{figures['mode']}"] = figures
    target.write_text(json.dumps(report, indent=2, sort_keys=True) + "\n")


def summary(figures: dict[str, Any]) -> str:
    """The one-paragraph figures printed after each run."""
    keys = (
        "seed",
        "kills",
        "workers_started",
        "messages",
        "actors",
        "turns_committed",
        "attempts_counted",
        "messages_rerun",
        "max_attempt",
        "stale_claims_recovered",
        "dead_processes_cleaned",
        "cleaned_by_the_test",
        "aimed_cleanups",
        "cleanup_errors",
        "activations_lost",
        "live_workers_taken_for_dead",
        "dead_letters_on_purpose",
        "rejected_on_purpose",
        "enqueue_batches_refused",
        "violations",
    )
    body = " ".join(f"{key}={figures[key]}" for key in keys)
    seconds = " ".join(f"{key}={value}s" for key, value in figures["seconds"].items())
    return f"soak {figures['vendor']}/{figures['mode']}: {body} ({seconds})"
