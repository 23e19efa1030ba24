"""Retention (PRODUCT §A9): delete history nobody needs, never work that is still owed.

Three kinds, each previewed (counted) or pruned in batches of ``PRUNE_BATCH_SIZE``, one
short transaction per batch, times on the database clock:

- **messages** completed (or rejected) before ``now - MESSAGE_RETENTION`` that nothing
  still refers to: no ready or claimed membership, no dead letter (of the message, or one
  retried as it), no effect or broadcast of the message that is ``pending``,
  ``processing`` or ``dead``. Their finished effects and delivered broadcasts go with them
  (the foreign keys cascade in the database). Dead-lettered messages are kept.
- **processes** stopped before ``now - PROCESS_RETENTION`` that own nothing: no lease, no
  claimed turn, no ``processing`` outbox row, no reminder claim.
- **instances** of actor types that declare ``instance_retention``, idle since before
  ``now - instance_retention`` (``last_used_at``, or ``created_at`` if never used), not
  paused, with no lease, no ready or claimed message, no scheduled or paused reminder, no
  effect or broadcast that is unfinished or dead, and no dead letter. Candidates are
  locked (``SKIP LOCKED``: an enqueue or a lease holding the row wins) and rechecked under
  the lock before deletion, so an enqueue that commits meanwhile keeps its actor alive.

Every condition is also part of the ``DELETE`` (or the locked recheck), so a row that
changes between the batch's ``SELECT`` and its deletion is left alone.

With shards (``SOLID_OBJECTS["DATABASES"]``) each alias holds its own history:
:func:`preview_all` and :func:`prune_all` (``manage.py prune_solid_objects``) cover the
home alias and every shard, and ``run_actor_worker --all-roles`` prunes each shard it
serves from that shard's supervisor.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from django.db import IntegrityError, connections, transaction

from . import signals
from .conf import get_settings
from .db.cursor import Cursor
from .db.dialect import Dialect
from .db.vendors import dialect_for

logger = logging.getLogger("solid_objects")

KINDS = ("messages", "instances", "processes")
Progress = Callable[[str, int], None]


@dataclass
class PruneCounts:
    """Rows per kind (to delete in a preview, deleted by a prune)."""

    messages: int = 0
    instances: int = 0
    processes: int = 0
    #: Instances per actor type (the types that have an ``instance_retention``).
    instances_by_type: dict[str, int] = field(default_factory=dict)

    def add(self, other: PruneCounts) -> None:
        """Count ``other``'s rows too (the same kinds on another database)."""
        self.messages += other.messages
        self.instances += other.instances
        self.processes += other.processes
        for actor_type, count in other.instances_by_type.items():
            self.instances_by_type[actor_type] = self.instances_by_type.get(actor_type, 0) + count

    def as_dict(self) -> dict[str, Any]:
        return {
            "messages": self.messages,
            "instances": self.instances,
            "processes": self.processes,
            "instances_by_type": dict(self.instances_by_type),
        }


def retained_types() -> dict[str, timedelta]:
    """Actor types with an ``instance_retention``, and that retention."""
    from .registry import actor_types

    types: dict[str, timedelta] = {}
    for actor_type, spec in actor_types().items():
        retention = getattr(spec.cls, "instance_retention", None)
        if isinstance(retention, int | float) and not isinstance(retention, bool):
            retention = timedelta(seconds=retention)
        if isinstance(retention, timedelta) and retention.total_seconds() > 0:
            types[actor_type] = retention
    return types


# -- conditions (``{o}`` is how the statement names the outer row) ---------------------------
def _message_conditions(d: Dialect, cutoff: str) -> str:
    return (
        f"{{o}}.completed_at IS NOT NULL AND {{o}}.completed_at < {cutoff} "
        f"AND NOT EXISTS (SELECT 1 FROM {d.t_ready} r WHERE r.message_id = {{o}}.id) "
        f"AND NOT EXISTS (SELECT 1 FROM {d.t_claimed} c WHERE c.message_id = {{o}}.id) "
        f"AND NOT EXISTS (SELECT 1 FROM {d.t_dead} dl WHERE dl.message_id = {{o}}.id) "
        f"AND NOT EXISTS (SELECT 1 FROM {d.t_dead} dr WHERE dr.retried_message_id = {{o}}.id) "
        f"AND NOT EXISTS (SELECT 1 FROM {d.t_effects} e WHERE e.message_id = {{o}}.id "
        "AND e.status IN ('pending', 'processing', 'dead')) "
        f"AND NOT EXISTS (SELECT 1 FROM {d.t_broadcasts} b WHERE b.message_id = {{o}}.id "
        "AND b.status IN ('pending', 'processing', 'dead'))"
    )


