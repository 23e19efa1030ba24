"""Prometheus metrics (the ``metrics`` extra: ``prometheus-client``).

:func:`metrics_view` serves the text exposition format; include it with
``solid_objects.monitoring_urls`` or route it yourself. Figures are read from the database
at scrape time (the same grouped, index-backed queries as ``solid_objects_status`` and the
admin overview), so one scrape of any web process shows the whole deployment, whichever
processes run the roles. Labels are actor types, outboxes, role kinds and effect names;
never arguments, state or results.

Metric names (``METRICS`` lists them with their help text):

- ``solid_objects_mailbox_ready_messages{actor_type}``, ``..._due_messages{actor_type}``,
  ``..._claimed_messages{actor_type}``: mailbox depth;
- ``solid_objects_mailbox_lag_seconds{actor_type}``: age of the oldest due message;
- ``solid_objects_outbox_rows{outbox,status}`` and ``solid_objects_outbox_lag_seconds{outbox}``
  (effects, broadcasts);
- ``solid_objects_reminders_scheduled``, ``solid_objects_reminders_due``,
  ``solid_objects_reminders_lag_seconds``;
- ``solid_objects_turns_completed_last_minute{actor_type}``: throughput;
- ``solid_objects_dead_letters{actor_type}`` (not retried), ``solid_objects_dead_effects{name}``:
  failures;
- ``solid_objects_processes{kind,state}`` (state ``live``, ``stale`` or ``idle``) and
  ``solid_objects_role_up{kind}`` (1 when a live process of the role kind heartbeats).

With shards (``SOLID_OBJECTS["DATABASES"]``) one scrape reads every alias holding the
tables: each figure above gets a ``database`` label (the alias; ``sum without (database)``
gives the totals). Processes and roles are counted per shard as well: a worker registers
its rows on each shard it serves, so ``solid_objects_role_up{database="b"} == 0`` is a shard
nobody serves.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from django.http import HttpRequest, HttpResponse
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import CollectorRegistry

METRICS = {
    "solid_objects_mailbox_ready_messages": "Messages in mailboxes (due or scheduled)",
    "solid_objects_mailbox_due_messages": "Messages due now, waiting for a worker",
    "solid_objects_mailbox_claimed_messages": "Messages whose turn is running",
    "solid_objects_mailbox_lag_seconds": "Age of the oldest due message",
    "solid_objects_outbox_rows": "Outbox rows by status (pending, due, processing, dead)",
    "solid_objects_outbox_lag_seconds": "Age of the oldest due outbox row",
    "solid_objects_reminders_scheduled": "Scheduled reminders",
    "solid_objects_reminders_due": "Reminders due now",
    "solid_objects_reminders_lag_seconds": "Age of the oldest due reminder",
    "solid_objects_turns_completed_last_minute": "Turns completed in the last 60 seconds",
    "solid_objects_dead_letters": "Dead letters not retried",
    "solid_objects_dead_effects": "Dead effects",
    "solid_objects_processes": "Registered processes not stopped, by state",
    "solid_objects_role_up": "1 if a live process of the role kind heartbeats, else 0",
}
ROLE_KINDS = ("worker", "effect", "reminder", "broadcast")


def _gauge(name: str, labels: list[str] | None = None) -> GaugeMetricFamily:
    return GaugeMetricFamily(name, METRICS[name], labels=labels)


class SolidObjectsCollector:
    """A prometheus-client collector reading the figures at each scrape."""

    def __init__(self, using: str | None = None) -> None:
        self.using = using

    def describe(self) -> list[Any]:
        return []  # figures depend on the database: no collection at registration

    def collect(self) -> Iterator[GaugeMetricFamily]:
        from django.db import connections

        from .db import overview
        from .db.vendors import dialect_for
        from .routers import actor_aliases, require_actor_alias
        from .status import collect

        aliases = (require_actor_alias(self.using),) if self.using else actor_aliases()
        sharded = len(aliases) > 1
        #: Sharded, every figure of one alias carries its ``database`` label.
        extra = ["database"] if sharded else []
        reports: dict[str, dict[str, Any]] = {}
        figures: dict[str, tuple[dict[str, int], dict[str, int], dict[str, int]]] = {}
        for alias in aliases:
            reports[alias] = collect(alias, dead_letter_limit=0)
            connection = connections[alias]
            dialect = dialect_for(connection)
            with connection.cursor() as cursor:
                figures[alias] = (
                    overview.completed_by_type(cursor, dialect, 60.0),
                    overview.dead_by_type(cursor, dialect),
                    overview.dead_effects_by_name(cursor, dialect),
                )

        def label(alias: str, *values: str) -> list[str]:
            return [*values, alias] if sharded else list(values)

        families = {
            key: _gauge(f"solid_objects_mailbox_{key}", ["actor_type", *extra])
            for key in ("ready_messages", "due_messages", "claimed_messages", "lag_seconds")
        }
        rows = _gauge("solid_objects_outbox_rows", ["outbox", "status", *extra])
        lag = _gauge("solid_objects_outbox_lag_seconds", ["outbox", *extra])
        reminder_families = {
            key: _gauge(f"solid_objects_reminders_{key}", extra)
            for key in ("scheduled", "due", "lag_seconds")
        }
        completed = _gauge("solid_objects_turns_completed_last_minute", ["actor_type", *extra])
        letters = _gauge("solid_objects_dead_letters", ["actor_type", *extra])
        effects = _gauge("solid_objects_dead_effects", ["name", *extra])
        for alias, report in reports.items():
            for row in report["mailbox"]["by_actor_type"]:
                labels = label(alias, row["actor_type"])
                families["ready_messages"].add_metric(labels, row["ready"])
                families["due_messages"].add_metric(labels, row["due"])
                families["claimed_messages"].add_metric(labels, row.get("claimed", 0))
                families["lag_seconds"].add_metric(labels, row["lag_seconds"] or 0.0)
            for outbox, values in report["outbox"].items():
                for status in ("pending", "due", "processing", "dead"):
                    rows.add_metric(label(alias, outbox, status), values[status])
                lag.add_metric(label(alias, outbox), values["lag_seconds"] or 0.0)
            for key, family in reminder_families.items():
                family.add_metric(label(alias), report["reminders"][key] or 0.0)
            throughput, dead, dead_effects = figures[alias]
            for actor_type, count in sorted(throughput.items()):
                completed.add_metric(label(alias, actor_type), count)
            for actor_type, count in sorted(dead.items()):
                letters.add_metric(label(alias, actor_type), count)
            for name, count in sorted(dead_effects.items()):
                effects.add_metric(label(alias, name), count)
        yield from families.values()
        yield rows
        yield lag
        yield from reminder_families.values()
        yield completed
        yield letters
        yield effects

        # A worker registers its rows on each shard it serves: processes and roles are
        # counted per shard too (a shard nobody serves shows role_up 0).
        processes = _gauge("solid_objects_processes", ["kind", "state", *extra])
        up = _gauge("solid_objects_role_up", ["kind", *extra])
        for alias, report in reports.items():
            counts: dict[tuple[str, str], int] = {}
            for process in report["processes"]["live"]:
                state = "idle" if process["idle"] else "stale" if process["stale"] else "live"
                kind_state = (process["kind"], state)
                counts[kind_state] = counts.get(kind_state, 0) + 1
            for (kind, state), count in sorted(counts.items()):
                processes.add_metric(label(alias, kind, state), count)
            for kind in ROLE_KINDS:
                up.add_metric(label(alias, kind), 1 if counts.get((kind, "live")) else 0)
        yield processes
        yield up


def registry(using: str | None = None) -> CollectorRegistry:
    """A registry holding only our collector (the process's default registry is left
    alone: add :class:`SolidObjectsCollector` to it yourself to serve both together)."""
    result = CollectorRegistry(auto_describe=False)
    result.register(SolidObjectsCollector(using))
    return result


def metrics_view(request: HttpRequest) -> HttpResponse:
    """The Prometheus text format of our metrics (protect it like any internal endpoint)."""
    return HttpResponse(generate_latest(registry()), content_type=CONTENT_TYPE_LATEST)
