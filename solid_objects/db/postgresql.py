"""PostgreSQL 14+: the protocol folded into few statements with CTEs and ``RETURNING``.

``now()`` is the transaction's start time, so each transaction reads the clock once. The
lease and its first claim, and a group's whole fenced commit with the claim of the next
turn, are one autocommit statement each (:attr:`single_statement_commit`).
"""

from __future__ import annotations

from typing import Any

from . import batches, claims, leases, mailbox
from . import fence as fenced_commit
from .common import CommonDialect
from .dialect import Later
from .notify import CHANNEL, notify_enabled
from .rows import Appended, AppendedAndLeased, MailboxFullAt, NewMessage
from .sql import milliseconds

#: Seconds since 1970 of the timestamp ``{column}``.
EPOCH = "EXTRACT(EPOCH FROM {column})"

#: Bound lock and statement waits of the current transaction (``SET LOCAL``: undone when it
#: ends), ``wait`` in milliseconds.
BOUND_LOCK_WAIT = (
    "SELECT set_config('lock_timeout', %(wait)s, true), "
    "set_config('statement_timeout', %(wait)s, true)"
)


class PostgreSQLDialect(CommonDialect):
    vendor = "postgresql"
    single_statement_commit = True
    listen_notify = True
    update_from_returning = True
    append_in_one_statement = True
    lease_on_enqueue = True
    claim_moves_in_place = False  # its group commit claims the next turn in one statement
    append_batch = 1000

    now = "now()"
    json = "%s::jsonb"
    json_cast = "::jsonb"
    as_text = "::text"
    later = Later("(now() + %({name})s * interval '1 microsecond')")
    now_plus_positional = "(now() + %s * interval '1 microsecond')"

    @property
    def notify(self) -> bool:
        """Whether enqueue sends ``NOTIFY`` in its transaction: when the wake-up transport
        is LISTEN/NOTIFY (``WAKE_UP`` "auto" or "postgresql"; see
        :mod:`solid_objects.db.notify`)."""
        return notify_enabled(self)

    def epoch(self, column: str) -> str:
        return EPOCH.format(column=column)

    def bound_lock_wait(self, cursor: Any, seconds: float) -> Any:
        cursor.execute(BOUND_LOCK_WAIT, {"wait": milliseconds(seconds)})
        return None  # SET LOCAL ends with the transaction

    def append_messages(self, cursor: Any, messages: list[NewMessage], cap: int) -> Appended:
        return mailbox.append_messages_postgresql(
            self, cursor, messages, cap, notify_channel=CHANNEL if self.notify else None
        )

    def append_message(self, cursor: Any, message: NewMessage, cap: int) -> Appended:
        return mailbox.append_message_postgresql(
            self, cursor, message, cap, notify_channel=CHANNEL if self.notify else None
        )

    def append_and_lease(
        self,
        cursor: Any,
        message: NewMessage,
        cap: int,
        *,
        lock_wait: float | None,
        owner_id: str,
        token: str,
        lease_seconds: float,
        cached: tuple[int, int] | None = None,
    ) -> AppendedAndLeased | MailboxFullAt:
        return mailbox.append_and_lease_postgresql(
            self,
            cursor,
            message,
            cap,
            lock_wait=lock_wait,
            owner_id=owner_id,
            token=token,
            lease_seconds=lease_seconds,
            notify_channel=CHANNEL if self.notify else None,
            cached=cached,
        )

    # The variant of each step PostgreSQL runs where it is not the common one.
    acquire_lease = leases.acquire_lease_postgresql
    acquire_and_claim = claims.acquire_and_claim_postgresql
    claim_held = claims.claim_held_postgresql
    claim_next = claims.claim_next_postgresql
    fence = fenced_commit.fence_postgresql
    dead_letter = fenced_commit.dead_letter_postgresql
    commit_group = fenced_commit.commit_group_postgresql
    claim_batch = batches.claim_batch_postgresql
    commit_batch = batches.commit_batch_postgresql