def _process_conditions(d: Dialect, cutoff: str) -> str:
    return (
        "{o}.shutdown_state = 'stopped' "
        f"AND COALESCE({{o}}.stopped_at, {{o}}.last_heartbeat_at) < {cutoff} "
        f"AND NOT EXISTS (SELECT 1 FROM {d.t_instances} i WHERE i.activation_owner_id = {{o}}.id) "
        f"AND NOT EXISTS (SELECT 1 FROM {d.t_claimed} c WHERE c.process_id = {{o}}.id) "
        f"AND NOT EXISTS (SELECT 1 FROM {d.t_effects} e WHERE e.claimed_by = {{o}}.id "
        "AND e.status = 'processing') "
        f"AND NOT EXISTS (SELECT 1 FROM {d.t_broadcasts} b WHERE b.claimed_by = {{o}}.id "
        "AND b.status = 'processing') "
        f"AND NOT EXISTS (SELECT 1 FROM {d.t_reminders} rm WHERE rm.claimed_by = {{o}}.id)"
    )


def _instance_conditions(d: Dialect, cutoff: str) -> str:
    return (
        "{o}.actor_type = %s AND {o}.paused_at IS NULL AND {o}.activation_owner_id IS NULL "
        f"AND ({{o}}.last_used_at < {cutoff} "
        f"OR ({{o}}.last_used_at IS NULL AND {{o}}.created_at < {cutoff})) "
        f"AND NOT EXISTS (SELECT 1 FROM {d.t_ready} r WHERE r.instance_id = {{o}}.id) "
        f"AND NOT EXISTS (SELECT 1 FROM {d.t_claimed} c WHERE c.instance_id = {{o}}.id) "
        f"AND NOT EXISTS (SELECT 1 FROM {d.t_reminders} rm WHERE rm.instance_id = {{o}}.id "
        "AND rm.status IN ('scheduled', 'paused')) "
        f"AND NOT EXISTS (SELECT 1 FROM {d.t_effects} e WHERE e.instance_id = {{o}}.id "
        "AND e.status IN ('pending', 'processing', 'dead')) "
        f"AND NOT EXISTS (SELECT 1 FROM {d.t_broadcasts} b WHERE b.instance_id = {{o}}.id "
        "AND b.status IN ('pending', 'processing', 'dead')) "
        f"AND NOT EXISTS (SELECT 1 FROM {d.t_dead} dl WHERE dl.instance_id = {{o}}.id)"
    )


def _cutoff(dialect: Dialect, age: timedelta) -> tuple[str, list[Any]]:
    """``now - age`` on the database clock: SQL and parameters."""
    return dialect.now_plus(-age.total_seconds())


def databases() -> tuple[str, ...]:
    """Every alias with history to prune: the home alias ``DATABASE`` first, then each shard."""
    settings = get_settings()
    return tuple(dict.fromkeys((settings.DATABASE, *settings.shards)))


def preview_all(aliases: Iterable[str], **kinds: bool) -> PruneCounts:
    """:func:`preview` of each alias, summed."""
    counts = PruneCounts()
    for alias in aliases:
        counts.add(preview(alias, **kinds))
    return counts


