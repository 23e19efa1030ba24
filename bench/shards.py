"""``--only shards``: one shard against two, on the same machine and the same server.

The second shard is the alias ``bench_b`` of ``bench/settings.py``: a second database of
the same server (``<name>_b``), or a second SQLite file. The same warm actors (round-robin,
as in ``processing``) are drained by real ``run_actor_worker`` processes in three ways,
each :data:`ROUNDS` times (the order rotating each round):

- **one shard**: every actor on ``default``, 2 worker processes with ``--threads 1``;
- **two shards, the same command**: the actors spread over ``default`` and ``bench_b`` by
  the shard hash, the same 2 processes, each now serving both shards (one supervisor, one
  actor thread per shard: twice the threads);
- **two shards, the same threads**: the 2 processes serve both shards with one actor thread
  each in all (``--database`` per process: one process per shard).

Each rate is turns per second from the first start to the last completion over both
databases (each database's own clock: the same server), every message and counter verified,
and reported as the median of its ratios to the one-shard drain of the same round.
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import time
from contextlib import contextmanager
from datetime import datetime
from typing import TYPE_CHECKING, Any

from django.core.management import call_command
from django.db import connections
from django.test.utils import override_settings

if TYPE_CHECKING:
    from collections.abc import Iterator

    from bench.measures import Params, Result

#: The second shard's alias (bench/settings.py).
SECOND = "bench_b"
SHARDS = ("default", SECOND)


@contextmanager
def sharded(aliases: tuple[str, ...]) -> Iterator[None]:
    """This process's settings with ``SOLID_OBJECTS["DATABASES"] = aliases``."""
    from django.conf import settings

    with override_settings(SOLID_OBJECTS={**settings.SOLID_OBJECTS, "DATABASES": list(aliases)}):
        yield


def prepare_second() -> None:
    """Create the second database when missing and migrate it."""
    connection = connections[SECOND]
    if connection.vendor != "sqlite":
        try:
            connection.ensure_connection()
        except Exception:
            name = connection.settings_dict["NAME"]
            with connection.creation._nodb_cursor() as cursor:
                cursor.execute(f"CREATE DATABASE {connection.ops.quote_name(name)}")
    with sharded(SHARDS):
        call_command("migrate", "solid_objects", database=SECOND, verbosity=0)


def reset_second() -> None:
    """Empty the second shard's tables (children first)."""
    from solid_objects.conf import table

    names = ["dead_letters", "broadcasts", "effects", "reminders", "claimed_messages"]
    names += ["ready_messages", "messages", "instances", "processes", "rate_limits"]
    connection = connections[SECOND]
    with connection.cursor() as cursor:
        for name in names:
            cursor.execute(f"DELETE FROM {connection.ops.quote_name(table(name))}")


def _as_dt(value: Any) -> datetime:
    from bench.measures import _as_dt as convert

    return convert(value)


def _figures(alias: str) -> tuple[Any, Any, int, int, int]:
    """``(first start, last completion, completed, all messages, pending)`` on ``alias``."""
    from solid_objects.conf import table

    connection = connections[alias]
    messages = connection.ops.quote_name(table("messages"))
    ready = connection.ops.quote_name(table("ready_messages"))
    claimed = connection.ops.quote_name(table("claimed_messages"))
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT MIN(started_at), MAX(completed_at), COUNT(completed_at), COUNT(*), "
            f"(SELECT COUNT(*) FROM {ready}) + (SELECT COUNT(*) FROM {claimed}) FROM {messages}"
        )
        first, last, completed, total, pending = cursor.fetchone()
    return first, last, int(completed), int(total), int(pending)


