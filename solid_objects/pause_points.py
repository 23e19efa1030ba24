"""Named pause points: places in the protocol where a test can hold a thread.

The runtime calls :func:`pause_point` at the steps where an interleaving with another
process matters (between a lease and the recovery of a stale claim, inside dead-process
cleanup, before a fenced commit, ...). In production nothing is installed and the call is
one dictionary lookup. A test installs a hook with :func:`solid_objects.testing.pause_at`
and so runs two real database sessions in an exact, repeatable order, with no sleeps::

    with pause_at("acquire.before_recovery") as paused:
        worker = threading.Thread(target=run_one_pass)
        worker.start()
        paused.wait_reached()        # the worker holds a fresh lease, nothing recovered yet
        cleanup_dead(alias)          # the interleaving under test
        paused.release()
    worker.join()

The points, in protocol order (docs/protocol.md explains each step):

``acquire.after_lease``
    a lease was taken (and on PostgreSQL committed), its first turn not yet claimed.
``acquire.before_recovery``
    a lease that found a claim left by a dead activation, before recovering it.
``acquire.recovered``
    inside the transaction that recovered a stale claim and claimed the first turn, before
    it commits (the instance row lock is held).
``turn.before_commit``
    the turns of a group ran; their fenced commit is about to start.
``batch.after_claim``
    a worker leased several cold actors and claimed their first turns together (on
    PostgreSQL committed; elsewhere inside that transaction), before any of them runs.
``batch.before_turn``
    a turn of such a batch is about to run (the turns behind it are still claimed).
``hand_back.given``
    the watchdog handed back the turns a slow turn of a batch held up: they are in their
    mailboxes again, their leases released (committed).
``batch.before_commit``
    the claimed turns of such a batch ran; their commit together is about to start.
``cleanup.before_instance``
    dead-process cleanup, before it locks one instance the dead processes held.
``cleanup.before_mark_stopped``
    cleanup released every instance, before it marks the processes stopped.
``renew.before``
    a worker is about to renew the leases of its turns in flight.
``reshard.before_copy``
    ``solid_objects_reshard`` locked an actor on its old database and read its rows, before
    it copies them to the new one.
``reshard.copied``
    the copy committed on the new database; the old one still holds the actor (locked).
``reshard.deleted``
    the old database deleted the actor, before that transaction commits.
"""

from __future__ import annotations

from collections.abc import Callable

__all__ = ["POINTS", "pause_point"]

POINTS = frozenset(
    {
        "acquire.after_lease",
        "acquire.before_recovery",
        "acquire.recovered",
        "turn.before_commit",
        "batch.after_claim",
        "batch.before_turn",
        "hand_back.given",
        "batch.before_commit",
        "cleanup.before_instance",
        "cleanup.before_mark_stopped",
        "renew.before",
        "reshard.before_copy",
        "reshard.copied",
        "reshard.deleted",
    }
)

#: Installed hooks by point name (tests only; empty in production).
_hooks: dict[str, Callable[[str], None]] = {}


def pause_point(name: str) -> None:
    """Give an installed test hook the chance to hold this thread here."""
    hook = _hooks.get(name)
    if hook is not None:
        hook(name)


def install(name: str, hook: Callable[[str], None]) -> None:
    if name not in POINTS:
        raise ValueError(f"unknown pause point {name!r}; known: {', '.join(sorted(POINTS))}")
    if name in _hooks:
        raise RuntimeError(f"pause point {name!r} already has a hook installed")
    _hooks[name] = hook


def uninstall(name: str) -> None:
    _hooks.pop(name, None)
