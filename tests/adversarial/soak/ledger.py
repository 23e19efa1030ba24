"""What the soak enqueued: every message's number, kind, id and sequence, per actor.

Numbers are global and increase with enqueue order, so for one actor they increase with the
message sequence. Each message's kind follows from its number alone (:func:`kind_of`), like
everything the soak actor does with it. A batch is one transaction; it is recorded only once
it committed (a batch refused by the database, e.g. a MariaDB deadlock, is retried whole).
"""

from __future__ import annotations

import random
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from django.db import OperationalError, transaction

from solid_objects.shards import database_for, is_sharded
from tests.testapp.actors.soak import SoakCounter

APPLY, REJECT, FAIL = "apply", "reject", "fail"
OPERATION = {APPLY: "apply", REJECT: "refuse", FAIL: "fail"}
#: Attempts at one batch before the soak gives up on it (each refusal is counted).
BATCH_ATTEMPTS = 5


def kind_of(n: int) -> str:
    """About 1 message in 97 fails for good (a dead letter), 1 in 31 is rejected."""
    if n % 97 == 0:
        return FAIL
    if n % 31 == 0:
        return REJECT
    return APPLY


@dataclass(frozen=True)
class Sent:
    n: int
    actor_id: str
    kind: str
    message_id: int
    sequence: int


class Ledger:
    """The enqueued messages of ``actors`` soak actors (ids ``soak-000``, ``soak-001``...)."""

    def __init__(self, actors: int, rng: random.Random, first_n: int = 1) -> None:
        self.actor_ids = [f"soak-{index:03d}" for index in range(actors)]
        self._rank = {actor_id: index for index, actor_id in enumerate(self.actor_ids)}
        self._rng = rng
        self._first_n = first_n
        self._next_n = first_n
        self.by_actor: dict[str, list[Sent]] = {actor_id: [] for actor_id in self.actor_ids}
        self.refused_batches = 0
        self.refusals: list[str] = []  # why (the first few)

    def __len__(self) -> int:
        return self._next_n - self._first_n

    def all(self) -> Iterator[Sent]:
        for sent in self.by_actor.values():
            yield from sent

    def of_kind(self, kind: str) -> list[Sent]:
        return [sent for sent in self.all() if sent.kind == kind]

    def every_actor_once(self) -> list[Sent]:
        """One message to each actor, in id order: creates the instances in that order."""
        return self.enqueue(self.actor_ids)

    def random_messages(self, count: int) -> list[Sent]:
        return self.enqueue([self._rng.choice(self.actor_ids) for _ in range(count)])

    def enqueue(self, actor_ids: Sequence[str]) -> list[Sent]:
        """Enqueue one message per entry in one transaction. The batch is ordered by actor
        (stable, so each actor's messages keep their order): instance rows are then locked
        in one order by every batch. With shards, one transaction per shard, one after the
        other (a transaction never spans two databases)."""
        targets = sorted(actor_ids, key=self._rank.__getitem__)
        if not is_sharded():
            return self._enqueue_batch(targets, None)
        by_alias: dict[str, list[str]] = {}
        for actor_id in targets:
            by_alias.setdefault(database_for(SoakCounter.actor_type, actor_id), []).append(actor_id)
        sent = []
        for alias, group in by_alias.items():
            sent.extend(self._enqueue_batch(group, alias))
        return sent

    def _enqueue_batch(self, targets: Sequence[str], using: str | None) -> list[Sent]:
        first = self._next_n
        for attempt in range(1, BATCH_ATTEMPTS + 1):
            try:
                sent = self._enqueue_once(targets, first, using)
            except OperationalError as exc:
                self.refused_batches += 1
                if len(self.refusals) < 5:
                    self.refusals.append(repr(exc))
                if attempt == BATCH_ATTEMPTS:
                    raise
                continue
            self._next_n = first + len(targets)
            for item in sent:
                self.by_actor[item.actor_id].append(item)
            return sent
        raise AssertionError("unreachable")

    @staticmethod
    def _enqueue_once(targets: Sequence[str], first: int, using: str | None) -> list[Sent]:
        sent = []
        with transaction.atomic(using=using):
            for offset, actor_id in enumerate(targets):
                n = first + offset
                kind = kind_of(n)
                calls = SoakCounter.ref(actor_id).enqueue()
                message = getattr(calls, OPERATION[kind])(n)
                sent.append(Sent(n, actor_id, kind, message.id, message.sequence))
        return sent
