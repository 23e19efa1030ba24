"""The measurements of ``python -m bench``. Each returns a list of :class:`Result`.

Throughputs are measured on the database clock where a worker process does the work
(first ``started_at`` to last ``completed_at`` of the messages), so process start-up is not
counted; latencies are measured by the caller with ``time.perf_counter``. Every throughput is
reported beside a raw baseline measured in the same run through the same driver.
"""

from __future__ import annotations

import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from django.db import connection, connections
from django.test.utils import override_settings

from bench import statements

ROOT = Path(__file__).resolve().parent.parent


@dataclass
class Result:
    name: str
    value: float
    unit: str
    baseline: str | None = None  # the name of the raw baseline this is compared with
    ratio: float | None = None
    note: str = ""
    extra: dict[str, Any] = field(default_factory=dict)


class OutcomeError(AssertionError):
    """A measure's work did not end as it must (a message not completed, a dead letter, a
    wrong state): the measure fails instead of publishing a rate."""


class WorkerExited(OutcomeError):
    """A worker process stopped before the drain ended (a signal from outside the run): the
    drain is run again from the start, once."""


@dataclass
class Params:
    enqueue_count: int = 1000
    hot_messages: int = 2000
    warm_actors: int = 200
    warm_rounds: int = 10
    cold_actors: int = 1000
    sync_samples: int = 200
    wakeup_samples: int = 30
    state_bytes: int = 64 * 1024
    big_state_messages: int = 500
    activity_writes: int = 2000
    bulk_rows: int = 20000
    catch_up_entries: int = 100_000
    raw_seconds: float = 2.0
    raw_sample_seconds: float = 1.0  # each baseline sample taken around a measure
    sustained_messages: int = 10_000
    callers: int = 16
    caller_processes: int = 4
    caller_calls: int = 100  # per caller
    idle_seconds: float = 10.0
    memory_turns: int = 100_000
    task_count: int = 1000


def vendor() -> str:
    return connection.vendor


# -- helpers -----------------------------------------------------------------------------------
def reset() -> None:
    """Empty every table the benchmark writes (children first; no reliance on cascades)."""
    from solid_objects.conf import table

    names = [
        "dead_letters",
        "broadcasts",
        "effects",
        "reminders",
        "claimed_messages",
        "ready_messages",
        "messages",
        "instances",
        "processes",
        "rate_limits",
    ]
    tables = [connection.ops.quote_name(table(name)) for name in names]
    tables += ["tilttek_activity_entry", "tilttek_activity_checkpoint"]
    with connection.cursor() as cursor:
        # TRUNCATE where possible: DELETE leaves dead rows and index entries behind, and
        # every later measure would scan them (the numbers then drift down run after run).
        if connection.vendor == "postgresql":
            cursor.execute(f"TRUNCATE {', '.join(tables)}")
        elif connection.vendor == "mysql":
            cursor.execute("SET FOREIGN_KEY_CHECKS = 0")
            try:
                for name in tables:
                    cursor.execute(f"TRUNCATE TABLE {name}")
            finally:
                cursor.execute("SET FOREIGN_KEY_CHECKS = 1")
        else:
            for name in tables:
                cursor.execute(f"DELETE FROM {name}")
    from solid_objects.sync import caller_cache

    caller_cache.clear()
    from solid_objects.runtime.processes import callers

    callers.forget("default")


def _scalar(sql: str, params: list[Any] | None = None) -> Any:
    with connection.cursor() as cursor:
        cursor.execute(sql, params or [])
        return cursor.fetchone()[0]


def _as_dt(value: Any) -> datetime:
    if isinstance(value, str):
        value = datetime.fromisoformat(value)
    return value if value.tzinfo else value.replace(tzinfo=UTC)


def worker_env(
    overrides: dict[str, Any] | None = None, extra: dict[str, str] | None = None
) -> dict[str, str]:
    import json

    env = dict(os.environ)
    env["DJANGO_SETTINGS_MODULE"] = "bench.settings"
    env["BENCH_SOLID_OBJECTS"] = json.dumps(overrides or {})
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    env.update(extra or {})
    return env


@contextmanager
def workers(
    count: int,
    overrides: dict[str, Any] | None = None,
    args: tuple[str, ...] = (),
    env: dict[str, str] | None = None,
    stats: dict[str, int] | None = None,
) -> Iterator[list[subprocess.Popen[bytes]]]:
    """Real ``manage.py run_actor_worker`` processes, stopped with SIGTERM afterwards.

    With ``stats``, every worker counts the statements of all its connections and
    ``stats["statements"]`` holds their sum once they have exited (a worker that had to be
    killed has no count: that fails the measure)."""
    folder = Path(tempfile.mkdtemp(prefix="bench-statements-"))
    extra = dict(env or {})
    extra["BENCH_STATEMENTS_DIR"] = str(folder)
    procs = [
        subprocess.Popen(
            [sys.executable, str(ROOT / "bench" / "manage.py"), "run_actor_worker", *args],
            env=worker_env(overrides, extra),
            cwd=ROOT,
        )
        for _ in range(count)
    ]
    try:
        yield procs
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        killed = False
        for proc in procs:
            try:
                proc.wait(60)
            except subprocess.TimeoutExpired:
                killed = True
                proc.kill()
                proc.wait()
        reports = len(list(folder.glob("*.json")))
        total = statements.collect(folder)
        shutil.rmtree(folder, ignore_errors=True)
    if stats is not None:
        if killed or reports != count:
            raise WorkerExited(f"{count - reports} worker(s) exited without a statement count")
        stats["statements"] = total


