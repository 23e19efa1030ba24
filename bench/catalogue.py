"""The measures ``python -m bench`` can run, by name (``--only``), and running one group
between its baseline samples."""

from __future__ import annotations

from collections.abc import Callable

from bench.measures import (
    GROUP_BASELINES,
    Params,
    Result,
    big_state,
    bracketed,
    callers,
    django_defaults,
    enqueue_rates,
    idle_cost,
    journal,
    processing_rates,
    raw_baselines,
    sqlite_full,
    state_encoding,
    sustained,
    sync_latency,
    task_rates,
    wakeup_latency,
    worker_memory,
)
from bench.shards import shard_rates


def run_group(name: str, p: Params) -> list[Result]:
    return bracketed(lambda: MEASURES[name](p), GROUP_BASELINES.get(name, ()))


MEASURES: dict[str, Callable[[Params], list[Result]]] = {
    "raw": raw_baselines,
    "enqueue": enqueue_rates,
    "processing": processing_rates,
    "sync": sync_latency,
    "wakeup": wakeup_latency,
    "state": big_state,
    "encoding": state_encoding,
    "idle": idle_cost,
    "journal": journal,
    "memory": worker_memory,
    "callers": callers,
    "sustained": sustained,
    "defaults": django_defaults,
    "full": sqlite_full,
    "tasks": task_rates,
    "shards": shard_rates,
}
#: Measures left out of a default run (minutes, or a second database): ``--only NAME``.
OPT_IN = {"memory", "shards"}