def prune_all(
    aliases: Iterable[str],
    *,
    messages: bool = True,
    instances: bool = True,
    processes: bool = True,
    batch_size: int | None = None,
    progress: Progress | None = None,
    should_stop: Callable[[], bool] | None = None,
) -> PruneCounts:
    """:func:`prune` of each alias, summed: kind by kind (messages on every alias, then
    instances, then processes), so ``progress`` sees one kind at a time."""
    aliases = tuple(aliases)
    selected = {"messages": messages, "instances": instances, "processes": processes}
    if len(aliases) == 1:  # one database: one prune, as unsharded
        return prune(
            aliases[0],
            batch_size=batch_size,
            progress=progress,
            should_stop=should_stop,
            **selected,
        )
    counts = PruneCounts()
    for kind in ("messages", "instances", "processes"):
        if not selected[kind]:
            continue
        only = {name: name == kind for name in selected}
        for alias in aliases:
            if should_stop is not None and should_stop():
                return counts
            counts.add(
                prune(
                    alias,
                    batch_size=batch_size,
                    progress=progress,
                    should_stop=should_stop,
                    **only,
                )
            )
    return counts


def _marks(values: Iterable[Any]) -> str:
    return ", ".join("%s" for _ in values)


# -- preview -----------------------------------------------------------------------------------
def preview(
    using: str | None = None,
    *,
    messages: bool = True,
    instances: bool = True,
    processes: bool = True,
) -> PruneCounts:
    """How many rows :func:`prune` would delete now (nothing is written)."""
    settings = get_settings()
    alias = using or settings.DATABASE
    connection = connections[alias]
    d = dialect_for(connection)
    counts = PruneCounts()
    with connection.cursor() as cursor:
        if messages:
            cutoff, params = _cutoff(d, settings.MESSAGE_RETENTION)
            where = _message_conditions(d, cutoff).format(o="m")
            cursor.execute(f"SELECT COUNT(*) FROM {d.t_messages} m WHERE {where}", params)
            counts.messages = int(cursor.fetchone()[0])
        if processes:
            cutoff, params = _cutoff(d, settings.PROCESS_RETENTION)
            where = _process_conditions(d, cutoff).format(o="p")
            cursor.execute(f"SELECT COUNT(*) FROM {d.t_processes} p WHERE {where}", params)
            counts.processes = int(cursor.fetchone()[0])
        if instances:
            for actor_type, retention in retained_types().items():
                cutoff, params = _cutoff(d, retention)
                where = _instance_conditions(d, cutoff).format(o="i")
                cursor.execute(
                    f"SELECT COUNT(*) FROM {d.t_instances} i WHERE {where}",
                    [actor_type, *params, *params],
                )
                found = int(cursor.fetchone()[0])
                counts.instances_by_type[actor_type] = found
                counts.instances += found
    return counts


# -- prune -------------------------------------------------------------------------------------
def prune(
    using: str | None = None,
    *,
    messages: bool = True,
    instances: bool = True,
    processes: bool = True,
    batch_size: int | None = None,
    progress: Progress | None = None,
    should_stop: Callable[[], bool] | None = None,
) -> PruneCounts:
    """Delete what retention allows, batch by batch; returns what was deleted.

    ``progress(kind, rows)`` is called after each batch; ``should_stop()`` is asked between
    batches (a stopping worker ends its retention run early).
    """
    settings = get_settings()
    alias = using or settings.DATABASE
    batch = batch_size or settings.PRUNE_BATCH_SIZE
    stop = should_stop or (lambda: False)
    report = progress or (lambda kind, rows: None)
    counts = PruneCounts()
    if messages:
        counts.messages = _prune_messages(alias, batch, report, stop)
    if instances:
        for actor_type, retention in retained_types().items():
            if stop():
                break
            found = _prune_instances(alias, actor_type, retention, batch, report, stop)
            counts.instances_by_type[actor_type] = found
            counts.instances += found
    if processes and not stop():
        counts.processes = _prune_processes(alias, batch, report, stop)
    if counts.messages or counts.instances or counts.processes:
        logger.info(
            "retention pruned %d messages, %d instances, %d processes",
            counts.messages,
            counts.instances,
            counts.processes,
        )
    return counts