def _pending() -> int:
    from solid_objects.conf import table

    ready = connection.ops.quote_name(table("ready_messages"))
    claimed = connection.ops.quote_name(table("claimed_messages"))
    return int(_scalar(f"SELECT (SELECT COUNT(*) FROM {ready}) + (SELECT COUNT(*) FROM {claimed})"))


def _wait_drained(timeout: float, procs: list[subprocess.Popen[bytes]] | None = None) -> None:
    deadline = time.monotonic() + timeout
    while _pending():
        if time.monotonic() > deadline:
            raise TimeoutError("workers did not drain the mailboxes in time")
        for proc in procs or ():
            if proc.poll() is not None:
                raise WorkerExited(f"a worker exited early (status {proc.returncode})")
        time.sleep(0.05)


def _max_message_id() -> int:
    from solid_objects.conf import table

    messages = connection.ops.quote_name(table("messages"))
    return int(_scalar(f"SELECT COALESCE(MAX(id), 0) FROM {messages}"))


def _processing_rate(after_id: int = 0) -> tuple[float, int]:
    """Messages per second between the first start and the last completion (DB clock) of
    the messages after ``after_id``: what the workers ran, not the set-up."""
    from solid_objects.conf import table

    messages = connection.ops.quote_name(table("messages"))
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT MIN(started_at), MAX(completed_at), COUNT(*) FROM {messages} "
            "WHERE completed_at IS NOT NULL AND id > %s",
            [after_id],
        )
        first, last, count = cursor.fetchone()
    seconds = max((_as_dt(last) - _as_dt(first)).total_seconds(), 1e-6)
    return count / seconds, int(count)


def _percentiles(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)

    def pick(q: float) -> float:
        return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]

    return {"p50": pick(0.50), "p95": pick(0.95), "p99": pick(0.99)}


# -- raw baselines -----------------------------------------------------------------------------
def _raw_tables() -> None:
    with connection.cursor() as cursor:
        v = vendor()
        cursor.execute("DROP TABLE IF EXISTS bench_raw_counter")
        cursor.execute("DROP TABLE IF EXISTS bench_raw_journal")
        cursor.execute("CREATE TABLE bench_raw_counter (id INTEGER PRIMARY KEY, n BIGINT NOT NULL)")
        auto = {
            "postgresql": "BIGSERIAL PRIMARY KEY",
            "mysql": "BIGINT AUTO_INCREMENT PRIMARY KEY",
            "sqlite": "INTEGER PRIMARY KEY AUTOINCREMENT",
        }[v]
        cursor.execute(
            f"CREATE TABLE bench_raw_journal (id {auto}, k VARCHAR(255) NOT NULL, "
            "payload VARCHAR(255) NOT NULL, UNIQUE (k))"
        )
        cursor.execute(
            "INSERT INTO bench_raw_counter (id, n) VALUES (1, 0), (2, 0), (3, 0), (4, 0)"
        )


def _loop_for(seconds: float, body: Callable[[int], None], threads: int) -> float:
    counts = [0] * threads
    barrier = threading.Barrier(threads)

    def run(index: int) -> None:
        try:
            barrier.wait()
            end = time.perf_counter() + seconds
            n = 0
            while time.perf_counter() < end:
                body(index)
                n += 1
            counts[index] = n
        finally:
            if threads > 1:
                connections["default"].close()

    if threads == 1:
        run(0)
    else:
        pool = [threading.Thread(target=run, args=(i,)) for i in range(threads)]
        for t in pool:
            t.start()
        for t in pool:
            t.join()
    return sum(counts) / seconds


RAW1 = "raw UPDATE commit loop, 1 connection"
RAW2 = "raw UPDATE commit loop, 2 connections"
RAW_INSERT = "raw INSERT ON CONFLICT loop, 1 connection"

#: Every sample of every baseline taken in this run (before and after each measure).
SAMPLES: dict[str, list[float]] = {}
_sample_seconds = [1.0]


def _update(index: int) -> None:
    with connection.cursor() as cursor:
        cursor.execute("UPDATE bench_raw_counter SET n = n + 1 WHERE id = %s", [index + 1])


def _insert(index: int) -> None:
    sql = {
        "postgresql": "INSERT INTO bench_raw_journal (k, payload) VALUES (%s, %s) "
        "ON CONFLICT (k) DO NOTHING RETURNING id",
        "mysql": "INSERT IGNORE INTO bench_raw_journal (k, payload) VALUES (%s, %s)",
        "sqlite": "INSERT OR IGNORE INTO bench_raw_journal (k, payload) VALUES (%s, %s)",
    }[vendor()]
    with connection.cursor() as cursor:
        cursor.execute(sql, [uuid.uuid4().hex, "x"])


