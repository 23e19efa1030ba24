"""Whether a connection is inside a test's transaction, and nothing else.

Django's ``TestCase`` (and pytest-django's plain ``db`` fixture, which uses it) runs every
test inside ``atomic()`` blocks it marks as its own and rolls them back at the end. A sync
call is refused inside the caller's ``atomic()`` (:class:`~solid_objects.SyncInsideTransaction`:
in production the message must commit before an actor can run it), but inside a test's own
blocks there is nothing to commit to: the caller runs the actor in the same connection and
the same transaction, through the same lease, claim and fenced commit (savepoints instead of
commits), so ordering, fencing and outcomes are those of production. A block the test itself
opens with ``transaction.atomic()`` is the caller's again, and the rule applies.

This module imports nothing of the package; it reads only Django's connection state.
"""

from __future__ import annotations

from typing import Any

from django.db import connections

__all__ = ["allows_sync", "current"]


def current(alias: str) -> Any | None:
    """The innermost ``atomic()`` block of a test case on ``alias`` when every open block
    is a test case's (``None`` otherwise, in particular outside any block)."""
    blocks = connections[alias].atomic_blocks
    if not blocks:
        return None
    for block in blocks:
        if not getattr(block, "_from_testcase", False):
            return None
    return blocks[-1]


def allows_sync(alias: str) -> bool:
    """Whether a sync call on ``alias`` may run inside the open transaction (a test's)."""
    return current(alias) is not None
