"""Whether every database agrees with ``SOLID_OBJECTS["DATABASES"]``: the start-up refusal.

Each database holding actors keeps one row in ``shard_agreement``: the fingerprint of the
shard list its actors were last placed by. A worker compares that row on every shard when it
starts (one primary-key read per shard) and refuses to start while one differs, since some
actor could then live on a database that is no longer its home and run on two shards at
once. ``manage.py solid_objects_reshard --execute`` moves those actors and writes the rows.

First deployment: a database without a row agrees at once when the settings name a single
database, or when none of its actors has another home (a scan of its identities, done once:
an empty database costs one query); the row is then written.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Iterator

from django.core.management.base import CommandError
from django.db import DatabaseError, IntegrityError, connections, transaction
from django.utils import timezone

from .errors import ReshardRequired
from .models import Instance, ShardAgreement
from .shards import HASH_TAG, database_for, databases, is_sharded

#: The primary key of the one row of each database.
ROW = 1
#: How many identities one query reads while scanning a database.
SCAN_BATCH = 1000


def fingerprint(shards: Iterable[str]) -> str:
    """The fingerprint of a shard list (its order does not place any actor, so it is sorted;
    the hashing formula's version tag is part of it)."""
    names = sorted(set(shards))
    return hashlib.sha256(HASH_TAG + "\x00".join(names).encode()).hexdigest()


def agreed_list(alias: str) -> list[str] | None:
    """The shard list ``alias`` last agreed with (``None``: never recorded)."""
    row = ShardAgreement.objects.using(alias).filter(pk=ROW).first()
    return None if row is None else list(row.shards)


def record(aliases: Iterable[str], shards: Iterable[str] | None = None) -> None:
    """Write on each of ``aliases`` that it agrees with ``shards`` (the settings' list)."""
    names = sorted(set(databases() if shards is None else shards))
    values = {"fingerprint": fingerprint(names), "shards": names, "agreed_at": timezone.now()}
    for alias in aliases:
        try:
            with transaction.atomic(using=alias):
                ShardAgreement.objects.using(alias).update_or_create(pk=ROW, defaults=values)
        except IntegrityError:  # another process inserted the row meanwhile: update it
            ShardAgreement.objects.using(alias).filter(pk=ROW).update(**values)


def identities(alias: str, batch: int = SCAN_BATCH) -> Iterator[tuple[int, str, str]]:
    """Every ``(instance id, actor_type, actor_id)`` on ``alias``, in id order, read in
    batches (no long-running cursor)."""
    last = 0
    while True:
        rows = list(
            Instance.objects.using(alias)
            .filter(pk__gt=last)
            .order_by("pk")
            .values_list("pk", "actor_type", "actor_id")[:batch]
        )
        if not rows:
            return
        yield from rows
        last = rows[-1][0]


def homeless(alias: str) -> Iterator[tuple[int, str, str]]:
    """The identities on ``alias`` whose home (:func:`~solid_objects.shards.database_for`
    with the current settings) is another database."""
    for instance_id, actor_type, actor_id in identities(alias):
        if database_for(actor_type, actor_id) != alias:
            yield instance_id, actor_type, actor_id


def disagreements() -> list[str]:
    """Why the databases do not agree with the settings' shard list (empty: they do).

    A database that agrees without a row yet (see the module docstring) gets its row when
    every shard agrees."""
    shards = databases()
    wanted = fingerprint(shards)
    reasons: list[str] = []
    first_time: list[str] = []
    for alias in shards:
        row = ShardAgreement.objects.using(alias).filter(pk=ROW).first()
        if row is None:
            if is_sharded() and next(homeless(alias), None) is not None:
                reasons.append(f"database {alias!r} holds actors whose home is now another shard")
            else:
                first_time.append(alias)
        elif row.fingerprint != wanted:
            reason = f"database {alias!r} last agreed with the shard list {list(row.shards)}"
            left = sorted(set(row.shards) - set(shards))
            if left:
                options = " ".join(f"--from {name}" for name in left)
                reason += f" ({', '.join(left)} left the list: reshard with {options})"
            reasons.append(reason)
    if not reasons and first_time:
        record(first_time, shards)
    return reasons


def require_agreement() -> None:
    """Raise :class:`~solid_objects.errors.ReshardRequired` unless every shard agrees."""
    reasons = disagreements()
    if reasons:
        raise ReshardRequired(
            f'SOLID_OBJECTS["DATABASES"] is {list(databases())} but '
            + "; ".join(reasons)
            + ". Some actors would be served on a database that is no longer their home: "
            "preview with `manage.py solid_objects_reshard`, move them with "
            "`manage.py solid_objects_reshard --execute`, then start the workers."
        )


def refuse_to_start() -> None:
    """The first line of every worker command: a :class:`CommandError` (a clear message and
    exit status 1) while :func:`require_agreement` refuses. The connections it opened are
    closed again: the roles' threads open their own."""
    try:
        require_agreement()
    except ReshardRequired as error:
        raise CommandError(f"refusing to start: {error}") from error
    except DatabaseError as error:
        raise CommandError(
            f"refusing to start: could not read the shard agreement of {list(databases())} "
            f"({type(error).__name__}: {error}); is every shard reachable and migrated "
            "(`manage.py migrate --database ALIAS`)?"
        ) from error
    finally:
        for alias in databases():
            if not connections[alias].in_atomic_block:
                connections[alias].close()
