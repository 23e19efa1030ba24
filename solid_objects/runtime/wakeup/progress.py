"""What this process has heard of each actor's progress, so a waiting sync caller reads the
database only when its own message may be final or the actor may be free.

Two facts per ``(alias, instance_id)``, both only ever growing:

- the highest sequence whose outcome is final (completed, rejected or dead-lettered):
  turns run strictly in order, so once it reaches a message's sequence that message is
  final too;
- how many activations of the actor ended here (a pass released its lease): a waiter whose
  message is still pending may then take the actor over.

Commits in this process report them directly; other processes' commits report the first
in the payload of their PostgreSQL ``result`` hint (``result:<instance_id>:<sequence>``,
several joined by ``,``). A hint without a payload says nothing: the waiter looks at the
database. Knowledge is a shortcut, never the truth: a waiter still reads the database
whenever its backoff runs out, so a lost or missing hint only costs latency.

A hint sent by the commit itself (so it arrives only if that commit happened) may also
carry the results of the sync calls it completed, one line each after the progress
(``,`` then ``\n<instance_id> <sequence> <message_id> <result JSON>``): a waiter of this
process whose message it names returns that result without reading the database. Only
results somebody here waits for are kept, and only until that waiter ends.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Iterable, Iterator
from contextlib import contextmanager

#: Payload prefix of a ``result`` hint that carries progress.
PREFIX = "result:"
#: Actors remembered (the least recently reported are forgotten first).
MAX_ACTORS = 10_000
#: Progress entries one hint payload carries at most (NOTIFY payloads stay small).
MAX_PER_HINT = 64
#: Bytes of results one hint payload carries at most (PostgreSQL refuses payloads of 8000
#: bytes and more); results that do not fit are read from the database by their waiters.
MAX_RESULT_BYTES = 4000

#: One completed sync call a hint carries: ``(instance_id, sequence, message_id, result JSON)``.
CarriedResult = tuple[int, int, int, str]

_lock = threading.Lock()
_final: OrderedDict[tuple[str, int], int] = OrderedDict()
_ended: dict[tuple[str, int], int] = {}
#: ``result`` hints received that said nothing about which actor (any outcome may be final).
_blind = 0


def committed(alias: str, instance_id: int, sequence: int) -> bool:
    """Messages up to ``sequence`` of the actor have a final outcome; ``True`` if that is
    news."""
    key = (alias, instance_id)
    with _lock:
        news = _final.get(key, 0) < sequence
        if news:
            _final[key] = sequence
        _final.move_to_end(key)
        while len(_final) > MAX_ACTORS:
            old, _sequence = _final.popitem(last=False)
            _ended.pop(old, None)
    return news


#: The sequences this process's sync callers wait for, per actor.
_waiting: dict[tuple[str, int], list[int]] = {}
#: Results a hint carried for those waiters: ``(alias, instance_id, sequence)`` to
#: ``(message_id, result JSON)``.
_results: dict[tuple[str, int, int], tuple[int, str]] = {}


@contextmanager
def waiting(alias: str, instance_id: int, sequence: int) -> Iterator[None]:
    """A sync caller of this process waits for message ``sequence`` of the actor."""
    key = (alias, instance_id)
    with _lock:
        _waiting.setdefault(key, []).append(sequence)
    try:
        yield
    finally:
        with _lock:
            sequences = _waiting.get(key, [])
            sequences.remove(sequence)
            if not sequences:
                _waiting.pop(key, None)
            if sequence not in sequences:
                _results.pop((alias, instance_id, sequence), None)


def carried_result(alias: str, instance_id: int, sequence: int, message_id: int) -> str | None:
    """The result JSON a committed hint carried for this waited-for message, if any."""
    with _lock:
        found = _results.get((alias, instance_id, sequence))
    if found is None or found[0] != message_id:
        return None
    return found[1]


def next_to_run(alias: str, instance_id: int, sequence: int) -> bool:
    """Whether the caller waiting for ``sequence`` is the one of this process that should
    take the actor over when it is free: the one furthest behind in the mailbox, whose pass
    then runs every other waiter's message on its way (in grouped commits)."""
    with _lock:
        return sequence >= max(_waiting.get((alias, instance_id), [sequence]))


def blind_hint() -> None:
    """A ``result`` hint without progress arrived: every waiter should look."""
    global _blind
    with _lock:
        _blind += 1


def ended(alias: str, instance_id: int, generation: int) -> bool:
    """The activation ``generation`` of the actor ended (its lease was released); ``True``
    if that is news."""
    key = (alias, instance_id)
    with _lock:
        news = _ended.get(key, 0) < generation
        if news:
            _ended[key] = generation
        if len(_ended) > MAX_ACTORS:
            _ended.pop(next(iter(_ended)))
    return news


def known(alias: str, instance_id: int) -> tuple[int, int, int]:
    """``(highest final sequence, latest activation generation ended, blind hints)`` as
    heard so far (0 when unknown)."""
    key = (alias, instance_id)
    with _lock:
        return _final.get(key, 0), _ended.get(key, 0), _blind


def payload(
    entries: Iterable[tuple[int, int]],
    released: int | None = None,
    results: Iterable[CarriedResult] = (),
) -> str:
    """The ``result`` hint payload reporting ``(instance_id, final sequence)`` entries and,
    with ``released``, that the single actor's activation of that generation ended with
    work left (``"result"`` alone when there is nothing to report, or too much).
    ``results``: completed sync calls whose results travel along while they fit in
    :data:`MAX_RESULT_BYTES` (only for a hint the commit itself sends)."""
    items = list(entries)
    if not items or len(items) > MAX_PER_HINT or (released is not None and len(items) > 1):
        return "result"
    parts = [f"{instance_id}:{sequence}" for instance_id, sequence in items]
    if released is not None:
        parts[0] += f":{released}"
    text = PREFIX + ",".join(parts)
    lines, room = [], MAX_RESULT_BYTES
    for instance_id, sequence, message_id, result in results:
        line = f"\n{instance_id} {sequence} {message_id} {result}"
        room -= len(line.encode())
        if room < 0:
            break
        lines.append(line)
    return text + ("," + "".join(lines) if lines else "")


def note(alias: str, text: str) -> bool:
    """Record the progress a received hint payload carries (malformed parts are ignored);
    ``True`` if any of it was news (this process's own hints come back as old news)."""
    head, *carried = text.split("\n")
    if carried:
        _keep_results(alias, carried)
    news = False
    for part in head[len(PREFIX) :].split(","):
        fields = part.split(":")
        if len(fields) not in (2, 3) or not all(field.isdigit() for field in fields):
            continue
        instance_id, sequence = int(fields[0]), int(fields[1])
        news = committed(alias, instance_id, sequence) or news
        if len(fields) == 3:
            news = ended(alias, instance_id, int(fields[2])) or news
    return news


def _keep_results(alias: str, lines: list[str]) -> None:
    """Keep the carried results that a waiter of this process waits for."""
    for line in lines:
        fields = line.split(" ", 3)
        if len(fields) != 4 or not all(field.isdigit() for field in fields[:3]):
            continue
        instance_id, sequence, message_id = (int(field) for field in fields[:3])
        with _lock:
            if sequence in _waiting.get((alias, instance_id), ()):
                _results[(alias, instance_id, sequence)] = (message_id, fields[3])