def sample(name: str, seconds: float | None = None) -> float:
    """One timed sample of the raw baseline ``name``, recorded in :data:`SAMPLES`."""
    seconds = seconds or _sample_seconds[0]
    if name.startswith(RAW_INSERT):
        value = _loop_for(seconds, _insert, 1)
    else:
        value = _loop_for(seconds, _update, 2 if name.startswith(RAW2) else 1)
    SAMPLES.setdefault(name, []).append(value)
    return value


def _apply_ratio(result: Result, before: float, after: float) -> None:
    reference = (before + after) / 2
    result.ratio = result.value / reference if reference else None
    result.extra["baseline_before"] = round(before, 1)
    result.extra["baseline_after"] = round(after, 1)


def bracketed(run: Callable[[], list[Result]], names: tuple[str, ...]) -> list[Result]:
    """Run a group of measures between two samples of each baseline it is compared with;
    a result already compared (its own bracket, as every drain has) keeps its ratio."""
    before = {name: sample(name) for name in names}
    results = run()
    after = {name: sample(name) for name in names}
    for result in results:
        if result.ratio is None and result.baseline in before:
            _apply_ratio(result, before[result.baseline], after[result.baseline])
    return results


def baseline_summary() -> list[Result]:
    """The published baseline rows: the median of every sample of the run and its spread."""
    out = []
    for name, values in SAMPLES.items():
        low, high, mid = min(values), max(values), statistics.median(values)
        unit = "rows/s" if name.startswith(RAW_INSERT) else "commits/s"
        out.append(
            Result(
                name,
                mid,
                unit,
                note=f"median of {len(values)} samples, {low:,.0f} to {high:,.0f} "
                f"(spread {(high - low) / mid:.0%})",
                extra={"samples": [round(v, 1) for v in values]},
            )
        )
    return out


def raw_baselines(p: Params) -> list[Result]:
    _sample_seconds[0] = p.raw_sample_seconds
    _raw_tables()
    for name in (RAW1, RAW2, RAW_INSERT):
        sample(name, p.raw_seconds)
    return []  # the rows come from baseline_summary() at the end of the run


# -- verification ------------------------------------------------------------------------------
def verify_messages(after_id: int, expected: int, completed: bool = True) -> None:
    """Every message after ``after_id`` completed without error; no dead letter; nothing
    left in a mailbox (``completed=False``: written and all waiting in their mailboxes)."""
    from solid_objects.models import DeadLetter, Message, ReadyMessage

    mine = Message.objects.filter(id__gt=after_id)
    total = mine.count()
    if total != expected:
        raise OutcomeError(f"{total} messages written, {expected} expected")
    if not completed:
        waiting = ReadyMessage.objects.filter(message_id__gt=after_id).count()
        if waiting != expected:
            raise OutcomeError(f"{waiting} of {expected} messages in their mailboxes")
        return
    unfinished = mine.filter(completed_at__isnull=True).count()
    failed = mine.filter(rejected_at__isnull=False).count() + (
        mine.filter(error__isnull=False).exclude(error=None).count()
    )
    if unfinished or failed:
        raise OutcomeError(f"{unfinished} messages not completed, {failed} failed or rejected")
    if DeadLetter.objects.exists():
        raise OutcomeError(f"{DeadLetter.objects.count()} dead letters")
    if _pending():
        raise OutcomeError(f"{_pending()} messages still in a mailbox")


def verify_counters(prefix: str, actors: int, value: int) -> None:
    """Each of the ``actors`` counters named ``prefix-N`` holds exactly ``value``."""
    from solid_objects.models import Instance

    states = Instance.objects.filter(
        actor_type="bench.counter", actor_id__startswith=f"{prefix}-"
    ).values_list("actor_id", "state")
    wrong = {actor_id: state for actor_id, state in states if state.get("value", 0) != value}
    if len(states) != actors or wrong:
        sample_ = dict(list(wrong.items())[:3])
        raise OutcomeError(
            f"{len(states)} of {actors} counters found, {len(wrong)} not at {value}: {sample_}"
        )


