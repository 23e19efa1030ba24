"""Shards: which database alias each actor identity lives on (``SOLID_OBJECTS["DATABASES"]``).

With ``"DATABASES": ["actors_a", "actors_b"]`` every identity ``(actor_type, actor_id)``
lives on exactly one of the aliases, chosen by rendezvous (highest random weight) hashing:
each alias scores the identity, and the highest score wins::

    score(alias) = first 8 bytes, big-endian, of
                   SHA-256(b"solid-objects/shard/v1\\0" + alias + b"\\0" + actor_type
                           + b"\\0" + actor_id)          (each string UTF-8 encoded)

ties (which SHA-256 makes practically impossible) go to the greater alias name. The formula
uses no process state (not Python's salted ``hash()``), so every process, host and version
agrees; its ``v1`` tag would change only with a documented migration. Adding an alias moves
only the identities the new alias now wins (about ``1/n`` of them), removing one moves only
the identities it held: ``manage.py solid_objects_reshard`` moves them.

The alias's *name* is the shard's identity in the formula: renaming an alias in
``settings.DATABASES`` moves actors just as adding one does.

Without ``DATABASES`` the single ``DATABASE`` alias holds every actor and nothing here costs
more than a settings lookup.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable

from django.db import connections

from . import testcase_transaction
from .conf import get_settings
from .errors import CrossShardTransaction

#: The versioned prefix of every hashed identity (see the module docstring).
HASH_TAG = b"solid-objects/shard/v1\x00"
#: Strings are hashed as UTF-8 (a lone surrogate, which no stored identifier can hold, is
#: hashed as its surrogate escape instead of failing).
ENCODING = "utf-8"


def databases() -> tuple[str, ...]:
    """The aliases that hold actors, in settings order (``(DATABASE,)`` when unsharded)."""
    return get_settings().shards


def is_sharded() -> bool:
    """Whether more than one alias holds actors."""
    return len(get_settings().shards) > 1


def score(alias: str, actor_type: str, actor_id: str) -> int:
    """The rendezvous weight of ``alias`` for one identity (a 64-bit unsigned integer)."""
    digest = hashlib.sha256(
        b"".join(
            (
                HASH_TAG,
                alias.encode(ENCODING, "surrogatepass"),
                b"\x00",
                actor_type.encode(ENCODING, "surrogatepass"),
                b"\x00",
                actor_id.encode(ENCODING, "surrogatepass"),
            )
        )
    ).digest()
    return int.from_bytes(digest[:8], "big")


def choose(aliases: Iterable[str], actor_type: str, actor_id: str) -> str:
    """The alias of ``aliases`` that wins ``(actor_type, actor_id)``."""
    return max(aliases, key=lambda alias: (score(alias, actor_type, actor_id), alias))


def database_for(actor_type: str, actor_id: str) -> str:
    """The database alias that holds the actor ``(actor_type, actor_id)``.

    The public answer to "where does this actor live?": references, enqueues, sync calls,
    workers and ``solid_objects_reshard`` all ask it.
    """
    shards = get_settings().shards
    if len(shards) == 1:
        return shards[0]
    return choose(shards, actor_type, actor_id)


def require_joinable(alias: str, actor_type: str, actor_id: str) -> None:
    """Refuse an enqueue that could not join the caller's transaction.

    An enqueue inside ``transaction.atomic()`` commits with the caller's writes only when
    the actor's database is the alias of that transaction. With ``DATABASES`` (shards), an
    enqueue while the caller is inside a transaction on any other alias (another shard, or
    a database that holds no actors, such as the project's ``default``) and not on the
    actor's would commit on its own, before the caller's writes and even if they roll back:
    raise :class:`CrossShardTransaction` before anything is written. A test case's own
    blocks (``TestCase``) are not the caller's transaction and never count. Without
    ``DATABASES`` nothing is refused (the documented behaviour of one ``DATABASE``).
    """
    if get_settings().DATABASES is None:
        return
    if connections[alias].in_atomic_block:
        return
    for connection in connections.all(initialized_only=True):
        other = connection.alias
        if other == alias or not connection.in_atomic_block:
            continue
        if testcase_transaction.current(other) is not None:
            continue  # only a test case's blocks: not the caller's transaction
        raise CrossShardTransaction(
            f"{actor_type}/{actor_id} lives on database {alias!r} but the caller is inside "
            f"transaction.atomic() on {other!r}: the message could not commit or roll back "
            "with the caller's writes, so nothing was enqueued",
            alias=alias,
            caller_alias=other,
        )
