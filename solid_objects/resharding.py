"""Moving actors to their new home after ``SOLID_OBJECTS["DATABASES"]`` changed
(``manage.py solid_objects_reshard``, PRODUCT §A18).

Every identity whose home (:func:`~solid_objects.shards.database_for`) is no longer the
database holding it moves, one actor at a time:

1. on the source, in one transaction, the instance row is locked (a no-op write, then
   ``SELECT ... FOR UPDATE``): no enqueue, lease or fenced commit can write it until the
   move ends. An actor under a live lease is not moved mid-turn: it is skipped and retried
   until the lease ends (``wait`` seconds at most);
2. on the target, in a transaction of its own, the instance, its messages (with their
   ``request_id``), ready and claimed memberships, reminders, effects (their ``effect_id``,
   the providers' idempotency key, kept), broadcasts and dead letters are copied. Row ids are
   the target's own: each message is mapped to its copy by ``request_id``, and the rows
   pointing at a message follow the mapping. Claims by the source's processes are cleared
   (their processes live on the source), an effect or broadcast being processed goes back to
   ``pending``;
3. the target commits, then the source deletes the instance (the database cascades what it
   owns) and commits.

A crash at any point leaves the actor whole on the source (before 3), or on both (between
the two commits), or on the target only. A rerun merges the source's rows into the target
again, skipping every row already there (messages by ``request_id``, effects by
``effect_id``, broadcasts by ``broadcast_id``, reminders by name, memberships and dead
letters by message), so nothing is duplicated or lost, then deletes the source's copy.

The target may also hold an instance of the identity created after the settings changed (an
enqueue routed to the new home before the move): the source's state wins if the target's
never ran a turn, and the target's own messages are renumbered after the source's. Two
incarnations that both ran turns are a conflict, reported and left where they are.

Message references (:class:`~solid_objects.references.MessageReference`) taken before the
move name the source database and the message's old id: wait for their results before
resharding, or find the message again (``ref.find_message(key)``).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from django.conf import settings as django_settings
from django.db import DatabaseError, connections, models, transaction
from django.db.models import Count, F

from .conf import get_settings
from .db.instances import delete_instance
from .db.resharding import live_workers, lock_identity
from .db.vendors import dialect_for
from .errors import InvalidReshard
from .models import (
    Broadcast,
    ClaimedMessage,
    DeadLetter,
    Effect,
    Instance,
    Message,
    ReadyMessage,
    Reminder,
)
from .pause_points import pause_point
from .shard_agreement import homeless, record
from .shards import database_for, databases

logger = logging.getLogger(__name__)

M = TypeVar("M", bound=models.Model)

#: Identities read per query when counting a preview, and ``IN (...)`` lists at most.
CHUNK = 500
#: Seconds between two rounds of retrying actors whose lease had not ended.
RETRY_PAUSE = 0.5

MOVED, GONE, BUSY, CONFLICT = "moved", "gone", "busy", "conflict"


@dataclass(frozen=True)
class Mover:
    """One actor whose home changed."""

    source: str
    target: str
    instance_id: int
    actor_type: str
    actor_id: str

    @property
    def route(self) -> tuple[str, str]:
        return self.source, self.target

    def __str__(self) -> str:
        return f"{self.actor_type}/{self.actor_id} ({self.source} -> {self.target})"


@dataclass
class RouteCounts:
    """What one ``source -> target`` route moves."""

    actors: int = 0
    messages: int = 0
    pending: int = 0  # ready or claimed memberships: messages still to run
    reminders: int = 0
    effects: int = 0
    broadcasts: int = 0
    dead_letters: int = 0

    def describe(self) -> str:
        return (
            f"{self.actors} actors ({self.messages} messages, {self.pending} pending, "
            f"{self.reminders} reminders, {self.effects} effects, {self.broadcasts} "
            f"broadcasts, {self.dead_letters} dead letters)"
        )


@dataclass
class ReshardResult:
    """What ``--execute`` did: actors moved per route, and those left behind."""

    moved: dict[tuple[str, str], int] = field(default_factory=dict)
    busy: list[Mover] = field(default_factory=list)  # still leased when ``wait`` ran out
    conflicts: list[tuple[Mover, str]] = field(default_factory=list)

    @property
    def complete(self) -> bool:
        return not self.busy and not self.conflicts


class ReshardConflict(Exception):
    """The target holds an incarnation of the identity that cannot be merged."""


Progress = Callable[[tuple[str, str], int], None]


def sources(from_aliases: Iterable[str] = ()) -> tuple[str, ...]:
    """The databases to move actors out of: every shard, then each ``--from`` alias (a
    database that left ``SOLID_OBJECTS["DATABASES"]``). Raises :class:`InvalidReshard`."""
    shards = databases()
    extra: list[str] = []
    for alias in from_aliases:
        if alias not in django_settings.DATABASES:
            raise InvalidReshard(f"--from {alias!r}: no such alias in settings.DATABASES")
        if alias in shards:
            raise InvalidReshard(
                f"--from {alias!r} is a shard of SOLID_OBJECTS['DATABASES'] (it is read anyway); "
                "--from names a database that left the list"
            )
        if alias not in extra:
            extra.append(alias)
    return (*shards, *extra)


def refuse_while_workers_run(aliases: Iterable[str]) -> None:
    """Raise :class:`InvalidReshard` while a worker, scheduler or broadcaster still
    heartbeats on one of ``aliases``: started with the old list, it could serve an actor on
    the database it is leaving, or recreate it there after the move."""
    threshold = get_settings().PROCESS_ALIVE_THRESHOLD
    running: list[str] = []
    for alias in aliases:
        connection = connections[alias]
        with connection.cursor() as cursor:
            for kind, host, pid in live_workers(dialect_for(connection), cursor, threshold):
                running.append(f"{kind} pid {pid} on {host} ({alias})")
    if running:
        raise InvalidReshard(
            "stop every worker, scheduler and broadcaster before resharding; still running: "
            + ", ".join(running)
        )


def movers(from_aliases: Iterable[str] = ()) -> Iterator[Mover]:
    """Every actor whose home is not the database holding it."""
    for source in sources(from_aliases):
        for instance_id, actor_type, actor_id in homeless(source):
            yield Mover(
                source, database_for(actor_type, actor_id), instance_id, actor_type, actor_id
            )


def _chunks(items: Sequence[Any], size: int = CHUNK) -> Iterator[Sequence[Any]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


def preview(from_aliases: Iterable[str] = ()) -> dict[tuple[str, str], RouteCounts]:
    """What ``--execute`` would move, per ``(source, target)``; writes nothing."""
    by_route: dict[tuple[str, str], list[int]] = {}
    for mover in movers(from_aliases):
        by_route.setdefault(mover.route, []).append(mover.instance_id)
    counts: dict[tuple[str, str], RouteCounts] = {}
    for route, ids in sorted(by_route.items()):
        source = route[0]
        route_counts = counts[route] = RouteCounts(actors=len(ids))
        for chunk in _chunks(ids):
            route_counts.messages += _count(Message, source, chunk)
            route_counts.pending += _count(ReadyMessage, source, chunk)
            route_counts.pending += _count(ClaimedMessage, source, chunk)
            route_counts.reminders += _count(Reminder, source, chunk)
            route_counts.effects += _count(Effect, source, chunk)
            route_counts.broadcasts += _count(Broadcast, source, chunk)
            route_counts.dead_letters += _count(DeadLetter, source, chunk)
    return counts


def _count(model: type[models.Model], alias: str, instance_ids: Sequence[int]) -> int:
    total = (
        model._default_manager.using(alias)
        .filter(instance_id__in=instance_ids)
        .aggregate(n=Count("pk"))["n"]
    )
    return int(total or 0)


def execute(
    from_aliases: Iterable[str] = (),
    *,
    wait: float = 60.0,
    on_plan: Callable[[dict[tuple[str, str], int]], None] | None = None,
    progress: Progress | None = None,
) -> ReshardResult:
    """Move every actor whose home changed (see the module docstring).

    ``on_plan`` gets how many actors each route moves before the first moves;
    ``progress(route, 1)`` is called after each actor. Actors under a live lease are retried
    for ``wait`` seconds. When nothing is left behind, every shard records that it agrees
    with the settings (:func:`solid_objects.shard_agreement.record`), so workers start."""
    aliases = tuple(from_aliases)
    refuse_while_workers_run(sources(aliases))  # before anything is written
    result = ReshardResult()
    deadline = time.monotonic() + wait
    pause = threading.Event()
    attempted: set[Mover] = set()
    while True:
        pending = [mover for mover in movers(aliases) if mover not in attempted]
        if not pending:
            break
        if on_plan is not None:
            totals: dict[tuple[str, str], int] = {}
            for mover in pending:
                totals[mover.route] = totals.get(mover.route, 0) + 1
            on_plan(totals)
            on_plan = None
        busy: list[Mover] = []
        while pending:
            busy = []
            for mover in pending:
                outcome = _move_reporting(mover, result)
                if outcome == BUSY:
                    busy.append(mover)
                    continue
                attempted.add(mover)
                if outcome in (MOVED, GONE) and progress is not None:
                    progress(mover.route, 1)
            if not busy or time.monotonic() >= deadline:
                break
            pause.wait(RETRY_PAUSE)
            pending = busy
        if busy:
            result.busy = busy
            break
    if result.complete:
        record(databases())
    return result


def _move_reporting(mover: Mover, result: ReshardResult) -> str:
    try:
        outcome = move(mover)
    except ReshardConflict as conflict:
        result.conflicts.append((mover, str(conflict)))
        logger.warning("not moved: %s: %s", mover, conflict)
        return CONFLICT
    except DatabaseError as error:  # a deadlock or lock timeout: try again in the next round
        logger.info("retrying %s after %s", mover, error)
        return BUSY
    if outcome == MOVED:
        result.moved[mover.route] = result.moved.get(mover.route, 0) + 1
    return outcome


@dataclass
class ActorRows:
    """Everything an instance owns on its database."""

    instance: Instance
    messages: list[Message]
    ready: list[ReadyMessage]
    claimed: list[ClaimedMessage]
    reminders: list[Reminder]
    effects: list[Effect]
    broadcasts: list[Broadcast]
    dead_letters: list[DeadLetter]


def move(mover: Mover) -> str:
    """Move one actor (``MOVED``), or say why not: ``GONE`` (no longer on the source),
    ``BUSY`` (a live lease holds it). Raises :class:`ReshardConflict`."""
    source, target = mover.route
    connection = connections[source]
    dialect = dialect_for(connection)
    with transaction.atomic(using=source):
        with connection.cursor() as cursor:
            locked = lock_identity(dialect, cursor, mover.actor_type, mover.actor_id)
        if locked is None:
            return GONE
        instance_id, leased = locked
        if leased:
            return BUSY
        rows = _read(source, instance_id)
        pause_point("reshard.before_copy")
        with transaction.atomic(using=target):
            if not _copy(target, rows):
                return BUSY
        pause_point("reshard.copied")
        with connection.cursor() as cursor:
            delete_instance(dialect, cursor, instance_id)
        pause_point("reshard.deleted")
    return MOVED


def _read(alias: str, instance_id: int) -> ActorRows:
    def owned(model: type[M], order: str = "pk") -> list[M]:
        manager = model._default_manager.using(alias)
        return list(manager.filter(instance_id=instance_id).order_by(order))

    return ActorRows(
        instance=Instance.objects.using(alias).get(pk=instance_id),
        messages=owned(Message, "sequence"),
        ready=owned(ReadyMessage),
        claimed=owned(ClaimedMessage),
        reminders=owned(Reminder),
        effects=owned(Effect),
        broadcasts=owned(Broadcast),
        dead_letters=owned(DeadLetter),
    )


def _insert(obj: M, alias: str, **changes: Any) -> M:
    """Insert ``obj`` on ``alias`` as a new row (a new id) with ``changes``, keeping every
    other column as it is (``raw``: no ``auto_now`` stamping)."""
    obj.pk = None
    for name, value in changes.items():
        setattr(obj, name, value)
    obj._state.adding = True
    obj._state.db = None
    obj.save_base(raw=True, force_insert=True, using=alias)
    return obj


def _existing(queryset: models.QuerySet[Any], column: str, values: Sequence[Any]) -> dict[Any, Any]:
    """``{column value: id}`` of the rows of ``queryset`` whose ``column`` is in ``values``."""
    found: dict[Any, Any] = {}
    for chunk in _chunks(values):
        found.update(queryset.filter(**{f"{column}__in": chunk}).values_list(column, "pk"))
    return found


def _copy(alias: str, rows: ActorRows) -> bool:
    """Merge ``rows`` into ``alias`` (inside the caller's transaction on it). ``False``: a
    live lease holds the target's incarnation (try again later)."""
    source = rows.instance
    connection = connections[alias]
    with connection.cursor() as cursor:
        locked = lock_identity(dialect_for(connection), cursor, source.actor_type, source.actor_id)
    if locked is not None and locked[1]:
        return False
    if locked is None:
        target = _insert(
            Instance(**_fields(source)),
            alias,
            activation_owner_id=None,
            activation_token=None,
            activation_expires_at=None,
        )
    else:
        target = Instance.objects.using(alias).get(pk=locked[0])
    messages = Message.objects.using(alias).filter(instance_id=target.pk)
    present = _existing(messages, "request_id", [m.request_id for m in rows.messages])
    # At the tail: messages enqueued on the source after an interrupted move, or the whole
    # mailbox of a source incarnation that never ran a turn (enqueued there by a process
    # with the old settings) merged into a target that did.
    append = bool(present) or (
        locked is not None and source.state_revision == 0 and target.state_revision != 0
    )
    if locked is not None and not append:
        _merge_state(alias, target, source)
        _make_room(alias, target, source.next_message_sequence)
    next_sequence = target.next_message_sequence
    message_ids: dict[int, int] = {}
    sequences: dict[int, int] = {}
    for message in rows.messages:
        old_id = message.pk
        if message.request_id in present:
            message_ids[old_id] = present[message.request_id]
            continue
        if append:
            message.sequence = next_sequence
            next_sequence += 1
        copy = _insert(message, alias, instance_id=target.pk)
        message_ids[old_id], sequences[old_id] = copy.pk, copy.sequence
    if next_sequence != target.next_message_sequence:
        Instance.objects.using(alias).filter(pk=target.pk).update(
            next_message_sequence=next_sequence
        )
    _copy_memberships(alias, target.pk, rows, message_ids, sequences)
    _copy_outbox(alias, target.pk, rows, message_ids)
    return True


def _fields(instance: Instance) -> dict[str, Any]:
    return {
        field.attname: getattr(instance, field.attname)
        for field in Instance._meta.concrete_fields
        if not field.primary_key
    }


def _merge_state(alias: str, target: Instance, source: Instance) -> None:
    """The source's state wins over a target incarnation that never committed a turn."""
    if (target.state_revision, target.state) == (source.state_revision, source.state):
        return
    if target.state_revision != 0:
        raise ReshardConflict(
            f"{alias!r} already holds an incarnation that committed {target.state_revision} "
            f"turns, and the source's committed {source.state_revision}: resolve by hand "
            "(destroy one of them), then reshard again"
        )
    Instance.objects.using(alias).filter(pk=target.pk).update(
        state=source.state,
        state_version=source.state_version,
        state_revision=source.state_revision,
        completed_idempotency_keys=source.completed_idempotency_keys,
        activation_generation=max(target.activation_generation, source.activation_generation),
        paused_at=source.paused_at or target.paused_at,
        activated_at=source.activated_at,
        last_used_at=source.last_used_at,
        last_claimed_at=source.last_claimed_at,
        created_at=min(target.created_at, source.created_at),
    )


def _make_room(alias: str, target: Instance, source_next: int) -> None:
    """Make the source's sequences (``1 .. source_next - 1``) free on the target: its own
    messages (enqueued there before the move) move up behind them, highest first so no two
    rows ever share a sequence."""
    offset = source_next - 1
    own = list(
        Message.objects.using(alias)
        .filter(instance_id=target.pk)
        .order_by("-sequence")
        .values_list("pk", flat=True)
    )
    if not own or offset <= 0:
        target.next_message_sequence = max(target.next_message_sequence, source_next)
    else:
        for message_id in own:
            Message.objects.using(alias).filter(pk=message_id).update(
                sequence=F("sequence") + offset
            )
            ReadyMessage.objects.using(alias).filter(message_id=message_id).update(
                sequence=F("sequence") + offset
            )
        target.next_message_sequence += offset
    Instance.objects.using(alias).filter(pk=target.pk).update(
        next_message_sequence=target.next_message_sequence
    )


def _copy_memberships(
    alias: str,
    instance_id: int,
    rows: ActorRows,
    message_ids: dict[int, int],
    sequences: dict[int, int],
) -> None:
    ready = set(
        ReadyMessage.objects.using(alias)
        .filter(instance_id=instance_id)
        .values_list("message_id", flat=True)
    )
    for membership in rows.ready:
        if message_ids[membership.message_id] in ready:
            continue
        _insert(
            membership,
            alias,
            message_id=message_ids[membership.message_id],
            instance_id=instance_id,
            sequence=sequences.get(membership.message_id, membership.sequence),
        )
    claimed = ClaimedMessage.objects.using(alias).filter(instance_id=instance_id).exists()
    for claim in rows.claimed[:1] if not claimed else []:
        # A claim left by an activation that is gone (no live lease): the target's next
        # lease recovers it as it would have on the source.
        _insert(
            claim,
            alias,
            message_id=message_ids[claim.message_id],
            instance_id=instance_id,
            process_id=None,
            activation_token=None,
        )
    letters = set(
        DeadLetter.objects.using(alias)
        .filter(instance_id=instance_id)
        .values_list("message_id", flat=True)
    )
    for letter in rows.dead_letters:
        if message_ids[letter.message_id] in letters:
            continue
        retried = letter.retried_message_id
        _insert(
            letter,
            alias,
            message_id=message_ids[letter.message_id],
            instance_id=instance_id,
            retried_message_id=None if retried is None else message_ids.get(retried),
        )


def _copy_outbox_rows(
    model: Any,
    key: str,
    found: list[Any],
    alias: str,
    message_ids: dict[int, int],
    instance_id: int,
) -> None:
    """Copy outbox rows (effects or broadcasts) the target lacks, by their stable ``key``:
    unclaimed, a row in processing back to pending."""
    present = _existing(model.objects.using(alias), key, [getattr(row, key) for row in found])
    for row in found:
        if getattr(row, key) in present:
            continue
        status = model.Status.PENDING if row.status == model.Status.PROCESSING else row.status
        _insert(
            row,
            alias,
            message_id=message_ids[row.message_id],
            instance_id=instance_id,
            status=status,
            claimed_by_id=None,
            claimed_at=None,
        )


def _copy_outbox(
    alias: str, instance_id: int, rows: ActorRows, message_ids: dict[int, int]
) -> None:
    names = set(
        Reminder.objects.using(alias).filter(instance_id=instance_id).values_list("name", flat=True)
    )
    for reminder in rows.reminders:
        if reminder.name not in names:
            _insert(reminder, alias, instance_id=instance_id, claimed_by_id=None, claimed_at=None)
    _copy_outbox_rows(Effect, "effect_id", rows.effects, alias, message_ids, instance_id)
    _copy_outbox_rows(Broadcast, "broadcast_id", rows.broadcasts, alias, message_ids, instance_id)