# -- actors ------------------------------------------------------------------------------------
def enqueue_rates(p: Params) -> list[Result]:
    from bench.actors import BenchCounter

    reset()
    one = BenchCounter.ref("enqueue-one")
    before = statements.count()
    start = time.perf_counter()
    for _ in range(p.enqueue_count):
        one.enqueue().add(1)
    hot = p.enqueue_count / (time.perf_counter() - start)
    hot_statements = (statements.count() - before) / p.enqueue_count
    refs = [BenchCounter.ref(f"enqueue-many-{i}") for i in range(200)]
    before = statements.count()
    start = time.perf_counter()
    for i in range(p.enqueue_count):
        refs[i % len(refs)].enqueue().add(1)
    many = p.enqueue_count / (time.perf_counter() - start)
    many_statements = (statements.count() - before) / p.enqueue_count
    from solid_objects import enqueue_many

    batch = [(refs[i % len(refs)], "add", {"amount": 1}) for i in range(500)]
    rounds = max(1, p.enqueue_count * 4 // len(batch))
    before = statements.count()
    start = time.perf_counter()
    for _ in range(rounds):
        enqueue_many(batch)
    bulk = rounds * len(batch) / (time.perf_counter() - start)
    bulk_statements = (statements.count() - before) / (rounds * len(batch))
    verify_messages(0, 2 * p.enqueue_count + rounds * len(batch), completed=False)
    return [
        Result("async enqueue, one actor", hot, "msg/s", RAW1),
        Result("async enqueue, 200 actors", many, "msg/s", RAW1),
        Result("enqueue_many(), batches of 500 over 200 actors", bulk, "msg/s", RAW1),
        Result("statements per message, enqueue_many()", bulk_statements, "statements"),
        Result("statements per async enqueue, one actor", hot_statements, "statements"),
        Result("statements per async enqueue, 200 actors", many_statements, "statements"),
    ]


def _fill(actors: int, per_actor: int, prefix: str) -> None:
    from bench.actors import BenchCounter

    refs = [BenchCounter.ref(f"{prefix}-{i}") for i in range(actors)]
    for _ in range(per_actor):
        for ref in refs:
            ref.enqueue().add(1)


def _slug(label: str) -> str:
    return "".join(c if c.isalnum() else "-" for c in label)[:60]


def _drain(
    label: str,
    actors: int,
    per_actor: int,
    worker_count: int,
    overrides: dict[str, Any] | None = None,
    baseline: str = RAW1,
    prepare: Callable[[str], None] | None = None,
    env: dict[str, str] | None = None,
    args: tuple[str, ...] = (),
) -> list[Result]:
    """Enqueue, then drain with real worker processes between two baseline samples; verify
    every message and every counter; count the statements of every worker connection."""
    try:
        return _drain_once(
            label, actors, per_actor, worker_count, overrides, baseline, prepare, env, args
        )
    except WorkerExited as exc:
        print(f"  {label}: {exc}; running the drain again", file=sys.stderr)
        results = _drain_once(
            label, actors, per_actor, worker_count, overrides, baseline, prepare, env, args
        )
        results[0].extra["rerun_because"] = str(exc)
        return results


def _drain_once(
    label: str,
    actors: int,
    per_actor: int,
    worker_count: int,
    overrides: dict[str, Any] | None,
    baseline: str,
    prepare: Callable[[str], None] | None,
    env: dict[str, str] | None,
    args: tuple[str, ...],
) -> list[Result]:
    reset()
    prefix = _slug(label)
    if prepare is not None:
        prepare(prefix)  # a sync call: committed when it returns
    watermark = _max_message_id()
    _fill(actors, per_actor, prefix)
    before = sample(baseline)
    stats: dict[str, int] = {}
    with workers(worker_count, overrides, args, env=env, stats=stats) as procs:
        _wait_drained(600, procs)
    after = sample(baseline)
    rate, count = _processing_rate(watermark)
    verify_messages(watermark, actors * per_actor)
    verify_counters(prefix, actors, per_actor)
    result = Result(
        label,
        rate,
        "msg/s",
        baseline,
        extra={"messages": count, "workers": worker_count, "args": list(args)},
    )
    _apply_ratio(result, before, after)
    per_message = Result(
        f"statements per message, {label}",
        stats["statements"] / count,
        "statements",
        note="every worker connection, whole run incl. start-up and stop",
        extra={"statements": stats["statements"], "messages": count},
    )
    return [result, per_message]


def processing_rates(p: Params) -> list[Result]:
    return [
        *_drain("one hot actor, 1 worker", 1, p.hot_messages, 1),
        *_drain(
            "one hot actor, 1 worker, MAX_TURNS_PER_COMMIT=1",
            1,
            p.hot_messages // 2,
            1,
            {"MAX_TURNS_PER_COMMIT": 1},
        ),
        *_drain(
            f"{p.warm_actors} warm actors round-robin, 1 worker", p.warm_actors, p.warm_rounds, 1
        ),
        *_drain(
            f"{p.warm_actors} warm actors round-robin, 2 workers",
            p.warm_actors,
            p.warm_rounds,
            2,
            baseline=RAW2,
        ),
        *_drain(f"{p.cold_actors} cold actors, 1 worker", p.cold_actors, 1, 1),
        *_drain(f"{p.cold_actors} cold actors, 2 workers", p.cold_actors, 1, 2, baseline=RAW2),
    ]


def sustained(p: Params) -> list[Result]:
    """A long hot drain: a short one flatters (caches warm, no vacuum or checkpoint yet)."""
    return _drain(
        f"sustained: one hot actor, {p.sustained_messages:,} messages, 1 worker",
        1,
        p.sustained_messages,
        1,
    )


def django_defaults(p: Params) -> list[Result]:
    """The same drains with Django's default driver settings (PostgreSQL: client-side
    binding, no prepared statements) beside the recommended ones of ``bench/settings.py``."""
    if vendor() != "postgresql":
        return [
            Result(
                "Django default driver settings",
                float("nan"),
                "",
                note="the recommended settings are Django's defaults on this database",
            )
        ]
    env = {"BENCH_CLIENT_BINDING": "1"}
    suffix = "Django default driver settings"
    return [
        *_drain(f"one hot actor, 1 worker, {suffix}", 1, p.hot_messages, 1, env=env),
        *_drain(
            f"{p.warm_actors} warm actors round-robin, 1 worker, {suffix}",
            p.warm_actors,
            p.warm_rounds,
            1,
            env=env,
        ),
        *_drain(f"{p.cold_actors} cold actors, 1 worker, {suffix}", p.cold_actors, 1, 1, env=env),
    ]


RAW1_FULL = f"{RAW1}, synchronous=FULL"


def sqlite_full(p: Params) -> list[Result]:
    """SQLite at ``synchronous=FULL`` (an fsync per commit, as a server database and the
    Node sibling's defaults do): the raw loop, the hot and cold drains and sync calls."""
    if vendor() != "sqlite":
        return []
    options = connection.settings_dict.setdefault("OPTIONS", {})
    recommended = options.get("init_command", "")
    options["init_command"] = recommended.replace("synchronous=NORMAL", "synchronous=FULL")
    connection.close()
    env = {"BENCH_SQLITE_SYNCHRONOUS": "FULL"}
    try:
        if _scalar("PRAGMA synchronous") != 2:
            raise OutcomeError("PRAGMA synchronous=FULL did not take")
        label = "synchronous=FULL"
        out = [
            *_drain(
                f"one hot actor, 1 worker, {label}",
                1,
                p.hot_messages,
                1,
                baseline=RAW1_FULL,
                env=env,
            ),
            *_drain(
                f"{p.cold_actors} cold actors, 1 worker, {label}",
                p.cold_actors,
                1,
                1,
                baseline=RAW1_FULL,
                env=env,
            ),
        ]
        from bench.actors import BenchCounter

        reset()
        warm = BenchCounter.ref("full-sync")
        warm.add(1)
        samples = []
        for _ in range(p.sync_samples):
            start = time.perf_counter()
            warm.add(1)
            samples.append((time.perf_counter() - start) * 1000)
        if warm.snapshot().value != p.sync_samples + 1:
            raise OutcomeError("the synchronous=FULL sync counter is wrong")
        for key, value in _percentiles(samples).items():
            out.append(Result(f"sync call latency, warm actor, {label}, {key}", value, "ms"))
        return out
    finally:
        options["init_command"] = recommended
        connection.close()


def big_state(p: Params) -> list[Result]:
    from bench.actors import BenchCounter

    def prepare(prefix: str) -> None:
        BenchCounter.ref(f"{prefix}-0").fill(p.state_bytes)

    empty = _drain("empty state, one actor, 1 worker", 1, p.big_state_messages, 1)
    big = _drain(
        f"{p.state_bytes // 1024} KB state, one actor, 1 worker",
        1,
        p.big_state_messages,
        1,
        prepare=prepare,
    )
    big[0].extra["relative_to_empty"] = big[0].value / empty[0].value
    big[0].note = f"{big[0].value / empty[0].value:.0%} of the empty-state rate"
    return [empty[0], big[0]]


def state_encoding(p: Params) -> list[Result]:
    """``payloads.encode`` of a structured state of about 73 KiB (780 records, the shape of
    issue 14's example), with the standard encoder and with orjson (the ``orjson`` extra)
    when it is installed: the median of 200 encodings each, alternated in rounds. CPU only,
    so the same on every database; both texts are checked to be identical."""
    import random
    import statistics
    import string

    from solid_objects import payloads

    rng = random.Random(14)
    state = {
        "items": [
            {
                "id": n,
                "name": "".join(rng.choices(string.ascii_letters, k=30)),
                "price": round(rng.random() * 100, 2),
                "tags": ["a", "b", "é"],
                "ok": True,
            }
            for n in range(780)
        ]
    }
    fast = payloads._fast_dumps
    timings: dict[str, list[float]] = {"standard": [], "orjson": []}
    texts: dict[str, str] = {}
    for _ in range(5):
        for name, encoder in (("standard", None), ("orjson", fast)):
            if name == "orjson" and fast is None:
                continue
            payloads._fast_dumps = encoder
            try:
                for _ in range(40):
                    start = time.perf_counter()
                    texts[name] = payloads.encode(state, what="state")
                    timings[name].append((time.perf_counter() - start) * 1000)
            finally:
                payloads._fast_dumps = fast
    size = len(texts["standard"].encode())
    standard = statistics.median(timings["standard"])
    out = [Result(f"encode a {size // 1024} KiB state, standard encoder", standard, "ms")]
    if fast is None:
        out.append(Result("encode the same state, orjson", 0.0, "ms", note="orjson not installed"))
        return out
    if texts["orjson"] != texts["standard"]:
        raise OutcomeError("orjson wrote other text than the standard encoder")
    quick = statistics.median(timings["orjson"])
    out.append(
        Result(
            "encode the same state, orjson",
            quick,
            "ms",
            note=f"{standard / quick:.1f}x faster, identical text",
            extra={"speedup": standard / quick},
        )
    )
    return out


def sync_latency(p: Params) -> list[Result]:
    from bench.actors import BenchCounter

    reset()
    warm = BenchCounter.ref("sync-warm")
    warm.add(1)
    samples = []
    before = statements.count()
    for _ in range(p.sync_samples):
        start = time.perf_counter()
        warm.add(1)
        samples.append((time.perf_counter() - start) * 1000)
    warm_statements = (statements.count() - before) / p.sync_samples
    if warm.snapshot().value != p.sync_samples + 1:
        raise OutcomeError("the warm sync counter is wrong")
    cold_samples = []
    before = statements.count()
    for i in range(p.sync_samples):
        ref = BenchCounter.ref(f"sync-cold-{i}")
        start = time.perf_counter()
        ref.add(1)
        cold_samples.append((time.perf_counter() - start) * 1000)
    cold_statements = (statements.count() - before) / p.sync_samples
    verify_counters("sync-cold", p.sync_samples, 1)
    out = []
    for label, values in (("warm", samples), ("cold", cold_samples)):
        pct = _percentiles(values)
        for key, value in pct.items():
            out.append(Result(f"sync call latency, {label} actor, {key}", value, "ms"))
    out.append(Result("statements per sync call, warm actor", warm_statements, "statements"))
    out.append(Result("statements per sync call, cold actor", cold_statements, "statements"))
    return out


def wakeup_latency(p: Params) -> list[Result]:
    from bench.actors import BenchCounter

    modes: list[tuple[str, dict[str, Any]]] = [("polling only", {"WAKE_UP": "polling"})]
    if vendor() == "postgresql":
        modes.insert(
            0, ("PostgreSQL NOTIFY", {"WAKE_UP": "postgresql", "IDLE_POLLING_INTERVAL": 5.0})
        )
    if _redis_available():
        modes.insert(
            0,
            (
                "Redis pub/sub",
                {"WAKE_UP": "redis", "REDIS_URL": _redis_url(), "IDLE_POLLING_INTERVAL": 5.0},
            ),
        )
    out = []
    from solid_objects.conf import get_settings

    for label, overrides in modes:
        reset()
        samples: list[float] = []
        with override_settings(SOLID_OBJECTS={**_current(), **overrides}):
            get_settings.cache_clear()
            try:
                with workers(1, overrides):
                    time.sleep(3.0)  # let the worker reach its idle back-off
                    for i in range(p.wakeup_samples):
                        message = BenchCounter.ref(f"wake-{i}").enqueue().add(1)
                        _wait_completed(message.id)
                        samples.append(_latency_ms(message.id))
                        time.sleep(0.05 + (i % 5) * 0.02)
            except Exception as exc:
                out.append(
                    Result(
                        f"cross-process wake-up, {label}, p50",
                        float("nan"),
                        "ms",
                        note=f"not measured: {exc}",
                    )
                )
                continue
            finally:
                get_settings.cache_clear()
        pct = _percentiles(samples)
        out.append(Result(f"cross-process wake-up, {label}, p50", pct["p50"], "ms"))
        out.append(Result(f"cross-process wake-up, {label}, p95", pct["p95"], "ms"))
    return out


def _current() -> dict[str, Any]:
    from django.conf import settings

    return dict(getattr(settings, "SOLID_OBJECTS", {}))


def _wait_completed(message_id: int, timeout: float = 30.0) -> None:
    from solid_objects.conf import table

    messages = connection.ops.quote_name(table("messages"))
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if _scalar(f"SELECT completed_at FROM {messages} WHERE id = %s", [message_id]):
            return
        time.sleep(0.002)
    raise TimeoutError(f"message {message_id} did not complete")


def _latency_ms(message_id: int) -> float:
    from solid_objects.conf import table

    messages = connection.ops.quote_name(table("messages"))
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT enqueued_at, started_at FROM {messages} WHERE id = %s", [message_id]
        )
        enqueued, started = cursor.fetchone()
    return (_as_dt(started) - _as_dt(enqueued)).total_seconds() * 1000


