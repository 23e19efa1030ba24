"""The measurements of ``python -m bench``. Each returns a list of :class:`Result`.

Throughputs are measured on the database clock where a worker process does the work
(first ``started_at`` to last ``completed_at`` of the messages), so process start-up is not
counted; latencies are measured by the caller with ``time.perf_counter``. Every throughput is
reported beside a raw baseline measured in the same run through the same driver.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
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
from django.test.utils import CaptureQueriesContext, override_settings

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
    idle_seconds: float = 10.0
    memory_turns: int = 100_000
    contention_callers: int = 2
    contention_calls: int = 200
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


def worker_env(overrides: dict[str, Any] | None = None) -> dict[str, str]:
    import json

    env = dict(os.environ)
    env["DJANGO_SETTINGS_MODULE"] = "bench.settings"
    env["BENCH_SOLID_OBJECTS"] = json.dumps(overrides or {})
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    return env


@contextmanager
def workers(
    count: int, overrides: dict[str, Any] | None = None, args: tuple[str, ...] = ()
) -> Iterator[list[subprocess.Popen[bytes]]]:
    """Real ``manage.py run_actor_worker`` processes, stopped with SIGTERM afterwards."""
    procs = [
        subprocess.Popen(
            [sys.executable, str(ROOT / "bench" / "manage.py"), "run_actor_worker", *args],
            env=worker_env(overrides),
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
        for proc in procs:
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def _pending() -> int:
    from solid_objects.conf import table

    ready = connection.ops.quote_name(table("ready_messages"))
    claimed = connection.ops.quote_name(table("claimed_messages"))
    return int(_scalar(f"SELECT (SELECT COUNT(*) FROM {ready}) + (SELECT COUNT(*) FROM {claimed})"))


def _wait_drained(timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while _pending():
        if time.monotonic() > deadline:
            raise TimeoutError("workers did not drain the mailboxes in time")
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


def raw_baselines(p: Params) -> list[Result]:
    _raw_tables()

    def update(index: int) -> None:
        with connection.cursor() as cursor:
            cursor.execute("UPDATE bench_raw_counter SET n = n + 1 WHERE id = %s", [index + 1])

    insert_sql = {
        "postgresql": "INSERT INTO bench_raw_journal (k, payload) VALUES (%s, %s) "
        "ON CONFLICT (k) DO NOTHING RETURNING id",
        "mysql": "INSERT IGNORE INTO bench_raw_journal (k, payload) VALUES (%s, %s)",
        "sqlite": "INSERT OR IGNORE INTO bench_raw_journal (k, payload) VALUES (%s, %s)",
    }[vendor()]

    def insert(index: int) -> None:
        with connection.cursor() as cursor:
            cursor.execute(insert_sql, [uuid.uuid4().hex, "x"])

    one = _loop_for(p.raw_seconds, update, 1)
    two = _loop_for(p.raw_seconds, update, 2)
    ins = _loop_for(p.raw_seconds, insert, 1)
    return [
        Result("raw UPDATE commit loop, 1 connection", one, "commits/s"),
        Result("raw UPDATE commit loop, 2 connections", two, "commits/s"),
        Result("raw INSERT ON CONFLICT loop, 1 connection", ins, "rows/s"),
    ]


RAW1 = "raw UPDATE commit loop, 1 connection"
RAW2 = "raw UPDATE commit loop, 2 connections"
RAW_INSERT = "raw INSERT ON CONFLICT loop, 1 connection"


# -- actors ------------------------------------------------------------------------------------
def enqueue_rates(p: Params) -> list[Result]:
    from bench.actors import BenchCounter

    reset()
    one = BenchCounter.ref("enqueue-one")
    start = time.perf_counter()
    for _ in range(p.enqueue_count):
        one.enqueue().add(1)
    hot = p.enqueue_count / (time.perf_counter() - start)
    refs = [BenchCounter.ref(f"enqueue-many-{i}") for i in range(200)]
    start = time.perf_counter()
    for i in range(p.enqueue_count):
        refs[i % len(refs)].enqueue().add(1)
    many = p.enqueue_count / (time.perf_counter() - start)
    return [
        Result("async enqueue, one actor", hot, "msg/s", RAW1),
        Result("async enqueue, 200 actors", many, "msg/s", RAW1),
    ]


def _fill(actors: int, per_actor: int, prefix: str) -> None:
    from bench.actors import BenchCounter

    refs = [BenchCounter.ref(f"{prefix}-{i}") for i in range(actors)]
    for _ in range(per_actor):
        for ref in refs:
            ref.enqueue().add(1)


def _drain(
    label: str,
    actors: int,
    per_actor: int,
    worker_count: int,
    overrides: dict[str, Any] | None = None,
    baseline: str = RAW1,
    prepare: Callable[[], None] | None = None,
) -> Result:
    reset()
    if prepare is not None:
        prepare()  # a sync call: committed when it returns
    watermark = _max_message_id()
    _fill(actors, per_actor, label.replace(" ", "-"))
    with workers(worker_count, overrides):
        _wait_drained(timeout=300)
    rate, count = _processing_rate(watermark)
    return Result(
        label, rate, "msg/s", baseline, extra={"messages": count, "workers": worker_count}
    )


def processing_rates(p: Params) -> list[Result]:
    results = [
        _drain("one hot actor, 1 worker", 1, p.hot_messages, 1),
        _drain(
            "one hot actor, 1 worker, MAX_TURNS_PER_COMMIT=1",
            1,
            p.hot_messages // 2,
            1,
            {"MAX_TURNS_PER_COMMIT": 1},
        ),
        _drain(
            f"{p.warm_actors} warm actors round-robin, 1 worker", p.warm_actors, p.warm_rounds, 1
        ),
        _drain(
            f"{p.warm_actors} warm actors round-robin, 2 workers",
            p.warm_actors,
            p.warm_rounds,
            2,
            baseline=RAW2,
        ),
        _drain(f"{p.cold_actors} cold actors, 1 worker", p.cold_actors, 1, 1),
        _drain(f"{p.cold_actors} cold actors, 2 workers", p.cold_actors, 1, 2, baseline=RAW2),
    ]
    return results


def big_state(p: Params) -> list[Result]:
    from bench.actors import BenchCounter

    def prepare() -> None:
        BenchCounter.ref("big-state-0").fill(p.state_bytes)

    empty = _drain("empty state, one actor, 1 worker", 1, p.big_state_messages, 1)
    big = _drain(
        f"{p.state_bytes // 1024} KB state, one actor, 1 worker",
        1,
        p.big_state_messages,
        1,
        prepare=prepare,
    )
    big.name = f"{p.state_bytes // 1024} KB state, one actor, 1 worker"
    big.extra["relative_to_empty"] = big.value / empty.value
    big.note = f"{big.value / empty.value:.0%} of the empty-state rate"
    return [empty, big]


def sync_latency(p: Params) -> list[Result]:
    from bench.actors import BenchCounter

    reset()
    warm = BenchCounter.ref("sync-warm")
    warm.add(1)
    samples = []
    for _ in range(p.sync_samples):
        start = time.perf_counter()
        warm.add(1)
        samples.append((time.perf_counter() - start) * 1000)
    cold_samples = []
    for i in range(p.sync_samples):
        ref = BenchCounter.ref(f"sync-cold-{i}")
        start = time.perf_counter()
        ref.add(1)
        cold_samples.append((time.perf_counter() - start) * 1000)
    out = []
    for label, values in (("warm", samples), ("cold", cold_samples)):
        pct = _percentiles(values)
        for key, value in pct.items():
            out.append(Result(f"sync call latency, {label} actor, {key}", value, "ms"))
    return out


def statement_counts(p: Params) -> list[Result]:
    from bench.actors import BenchCounter
    from solid_objects.activation import ActivationCache
    from solid_objects.lease import acquire
    from solid_objects.passes import run_pass
    from solid_objects.runtime import processes

    reset()
    ref = BenchCounter.ref("statements")
    ref.add(1)  # the instance exists and the caller is registered
    with CaptureQueriesContext(connection) as enqueue_queries:
        ref.enqueue().add(1)
    ref.add(1)  # drain it (and warm the caller cache)
    with CaptureQueriesContext(connection) as sync_queries:
        ref.add(1)
    turns = 40
    for _ in range(turns):
        ref.enqueue().add(1)
    owner = processes.register("worker", "default")
    cache = ActivationCache()
    with (
        override_settings(SOLID_OBJECTS={"MAX_TURNS_PER_COMMIT": 1}),
        CaptureQueriesContext(connection) as turn_queries,
    ):
        activation = acquire("default", owner, [activation_id(ref)], cache)
        assert activation is not None
        run_pass(activation, max_messages=turns, cache=cache)
    grouped_turns = 160
    for _ in range(grouped_turns):
        ref.enqueue().add(1)
    with CaptureQueriesContext(connection) as grouped_queries:
        activation = acquire("default", owner, [activation_id(ref)], cache)
        assert activation is not None
        run_pass(activation, max_messages=grouped_turns, cache=cache)
    processes.deregister(owner, "default")
    return [
        Result(
            "statements per async enqueue",
            len(enqueue_queries),
            "statements",
            note="counting BEGIN/COMMIT as Django logs them",
        ),
        Result(
            "statements per warm turn (one commit per turn)",
            len(turn_queries) / turns,
            "statements",
        ),
        Result(
            "statements per warm turn (grouped commits)",
            len(grouped_queries) / grouped_turns,
            "statements",
        ),
        Result("statements per sync call, warm actor", len(sync_queries), "statements"),
    ]


def activation_id(ref: Any) -> int:
    snapshot = ref.snapshot()
    assert snapshot.instance_id is not None
    return int(snapshot.instance_id)


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


def contention(p: Params) -> list[Result]:
    """Several caller processes making sync calls to ONE actor while a worker runs it (a
    stream of asynchronous messages keeps it busy; issue 9, item 9): the latency a caller
    sees when another process holds the actor."""
    import json
    import tempfile

    reset()
    callers, calls = p.contention_callers, p.contention_calls
    out = []
    with workers(1), tempfile.TemporaryDirectory() as folder:
        from bench.actors import BenchCounter

        BenchCounter.ref("contended").add(1)  # the actor exists; the worker is up
        time.sleep(1.0)
        start_at = time.time() + 2.0
        outputs = [Path(folder) / f"caller-{n}.json" for n in range(callers)]
        procs = [
            subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "bench.callers",
                    "contended",
                    str(calls),
                    str(path),
                    str(start_at),
                ],
                env=worker_env(),
                cwd=ROOT,
            )
            for path in outputs
        ]
        # The worker keeps running the actor: a steady stream of asynchronous messages to it
        # (one every 2 ms) while the callers call, as when the actor is busy.
        done = threading.Event()

        def stream() -> None:
            from django.db import connections as thread_connections

            ref = BenchCounter.ref("contended")
            try:
                while time.time() < start_at:
                    time.sleep(0.001)
                while not done.is_set():
                    ref.enqueue().add(1)
                    done.wait(0.002)
            finally:
                thread_connections.close_all()

        streamer = threading.Thread(target=stream, daemon=True)
        streamer.start()
        started = time.perf_counter()
        for proc in procs:
            proc.wait(300)
        done.set()
        streamer.join(30)
        elapsed = time.perf_counter() - started - max(0.0, start_at - time.time())
        samples = [value for path in outputs for value in json.loads(path.read_text())]
    pct = _percentiles(samples)
    label = f"{callers} callers x {calls} sync calls, one busy actor, one worker"
    for key, value in pct.items():
        out.append(Result(f"contended sync call, {key}", value, "ms", note=label))
    out.append(
        Result("contended sync calls/s", len(samples) / max(elapsed, 1e-9), "calls/s", note=label)
    )
    return out


def _task_drain(
    label: str, enqueue: Callable[[int], Any], count: int, worker_count: int, args: tuple[str, ...]
) -> Result:
    reset()
    for n in range(count):
        enqueue(n)
    with workers(worker_count, args=args):
        _wait_drained(timeout=300)
    rate, done = _processing_rate()
    return Result(
        label,
        rate,
        "tasks/s",
        RAW1 if worker_count == 1 else RAW2,
        extra={"tasks": done, "workers": worker_count, "args": list(args)},
    )


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


MEASURES: dict[str, Callable[[Params], list[Result]]] = {
    "raw": raw_baselines,
    "enqueue": enqueue_rates,
    "processing": processing_rates,
    "sync": sync_latency,
    "statements": statement_counts,
    "wakeup": wakeup_latency,
    "state": big_state,
    "idle": idle_cost,
    "journal": journal,
    "memory": worker_memory,
    "contention": contention,
    "tasks": task_rates,
}
#: Measures left out of a default run (they take minutes): ``--only memory`` runs them.
OPT_IN = {"memory"}