def _prune_messages(alias: str, batch: int, report: Progress, stop: Callable[[], bool]) -> int:
    connection = connections[alias]
    d = dialect_for(connection)
    cutoff, params = _cutoff(d, get_settings().MESSAGE_RETENTION)
    where = _message_conditions(d, cutoff)
    deleted = 0
    while not stop():
        with transaction.atomic(using=alias), connection.cursor() as cursor:
            cursor.execute(
                f"SELECT m.id FROM {d.t_messages} m WHERE {where.format(o='m')} "
                "ORDER BY m.completed_at, m.id LIMIT %s",
                [*params, batch],
            )
            ids = [row[0] for row in cursor.fetchall()]
            if not ids:
                break
            cursor.execute(
                f"DELETE FROM {d.t_messages} WHERE id IN ({_marks(ids)}) "
                f"AND {where.format(o=d.t_messages)}",
                [*ids, *params],
            )
            rows = max(cursor.rowcount, 0)
        deleted += rows
        report("messages", rows)
        if len(ids) < batch or rows == 0:
            break
    return deleted


def _prune_processes(alias: str, batch: int, report: Progress, stop: Callable[[], bool]) -> int:
    connection = connections[alias]
    d = dialect_for(connection)
    cutoff, params = _cutoff(d, get_settings().PROCESS_RETENTION)
    where = _process_conditions(d, cutoff).format(o="p")
    deleted = 0
    while not stop():
        try:
            with transaction.atomic(using=alias), connection.cursor() as cursor:
                cursor.execute(
                    f"SELECT p.id FROM {d.t_processes} p WHERE {where} ORDER BY p.id LIMIT %s",
                    [*params, batch],
                )
                candidates = [row[0] for row in cursor.fetchall()]
                ids = _recheck(cursor, d, d.t_processes, "p", candidates, where, params)
                if ids:
                    cursor.execute(f"DELETE FROM {d.t_processes} WHERE id IN ({_marks(ids)})", ids)
        except IntegrityError as exc:  # a reference appeared despite the lock: next run
            logger.warning("retention: a stopped process is still referenced: %s", exc)
            break
        deleted += len(ids)
        if ids:
            report("processes", len(ids))
        for process_id in ids:
            signals.send(signals.process_pruned, process_id=process_id, reason="retention")
        if len(candidates) < batch or not ids:
            break
    return deleted


def _prune_instances(
    alias: str,
    actor_type: str,
    retention: timedelta,
    batch: int,
    report: Progress,
    stop: Callable[[], bool],
) -> int:
    connection = connections[alias]
    d = dialect_for(connection)
    cutoff, cutoff_params = _cutoff(d, retention)
    where = _instance_conditions(d, cutoff).format(o="i")
    params = [actor_type, *cutoff_params, *cutoff_params]
    deleted = 0
    skipped: set[int] = set()  # locked by someone else during this run: do not spin on them
    while not stop():
        with transaction.atomic(using=alias), connection.cursor() as cursor:
            exclude = f" AND i.id NOT IN ({_marks(skipped)})" if skipped else ""
            cursor.execute(
                f"SELECT i.id FROM {d.t_instances} i WHERE {where}{exclude} "
                "ORDER BY i.last_used_at, i.id LIMIT %s",
                [*params, *skipped, batch],
            )
            candidates = [int(row[0]) for row in cursor.fetchall()]
            ids = [
                int(i) for i in _recheck(cursor, d, d.t_instances, "i", candidates, where, params)
            ]
            if ids:
                cursor.execute(f"DELETE FROM {d.t_instances} WHERE id IN ({_marks(ids)})", ids)
        skipped.update(set(candidates) - set(ids))
        deleted += len(ids)
        if ids:
            report("instances", len(ids))
        if len(candidates) < batch:
            break
    return deleted


def _recheck(
    cursor: Cursor,
    d: Dialect,
    table: str,
    alias: str,
    ids: list[Any],
    where: str,
    params: list[Any],
) -> list[Any]:
    """Lock the rows of ``ids`` nobody else holds (``SKIP LOCKED``; on SQLite the write
    transaction is already exclusive), then keep those that still qualify: with the row
    locked, nothing can start using it before this transaction ends."""
    if not ids:
        return []
    cursor.execute(f"SELECT id FROM {table} WHERE id IN ({_marks(ids)}){d.skip_locked}", ids)
    locked = [row[0] for row in cursor.fetchall()]
    if not locked:
        return []
    cursor.execute(
        f"SELECT {alias}.id FROM {table} {alias} WHERE {alias}.id IN ({_marks(locked)}) "
        f"AND {where}",
        [*locked, *params],
    )
    return [row[0] for row in cursor.fetchall()]