def _redis_url() -> str:
    return os.environ.get("BENCH_REDIS_URL", "redis://127.0.0.1:6379/0")


def _redis_available() -> bool:
    try:
        import redis

        redis.Redis.from_url(_redis_url(), socket_connect_timeout=0.5).ping()
        return True
    except Exception:
        return False


def idle_cost(p: Params) -> list[Result]:
    """Statements per second of an idle ``run_actor_worker --all-roles`` after back-off,
    counted in-process by wrapping the cursor of every thread."""
    from django.db.backends import utils

    from solid_objects.runtime.launch import build_supervisor

    reset()
    counter = {"n": 0}
    lock = threading.Lock()
    original = utils.CursorWrapper.execute

    def counting(self: Any, sql: Any, params: Any = None) -> Any:
        with lock:
            counter["n"] += 1
        return original(self, sql, params)

    supervisor = build_supervisor(actor_threads=1, all_roles=True)
    supervisor.install_signal_handlers = False
    roles = len(supervisor.slots())
    utils.CursorWrapper.execute = counting  # type: ignore[method-assign]
    thread = threading.Thread(target=supervisor.run, daemon=True)
    try:
        thread.start()
        supervisor.started.wait(10)
        time.sleep(4.0)  # back-off to IDLE_POLLING_INTERVAL
        with lock:
            counter["n"] = 0
        time.sleep(p.idle_seconds)
        with lock:
            count = counter["n"]
    finally:
        supervisor.request_stop()
        thread.join(30)
        utils.CursorWrapper.execute = original  # type: ignore[method-assign]
    rate = count / p.idle_seconds
    return [
        Result(
            "idle statements/s, run_actor_worker --all-roles",
            rate,
            "statements/s",
            note=f"{roles} role threads + supervisor; {rate / max(roles, 1):.2f} per role",
            extra={"roles": roles},
        )
    ]