def _drain(
    label: str, aliases: tuple[str, ...], actors: int, rounds: int, commands: list[list[str]]
) -> tuple[float, int]:
    from bench.measures import ROOT, OutcomeError, WorkerExited, _fill, reset, worker_env

    reset()
    reset_second()
    with sharded(aliases):
        _fill(actors, rounds, "shards")
    overrides = {"DATABASES": list(aliases)}
    procs = [
        subprocess.Popen(
            [sys.executable, str(ROOT / "bench" / "manage.py"), "run_actor_worker", *args],
            env=worker_env(overrides),
            cwd=ROOT,
        )
        for args in commands
    ]
    try:
        deadline = time.monotonic() + 600
        while any(_figures(alias)[4] for alias in SHARDS):
            if time.monotonic() > deadline:
                raise TimeoutError(f"{label}: not drained in time")
            for proc in procs:
                if proc.poll() is not None:
                    raise WorkerExited(f"{label}: a worker exited (status {proc.returncode})")
            time.sleep(0.05)
    finally:
        for proc in procs:
            proc.terminate()
        for proc in procs:
            proc.wait(60)
    figures = [_figures(alias) for alias in SHARDS]
    done = sum(f[2] for f in figures)
    if done != actors * rounds or sum(f[3] for f in figures) != done:
        raise OutcomeError(f"{label}: {done} of {actors * rounds} messages completed")
    used = [f for f in figures if f[3]]
    if len(used) != len(aliases):
        raise OutcomeError(f"{label}: messages on {len(used)} databases, {len(aliases)} expected")
    with sharded(aliases):
        _verify_counters(actors, rounds)
    first = min(_as_dt(f[0]) for f in used)
    last = max(_as_dt(f[1]) for f in used)
    return done / max((last - first).total_seconds(), 1e-6), done


def _verify_counters(actors: int, value: int) -> None:
    from bench.actors import BenchCounter
    from bench.measures import OutcomeError

    wrong = [
        n
        for n in range(actors)
        if BenchCounter.ref(f"shards-{n}").snapshot().state.get("value") != value
    ]
    if wrong:
        raise OutcomeError(f"{len(wrong)} counters not at {value}: shards-{wrong[0]}...")


#: Rounds of the three drains (their order rotates each round); the published figures are
#: the medians, so a neighbour's burst of load on the machine skews one round, not the result.
ROUNDS = 3


def shard_rates(p: Params) -> list[Result]:
    from bench.measures import Result

    prepare_second()
    actors, rounds = p.warm_actors, p.warm_rounds
    scenarios: list[tuple[str, tuple[str, ...], list[list[str]], str]] = [
        ("one shard, 2 workers --threads 1", ("default",), [[], []], ""),
        (
            "two shards, the same 2 workers serving both",
            SHARDS,
            [[], []],
            "one actor thread per shard in each worker: 4 threads in all",
        ),
        (
            "two shards, 2 workers with --database one shard each",
            SHARDS,
            [["--database", "default"], ["--database", SECOND]],
            "2 actor threads in all, as with one shard",
        ),
    ]
    rates: list[list[float]] = [[] for _ in scenarios]
    count = 0
    for round_ in range(ROUNDS):
        order = [(round_ + offset) % len(scenarios) for offset in range(len(scenarios))]
        for index in order:
            label, aliases, commands, _ = scenarios[index]
            rate, count = _drain(label, aliases, actors, rounds, commands)
            rates[index].append(rate)
    what = f"shards: {actors} warm actors round-robin, {count:,} turns"
    one = statistics.median(rates[0])
    results = [
        Result(
            f"{what}, {scenarios[0][0]}",
            one,
            "msg/s",
            note=f"median of {ROUNDS} rounds",
            extra={"messages": count, "rates": rates[0]},
        )
    ]
    for index in (1, 2):
        label, _, _, note = scenarios[index]
        ratios = [two / single for two, single in zip(rates[index], rates[0], strict=True)]
        results.append(
            Result(
                f"{what}, {label}",
                statistics.median(rates[index]),
                "msg/s",
                ratio=statistics.median(ratios),
                note=f"median ratio to one shard over {ROUNDS} rounds "
                f"({', '.join(f'{r:.2f}' for r in ratios)}); {note}",
                extra={"messages": count, "rates": rates[index], "ratios": ratios},
            )
        )
    return results
