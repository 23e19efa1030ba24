"""The exact invariants checked once a soak has drained and every worker has stopped.

:func:`violations` reads the tables directly and compares them with the :class:`Ledger` of
what was enqueued. Each broken promise becomes one line naming the actor, the message
(number, id, sequence) and what was found, so a report can point at the exact messages:

- each actor's ``seen`` is exactly the numbers of its ``apply`` messages, in sequence order
  (nothing lost, nothing applied twice, no rejected or failed turn's change kept);
- each applied message's result is its position in ``seen`` (it ran on the state left by
  exactly its predecessors);
- ``state_revision`` is the sequence of the actor's last applied message;
- every applied or rejected message has ``completed_at``; rejected ones their rejection;
- dead letters are exactly the ``fail`` messages, once each, with their own error (none
  from a lost activation);
- no message the soak did not enqueue, no ready or claimed row left;
- no lease held by a process that is not running, and no worker row left running.

With shards (``SOLID_OBJECTS["DATABASES"]``) every check runs on each shard for the actors
that live there (ids are numbered per database), and no soak actor may have an instance row
on a shard that is not its own.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from typing import Any

from solid_objects.models import ClaimedMessage, DeadLetter, Instance, Message, ReadyMessage
from solid_objects.models import Process as ProcessRow
from solid_objects.shards import database_for, databases, is_sharded
from tests.testapp.actors.soak import REJECTION_CODE, SoakCounter

from .ledger import APPLY, FAIL, REJECT, Ledger, Sent

FAILURE_CLASS = "tests.testapp.actors.soak.SoakFailure"
#: At most this many lines per kind of violation (a broken runtime breaks thousands).
MAX_LINES_PER_CHECK = 20


def violations(ledger: Ledger, *, workers_stopped: bool = True) -> list[str]:
    """Every violated invariant, one line each (empty when the run kept every promise).
    ``workers_stopped``: no worker may still be registered as running."""
    found: dict[str, list[str]] = {}
    sharded = is_sharded()
    for alias in databases():

        def report(check: str, line: str, alias: str = alias) -> None:
            found.setdefault(check, []).append(f"[{alias}] {line}" if sharded else line)

        _check_database(ledger, alias, report, workers_stopped)
    lines = []
    for check, entries in found.items():
        lines.extend(f"{check}: {entry}" for entry in entries[:MAX_LINES_PER_CHECK])
        if len(entries) > MAX_LINES_PER_CHECK:
            lines.append(f"{check}: ... {len(entries) - MAX_LINES_PER_CHECK} more")
    return lines


def _check_database(ledger: Ledger, alias: str, report: Any, workers_stopped: bool) -> None:
    actor_type = SoakCounter.actor_type

    def here(actor_id: str) -> bool:
        return database_for(actor_type, actor_id) == alias

    instances = {
        row["actor_id"]: row
        for row in Instance.objects.using(alias)
        .filter(actor_type=actor_type)
        .values("id", "actor_id", "state", "state_revision", "activation_owner_id")
    }
    for actor_id in sorted(actor_id for actor_id in instances if not here(actor_id)):
        report("shard", f"{actor_id} has an instance row on {alias!r}, not its shard")
    messages = {
        row["id"]: row
        for row in Message.objects.using(alias)
        .filter(actor_type=actor_type)
        .values("id", "result", "rejection", "completed_at", "rejected_at", "attempt_count")
    }
    mine = {actor_id: sent for actor_id, sent in ledger.by_actor.items() if here(actor_id)}
    for actor_id, sent in mine.items():
        if sent:
            _check_actor(actor_id, sent, instances.get(actor_id), messages, report)
    enqueued = {item.message_id for sent in mine.values() for item in sent}
    for message_id in sorted(set(messages) - enqueued):
        report("unexpected message", f"message id {message_id} was never enqueued by the soak")
    failing = {
        item.message_id: item for sent in mine.values() for item in sent if item.kind == FAIL
    }
    _check_dead_letters(alias, failing, report)
    _check_leftovers(alias, report, workers_stopped)


def _check_actor(
    actor_id: str,
    sent: list[Sent],
    instance: dict[str, Any] | None,
    messages: dict[int, dict[str, Any]],
    report: Any,
) -> None:
    if instance is None:
        report("missing actor", f"{actor_id} has no instance row")
        return
    sent = sorted(sent, key=lambda item: item.sequence)
    applied = [item for item in sent if item.kind == APPLY]
    seen = (instance["state"] or {}).get("seen", [])
    expected = [item.n for item in applied]
    consistent = seen == expected
    if not consistent:
        report("applied exactly once, in order", _difference(actor_id, seen, applied, sent))
    last = applied[-1].sequence if applied else 0
    if instance["state_revision"] != last:
        report(
            "state_revision",
            f"{actor_id}: state_revision {instance['state_revision']}, "
            f"last applied sequence {last}",
        )
    position = 0
    for item in sent:
        row = messages.get(item.message_id)
        label = f"{actor_id} n={item.n} (message {item.message_id}, sequence {item.sequence})"
        if row is None:
            report("message row", f"{label}: the message row is gone")
            continue
        if item.kind == APPLY:
            position += 1
            if row["completed_at"] is None:
                report("completed_at", f"{label}: applied message has no completed_at")
            if row["rejected_at"] is not None:
                report("outcome", f"{label}: an apply message was rejected")
            # Once ``seen`` is wrong every later position is too: reported once, above.
            if consistent and row["result"] != position:
                report(
                    "result",
                    f"{label}: result {row['result']!r}, expected its position {position}",
                )
        elif item.kind == REJECT:
            code = (row["rejection"] or {}).get("code")
            if row["completed_at"] is None or row["rejected_at"] is None or code != REJECTION_CODE:
                report(
                    "outcome",
                    f"{label}: expected a rejection, found completed_at={row['completed_at']} "
                    f"rejected_at={row['rejected_at']} code={code!r}",
                )
        elif item.kind == FAIL and row["completed_at"] is not None:
            report("outcome", f"{label}: a failing message has completed_at")


def _difference(actor_id: str, seen: list[Any], applied: list[Sent], sent: list[Sent]) -> str:
    """Name the messages applied twice, lost, kept although refused, and the first swap."""
    by_n = {item.n: item for item in sent}
    expected = [item.n for item in applied]
    counts = Counter(seen)
    parts = []

    def describe(n: Any) -> str:
        item = by_n.get(n)
        if item is None:
            return f"n={n!r} (not sent to this actor)"
        return f"n={n} (message {item.message_id}, sequence {item.sequence}, {item.kind})"

    twice = [n for n, count in counts.items() if count > 1]
    if twice:
        parts.append("applied more than once: " + ", ".join(map(describe, twice)))
    lost = [n for n in expected if n not in counts]
    if lost:
        parts.append("never applied: " + ", ".join(map(describe, lost)))
    kept = [n for n in counts if n not in set(expected)]
    if kept:
        parts.append("applied but must not be: " + ", ".join(map(describe, kept)))
    for index, (got, want) in enumerate(zip(seen, expected, strict=False)):
        if got != want:
            parts.append(f"first difference at position {index + 1}: {got!r} instead of {want}")
            break
    parts.append(f"{len(seen)} applied, {len(expected)} expected")
    return f"{actor_id}: " + "; ".join(parts)


def _check_dead_letters(alias: str, failing: dict[int, Sent], report: Any) -> None:
    rows = list(
        DeadLetter.objects.using(alias)
        .filter(actor_type=SoakCounter.actor_type)
        .values_list("message_id", "exception_class")
    )
    counts = Counter(message_id for message_id, _ in rows)
    for message_id, count in sorted(counts.items()):
        if count > 1:
            report("dead letters", f"message {message_id} has {count} dead letters")
    for message_id, exception_class in rows:
        if message_id not in failing:
            report(
                "dead letters",
                f"message {message_id} was dead-lettered ({exception_class}) but should not be",
            )
        elif exception_class != FAILURE_CLASS:
            report(
                "dead letters",
                f"message {message_id} was dead-lettered as {exception_class}, not {FAILURE_CLASS}",
            )
    for message_id, item in sorted(failing.items()):
        if message_id not in counts:
            report("dead letters", f"{item.actor_id} n={item.n} (message {message_id}) has none")


def _check_leftovers(alias: str, report: Any, workers_stopped: bool) -> None:
    for table, model in (("ready", ReadyMessage), ("claimed", ClaimedMessage)):
        rows = model.objects.using(alias).order_by("message_id")
        ids = list(rows.values_list("message_id", flat=True))
        if ids:
            report("mailbox", f"{len(ids)} {table} row(s) left: messages {_first(ids)}")
    leases = (
        Instance.objects.using(alias)
        .filter(activation_owner__isnull=False)
        .exclude(activation_owner__shutdown_state=ProcessRow.ShutdownState.RUNNING)
    )
    for row in leases.values("actor_id", "activation_owner_id", "activation_owner__pid"):
        report(
            "leases",
            f"{row['actor_id']} is leased by process {row['activation_owner_id']} "
            f"(pid {row['activation_owner__pid']}), which is not running",
        )
    orphans = Instance.objects.using(alias).filter(
        activation_owner__isnull=True, activation_token__isnull=False
    )
    for actor_id in orphans.values_list("actor_id", flat=True):
        report("leases", f"{actor_id} has an activation token but no owner")
    if workers_stopped:
        running = (
            ProcessRow.objects.using(alias)
            .filter(kind="worker")
            .exclude(shutdown_state=ProcessRow.ShutdownState.STOPPED)
        )
        for row in running.values("id", "pid", "shutdown_state"):
            report(
                "processes",
                f"worker row {row['id']} (pid {row['pid']}) is {row['shutdown_state']} "
                "although every worker is gone",
            )


def _first(ids: Iterable[int], limit: int = 10) -> str:
    values = list(ids)
    shown = ", ".join(map(str, values[:limit]))
    return shown + (f" and {len(values) - limit} more" if len(values) > limit else "")