def _rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise RuntimeError("no VmRSS in /proc (Linux only)")


def worker_memory(p: Params) -> list[Result]:
    """Resident memory of one worker process as it runs ``memory_turns`` turns over 100
    actors (more than the default activation cache is not needed: the cache is bounded)."""
    from bench.actors import BenchCounter

    reset()
    refs = [BenchCounter.ref(f"memory-{i}") for i in range(100)]
    rounds = 10
    per_round = max(p.memory_turns // rounds, 100)
    samples: list[tuple[int, int]] = []
    with workers(1) as procs:
        pid = procs[0].pid
        for round_number in range(rounds):
            for i in range(per_round):
                refs[i % len(refs)].enqueue().add(1)
            _wait_drained(timeout=600)
            samples.append(((round_number + 1) * per_round, _rss_kib(pid)))
    first, last = samples[0][1], samples[-1][1]
    growth = (last - first) / first
    return [
        Result(f"worker RSS after {samples[0][0]:,} turns", first / 1024, "MiB"),
        Result(
            f"worker RSS after {samples[-1][0]:,} turns",
            last / 1024,
            "MiB",
            note=f"{growth:+.1%} since the first sample",
            extra={"samples_kib": samples},
        ),
    ]


# -- journal -----------------------------------------------------------------------------------
def journal(p: Params) -> list[Result]:
    from tilttek_activity import catch_up, record_activities, record_activity

    reset()
    start = time.perf_counter()
    for i in range(p.activity_writes):
        record_activity(
            f"user:{i % 50}", "order.placed", object=f"order:{i}", idempotency_key=f"new-{i}"
        )
    new_rate = p.activity_writes / (time.perf_counter() - start)
    start = time.perf_counter()
    for i in range(p.activity_writes):
        key = f"new-{i // 2}" if i % 2 else f"dup-{i}"
        obj = f"order:{i // 2}" if i % 2 else f"order:d{i}"
        record_activity(
            f"user:{(i // 2) % 50}" if i % 2 else f"user:{i % 50}",
            "order.placed",
            object=obj,
            idempotency_key=key,
        )
    dup_rate = p.activity_writes / (time.perf_counter() - start)
    rows = [
        {
            "member": f"user:{i % 50}",
            "verb": "cart.viewed",
            "object": f"product:{i % 500}",
            "idempotency_key": f"bulk-{i}",
        }
        for i in range(p.bulk_rows)
    ]
    start = time.perf_counter()
    for offset in range(0, len(rows), 100):
        record_activities(rows[offset : offset + 100])
    bulk_rate = p.bulk_rows / (time.perf_counter() - start)
    # catch-up over catch_up_entries entries (bulk-written first)
    have = p.activity_writes + p.activity_writes // 2 + p.bulk_rows
    extra_rows = [
        {"member": f"user:{i % 50}", "verb": "page.viewed", "idempotency_key": f"cu-{i}"}
        for i in range(max(0, p.catch_up_entries - have))
    ]
    for offset in range(0, len(extra_rows), 500):
        record_activities(extra_rows[offset : offset + 500])
    total = int(_scalar("SELECT COUNT(*) FROM tilttek_activity_entry"))
    start = time.perf_counter()
    catch_up("bench_noop", batch_size=500)
    catch_rate = total / (time.perf_counter() - start)
    return [
        Result("record_activity, new keys", new_rate, "writes/s", RAW_INSERT),
        Result("record_activity, 50% duplicates", dup_rate, "writes/s", RAW_INSERT),
        Result("record_activities, batches of 100", bulk_rate, "rows/s", RAW_INSERT),
        Result(f"catch-up, no-op projection, {total} entries", catch_rate, "entries/s"),
    ]


def callers(p: Params) -> list[Result]:
    """``p.callers`` concurrent synchronous callers (threads in ``p.caller_processes``
    processes, each on its own connection) beside one idle worker process: all on one actor,
    then each on its own actor. Verified: every call answered, every counter exact."""
    import json

    out: list[Result] = []
    per_process = max(1, p.callers // p.caller_processes)
    total_callers = per_process * p.caller_processes
    for shape in ("one actor", f"{total_callers} actors"):
        reset()
        prefix = "callers-one" if shape == "one actor" else "callers-many"
        ids = [f"{prefix}-0"] * total_callers
        if shape != "one actor":
            ids = [f"{prefix}-{n}" for n in range(total_callers)]
        with tempfile.TemporaryDirectory() as folder:
            stats: dict[str, int] = {}
            with workers(1, stats=stats):
                from bench.actors import BenchCounter

                for actor_id in sorted(set(ids)):
                    BenchCounter.ref(actor_id).add(0)  # the actors exist
                before = sample(RAW1)
                start_at = time.time() + 3.0
                outputs = [Path(folder) / f"callers-{n}.json" for n in range(p.caller_processes)]
                procs = [
                    subprocess.Popen(
                        [
                            sys.executable,
                            "-m",
                            "bench.callers",
                            str(path),
                            str(start_at),
                            str(p.caller_calls),
                            *ids[n * per_process : (n + 1) * per_process],
                        ],
                        env=worker_env(),
                        cwd=ROOT,
                    )
                    for n, path in enumerate(outputs)
                ]
                for proc in procs:
                    proc.wait(600)
            after = sample(RAW1)
            reports = [json.loads(path.read_text()) for path in outputs]
        errors = [e for r in reports for e in r["errors"]]
        samples = [v for r in reports for v in r["samples"]]
        calls = total_callers * p.caller_calls
        if errors or len(samples) != calls:
            raise OutcomeError(f"{len(samples)} of {calls} calls answered; {errors[:3]}")
        if shape == "one actor":
            verify_counters(prefix, 1, calls)
        else:
            verify_counters(prefix, total_callers, p.caller_calls)
        elapsed = max(r["finished"] for r in reports) - start_at
        label = f"{total_callers} concurrent sync callers, {shape}, 1 worker"
        rate = Result(f"{label}, calls/s", calls / elapsed, "calls/s", RAW1)
        _apply_ratio(rate, before, after)
        out.append(rate)
        for key, value in _percentiles(samples).items():
            out.append(Result(f"{label}, {key}", value, "ms"))
        caller_statements = sum(r["statements"] for r in reports)
        out.append(
            Result(
                f"statements per sync call, {label}",
                (caller_statements + stats["statements"]) / calls,
                "statements",
                note="callers' connections during the calls + the worker's whole run",
                extra={"callers": caller_statements, "worker": stats["statements"]},
            )
        )
    return out


def _task_drain(
    label: str, enqueue: Callable[[int], Any], count: int, worker_count: int, args: tuple[str, ...]
) -> Result:
    reset()
    for n in range(count):
        enqueue(n)
    baseline = RAW1 if worker_count == 1 else RAW2
    before = sample(baseline)
    stats: dict[str, int] = {}
    with workers(worker_count, args=args, stats=stats) as procs:
        _wait_drained(300, procs)
    after = sample(baseline)
    rate, done = _processing_rate()
    verify_messages(0, count)
    result = Result(
        label,
        rate,
        "tasks/s",
        baseline,
        extra={
            "tasks": done,
            "workers": worker_count,
            "args": list(args),
            "statements_per_task": stats["statements"] / done,
        },
    )
    _apply_ratio(result, before, after)
    result.note = f"{stats['statements'] / done:.2f} statements per task (every worker connection)"
    return result


def task_rates(p: Params) -> list[Result]:
    """The django.tasks backend: enqueue rate, and the drain rates of an ordered queue (one
    actor's mailbox, strictly one task at a time) and of a plain queue (a task per actor)."""
    from bench.tasks import ordered_noop, plain_noop

    reset()
    started = time.perf_counter()
    for n in range(p.task_count):
        plain_noop.enqueue(n)
    enqueue_rate = p.task_count / (time.perf_counter() - started)
    threads = ("--threads", "2")
    return [
        Result("task enqueue (plain queue, one transaction each)", enqueue_rate, "tasks/s", RAW1),
        _task_drain("ordered queue drain, 1 worker", ordered_noop.enqueue, p.task_count, 1, ()),
        _task_drain(
            "ordered queue drain, 2 workers x 2 threads",
            ordered_noop.enqueue,
            p.task_count,
            2,
            threads,
        ),
        _task_drain("plain queue drain, 1 worker", plain_noop.enqueue, p.task_count, 1, ()),
        _task_drain(
            "plain queue drain, 2 workers x 2 threads", plain_noop.enqueue, p.task_count, 2, threads
        ),
    ]


#: The baselines each group is compared with, sampled before and after the group (drains
#: also sample their own, just around the workers).
GROUP_BASELINES: dict[str, tuple[str, ...]] = {
    "enqueue": (RAW1,),
    "journal": (RAW_INSERT,),
    "tasks": (RAW1,),
}
