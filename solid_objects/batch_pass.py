"""A pass over several cold actors at once: one claim, one turn each, one fenced commit.

Independent one-off work (one due message per actor: a task queue, a fan-out) would pay a
lease, a claim and a commit per actor. Instead a worker leases up to
``MAX_ACTORS_PER_COMMIT`` such actors and claims their first turns together
(:func:`solid_objects.lease.acquire_batch`), runs each claimed turn on its own actor, in
order, outside any transaction, and commits the turns that staged nothing together
(:func:`solid_objects.fencing.commit_batch`), releasing the leases. After
``MAX_COMMIT_DELAY`` the turns run so far are committed before the next ones run, so a
batch never holds results back longer than a group of one actor would.

Every actor keeps its own fence in that commit: an actor whose lease was lost is not
written, and the others are. A turn that staged writes (effects, messages, reminders,
journal entries, broadcasts) or failed commits on its own, exactly as in a normal pass,
which then goes on with the actor's next turns (:func:`solid_objects.passes.finish_pass`).
A crash anywhere leaves claimed turns that recovery puts back, like any other claim.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from django.db import DatabaseError, InterfaceError, OperationalError, connections

from .activation import Activation, ActivationCache, shelve
from .conf import get_settings
from .db.connections import abandon
from .db.rows import LeaseRow
from .db.vendors import dialect_for
from .errors import LostActivation
from .fencing import (
    after_commit,
    commit_batch,
    final_sequence,
    joins_batch,
    lost_before_commit,
    send_result_hint,
)
from .hand_back import Unstarted, watchdog
from .lease import acquire_batch
from .passes import Ran, finish_pass, lost, run_group
from .pause_points import pause_point
from .registry import actor_types
from .runtime.wakeup import notify_local, progress

logger = logging.getLogger("solid_objects")


def batch_size() -> int:
    """How many actors one batch may lease (1: batching is off). ``MAX_TURNS_PER_COMMIT = 1``
    (one commit per turn) turns it off as well."""
    settings = get_settings()
    if settings.MAX_TURNS_PER_COMMIT <= 1:
        return 1
    return settings.MAX_ACTORS_PER_COMMIT


def kept_apart() -> list[str]:
    """The registered actor types that never commit with others
    (``commit_with_other_actors = False``)."""
    return sorted(
        actor_type
        for actor_type, spec in actor_types().items()
        if not getattr(spec.cls, "commit_with_other_actors", True)
    )


def run_batch(
    alias: str,
    owner_id: str,
    instance_ids: list[int],
    *,
    limit: int,
    cache: ActivationCache | None = None,
    should_stop: Callable[[], bool] | None = None,
    track: Callable[[LeaseRow], None] | None = None,
    untrack: Callable[[LeaseRow], None] | None = None,
    held_up: Callable[[int], None] | None = None,
) -> int:
    """Lease up to ``limit`` of ``instance_ids``, run one turn of each and commit them;
    returns how many actors were leased (0: none was free). ``track``/``untrack`` hold the
    leases for renewal while the batch runs. A turn that runs for longer than
    ``MAX_COMMIT_DELAY`` gets the turns behind it handed back (:mod:`.hand_back`);
    ``held_up`` is then told how many were.

    If the database fails mid-batch, the leases not yet given back are handed to
    :func:`solid_objects.db.connections.abandon` (released once it answers again) and the
    error propagates."""
    activations = acquire_batch(alias, owner_id, instance_ids, limit, cache, kept_apart())
    if not activations:
        return 0
    open_leases = {a.lease.instance_id: a for a in activations}
    for activation in activations:
        if track is not None:
            track(activation.lease)
    unstarted = Unstarted(alias, activations[1:], untrack)
    if len(activations) > 1:
        watchdog.watch(unstarted)
    try:
        _run(alias, activations, open_leases, cache, should_stop, unstarted)
    except (DatabaseError, InterfaceError):
        for activation in open_leases.values():
            abandon(alias, activation.lease)
        raise
    finally:
        watchdog.unwatch(unstarted)
        for activation in activations:
            if untrack is not None:
                untrack(activation.lease)
    if unstarted.handed_back and held_up is not None:
        held_up(len(unstarted.handed_back))
    return len(activations)


def _run(
    alias: str,
    activations: list[Activation],
    open_leases: dict[int, Activation],
    cache: ActivationCache | None,
    should_stop: Callable[[], bool] | None,
    unstarted: Unstarted,
) -> None:
    max_delay = get_settings().MAX_COMMIT_DELAY
    together: list[tuple[Activation, Ran]] = []
    alone: list[tuple[Activation, Ran]] = []
    started = time.monotonic()
    for index, activation in enumerate(activations):
        if index and not unstarted.start(activation):
            # Handed back while an earlier turn ran: the lease is released already.
            del open_leases[activation.lease.instance_id]
            shelve(activation, cache, lost=False, processed=0)
            continue
        pause_point("batch.before_turn")
        first, activation.first = activation.first, None
        assert first is not None  # every activation of a batch has its claimed turn
        committed = (activation.state_json, activation.dirty, dict(activation.observed))
        outcomes = run_group(activation, [first], max_delay)
        (together if joins_batch(outcomes) else alone).append((activation, (outcomes, committed)))
        if together and time.monotonic() - started >= max_delay:
            alone.extend(_commit_together(alias, together, open_leases, cache))
            together, started = [], time.monotonic()
    alone.extend(_commit_together(alias, together, open_leases, cache))
    for activation, ran in alone:
        try:
            finish_pass(activation, ran, should_stop=should_stop, cache=cache)
        except LostActivation as exc:
            logger.warning("%s", exc)
        del open_leases[activation.lease.instance_id]


def _commit_together(
    alias: str,
    together: list[tuple[Activation, Ran]],
    open_leases: dict[int, Activation],
    cache: ActivationCache | None,
) -> list[tuple[Activation, Ran]]:
    """Commit the turns that staged nothing together; returns those to commit on their own
    instead (all of them, if the database refused the batch as a whole)."""
    if not together:
        return []
    pause_point("batch.before_commit")
    dialect = dialect_for(connections[alias])
    try:
        fenced = commit_batch(alias, dialect, [(a, ran[0][0]) for a, ran in together])
    except (OperationalError, InterfaceError):
        raise  # the connection or the server: nothing to pin on a turn
    except Exception as exc:
        # Refused as a whole (nothing was written): every turn commits on its own, where
        # a failure is pinned on the turn that causes it.
        logger.warning(
            "a batch of %d turns was refused, committing each alone: %r", len(together), exc
        )
        return together
    waited = False
    finished = []
    for activation, (outcomes, _committed) in together:
        del open_leases[activation.lease.instance_id]
        if activation.lease.instance_id in fenced:
            waited = after_commit(activation, outcomes, result_hint=False) or waited
            finished.append((activation.lease.instance_id, final_sequence(outcomes)))
            shelve(activation, cache, lost=False, processed=1)
        else:
            lost(activation, cache)
            logger.warning("%s", lost_before_commit(activation.lease))
        progress.ended(alias, activation.lease.instance_id, activation.lease.generation)
    notify_local("result")
    if waited:
        send_result_hint(alias, finished)
    return []
