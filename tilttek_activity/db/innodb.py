"""Writing once on InnoDB without ever waiting on the unique index of the key.

Why not just ``INSERT IGNORE``
    An INSERT into ``tilttek_activity_entry`` checks the unique index
    ``(idempotency_key, kind)``. When the key is there, InnoDB takes a *shared next-key lock*
    on that index record: the record and the gap before it, until the transaction ends.
    Two ways this aborts a caller's transaction with a deadlock (1213), which InnoDB answers
    by rolling back the victim's *whole* transaction:

    - T1 inserts K and keeps its transaction open; T2 and T3 insert K and wait for a shared
      lock on T1's record. T1 rolls back: the record goes and both waiters are granted its
      locks as *gap* locks. Each one's insert then needs an insert-intention lock on that
      gap, which the other's gap lock refuses: deadlock.
    - T2 and T3 each find K already committed (a duplicate, warning 1062): each now holds a
      shared next-key lock on K's record. When both later insert another entry whose key
      sorts into the gap before K, each waits for the other: deadlock.

    PostgreSQL's ``ON CONFLICT DO NOTHING`` has neither problem (no gap locks).

What we do instead
    A writer only inserts a key it has seen absent while holding a per-key mutex, so no
    INSERT ever meets a duplicate (and takes no lock on one), and waiting for a concurrent
    writer of the same key happens in a ``SELECT ... FOR UPDATE``, not in an INSERT:

    1. a plain (consistent, non-locking) read of the keys: a key already committed, or
       written earlier by this transaction, is returned as kept, without any lock;
    2. for the keys not seen, ``GET_LOCK`` of a name derived from the database, the kind and
       the key, in name order (so writers never wait on each other's mutexes in a cycle),
       with ``innodb_lock_wait_timeout`` as its timeout;
    3. under the mutexes: the plain read again (the key may have committed while we waited
       for the mutex), then ``SELECT ... FOR UPDATE`` of the keys still unseen. This is the
       one place a writer waits for another's uncommitted row. Under READ COMMITTED (Django's
       default) it requests an exclusive *record* lock, which InnoDB does not turn into a
       gap lock when that row is rolled back, and an absent key takes no lock at all;
    4. ``INSERT IGNORE`` of the keys still absent (IGNORE is only the guard against a writer
       that does not take the mutex, such as an older version of this library; any warning
       but a duplicate is refused as before);
    5. ``RELEASE_LOCK``: the mutex covers steps 3-4 only. Writers of one key that arrive
       while its first writer's transaction is still open wait in step 3 for its row, one at
       a time, and the others wait for the mutex: at most one transaction ever waits on a
       given uncommitted entry.

    On MariaDB the five steps travel as one compound statement (``BEGIN NOT ATOMIC``), so a
    new entry, a duplicate and a bulk chunk each cost one round trip, and an error inside it
    releases the mutexes before it is raised. MySQL has no compound statements outside
    stored programs: there the same steps are separate statements.

What remains
    A real cross-key deadlock of the application (T1 writes K1 then K2 while T2 writes K2 then
    K1, both uncommitted) still exists, as on every database; since one side of it waits on a
    mutex InnoDB cannot see, it ends with a lock-wait timeout (1205, which rolls back the
    statement, not the transaction) after ``innodb_lock_wait_timeout`` instead of a deadlock
    error. Under REPEATABLE READ step 1 reads an older snapshot and locking reads take gap
    locks: use READ COMMITTED (Django's default) for the guarantee.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any

from ..limits import ENTRY_TABLE
from ..records import COLUMNS
from ..validation import Draft

__all__ = ["ABSENT", "CREATED", "FOUND", "LOCKED", "LOST", "SEEN", "compound_write", "lock_name"]

LOCK_PREFIX = "tilttek_activity:"

#: What became of one draft: still ``ABSENT`` (its mutex timed out), ``CREATED`` by this
#: statement, or kept: ``SEEN`` by a plain read, ``LOCKED`` by the locking read of step 3, or
#: ``LOST`` to a writer that does not take the mutex (its duplicate warning).
ABSENT, CREATED, SEEN, LOCKED, LOST = 0, 1, 2, 3, 4
FOUND = (SEEN, LOCKED, LOST)


def lock_name(database: str, kind: str, key: str) -> str:
    """The ``GET_LOCK`` name of one identity. User locks are server-wide (every schema shares
    them) and their names at most 64 characters long, so database, kind and key are hashed."""
    text = f"{database}\x00{kind}\x00{key}".encode("utf-8", "surrogatepass")
    return LOCK_PREFIX + hashlib.blake2b(text, digest_size=20).hexdigest()


def compound_write(
    drafts: Sequence[Draft], names: Sequence[str], row_params: Sequence[Sequence[Any]]
) -> tuple[str, list[Any]]:
    """The MariaDB compound statement writing ``drafts`` once (steps 1-5 above), and its
    parameters. ``names`` are the drafts' lock names, ``row_params`` their insert values.

    Its result set has one row per draft, in draft order: ``ord, outcome, position,
    got_locks, warning_code, warning_message``, then the kept row's columns in ``COLUMNS``
    order (NULL unless ``outcome`` is one of :data:`FOUND`). ``got_locks`` is 1 when every
    mutex needed was acquired, 0 on a timeout, NULL when none was needed (or ``GET_LOCK``
    failed). A warning code means the insert was refused and undone.
    """
    return _Compound(drafts, names).render(row_params)


def _q(name: str) -> str:
    return f"`{name}`"


class _Compound:
    """Renders the statement; placeholders are added in the order they appear."""

    def __init__(self, drafts: Sequence[Draft], names: Sequence[str]) -> None:
        self.drafts = drafts
        self.names = names
        self.lines: list[str] = []
        self.params: list[Any] = []
        self.table = _q(ENTRY_TABLE)
        self.cols = [_q(c) for c in COLUMNS]

    def add(self, line: str, *params: Any) -> None:
        self.lines.append(line)
        self.params.extend(params)

    def where(self, i: int) -> str:
        draft = self.drafts[i]
        self.params.extend([draft.idempotency_key, draft.kind])
        return f"{self.cols[2]} = %s AND {self.cols[1]} = %s"

    def read(self, i: int, outcome: int, suffix: str = "") -> None:
        self.lines.append(
            f"SELECT {self.cols[0]} INTO p{i} FROM {self.table} WHERE {self.where(i)}{suffix};"
        )
        self.add(f"IF p{i} IS NOT NULL THEN SET o{i} = {outcome}; END IF;")

    def render(self, row_params: Sequence[Sequence[Any]]) -> tuple[str, list[Any]]:
        n = len(self.drafts)
        everyone = range(n)
        release = "DO " + ", ".join("RELEASE_LOCK(%s)" for _ in everyone) + ";"
        add = self.add
        # The comment names the statement in logs and keeps it from reading as a "BEGIN".
        add("/* tilttek_activity: write once */ BEGIN NOT ATOMIC")
        add("DECLARE v_got INT DEFAULT NULL;")
        add("DECLARE v_timeout INT DEFAULT @@innodb_lock_wait_timeout;")
        add("DECLARE v_count INT DEFAULT 0;")
        add("DECLARE v_rows INT DEFAULT 0;")
        add("DECLARE v_code INT DEFAULT NULL;")
        add("DECLARE v_message TEXT DEFAULT NULL;")
        for i in everyone:
            add(f"DECLARE p{i} BIGINT DEFAULT NULL;")
            add(f"DECLARE o{i} TINYINT DEFAULT {ABSENT};")
        # An error anywhere (a lock wait timeout, a lost connection...): release the
        # mutexes, then raise it unchanged. RELEASE_LOCK of a name not held is a no-op.
        add(f"DECLARE EXIT HANDLER FOR SQLEXCEPTION BEGIN {release} RESIGNAL; END;", *self.names)
        add("DECLARE CONTINUE HANDLER FOR NOT FOUND BEGIN END;")  # SELECT INTO no row
        # 1. plain reads
        for i in everyone:
            self.read(i, SEEN)
        add(f"IF {' OR '.join(f'p{i} IS NULL' for i in everyone)} THEN")
        # 2. the mutexes of the keys not seen, in name order
        add("SET v_got = 1;")
        for i in sorted(everyone, key=lambda i: self.names[i]):
            add(
                f"IF v_got = 1 AND p{i} IS NULL THEN SET v_got = GET_LOCK(%s, v_timeout); END IF;",
                self.names[i],
            )
        add("IF v_got = 1 THEN")
        add("writing: BEGIN")
        for i in everyone:
            add(f"IF p{i} IS NULL THEN")
            # 3. read again (committed while we waited?), then wait for a concurrent
            #    writer's uncommitted row, if any, with an exclusive record lock
            self.read(i, SEEN)
            add(f"IF p{i} IS NULL THEN")
            self.read(i, LOCKED, " FOR UPDATE")
            add("END IF;")
            # 4. insert what is still absent
            add(f"IF p{i} IS NULL THEN")
            marks = ", ".join(["%s"] * len(row_params[i]))
            add(
                f"INSERT IGNORE INTO {self.table} ({', '.join(self.cols[1:])}) VALUES ({marks});",
                *row_params[i],
            )
            add("GET DIAGNOSTICS v_count = NUMBER, v_rows = ROW_COUNT;")
            add(f"IF v_rows = 1 THEN SET p{i} = LAST_INSERT_ID(), o{i} = {CREATED};")
            add(f"ELSE SET o{i} = {LOST}; END IF;")
            add("IF v_count > 0 AND v_rows = 1 THEN")
            add("GET DIAGNOSTICS CONDITION 1 v_code = MYSQL_ERRNO, v_message = MESSAGE_TEXT;")
            add("LEAVE writing;")
            add("END IF;")
            add("END IF;")
            add("END IF;")
        add("END writing;")
        add("END IF;")
        # 5. release
        add(release, *self.names)
        add("END IF;")
        # A refused value (IGNORE turned an error into a warning): undo what was written.
        written = ", ".join(f"IF(o{i} = {CREATED}, p{i}, NULL)" for i in everyone)
        add("IF v_code IS NOT NULL THEN")
        add(f"DELETE FROM {self.table} WHERE {self.cols[0]} IN ({written});")
        add("END IF;")
        # The answer: one row per draft, with the kept row when one was found.
        outcomes = " UNION ALL ".join(
            f"SELECT {i} AS ord, o{i} AS outcome, p{i} AS pos" for i in everyone
        )
        found = ", ".join(str(outcome) for outcome in FOUND)
        answer = (
            "SELECT d.ord, d.outcome, d.pos, v_got, v_code, v_message, "
            f"{', '.join('e.' + c for c in self.cols)} "
            f"FROM ({outcomes}) AS d LEFT JOIN {self.table} AS e "
            f"ON e.{self.cols[0]} = d.pos AND d.outcome IN ({found}) ORDER BY d.ord"
        )
        # A row found by a locking read may be newer than a REPEATABLE READ snapshot: read it
        # the same way (this transaction already holds its lock, so this does not wait).
        by_lock = " OR ".join(f"o{i} IN ({LOCKED}, {LOST})" for i in everyone)
        add(f"IF {by_lock} THEN {answer} LOCK IN SHARE MODE; ELSE {answer}; END IF;")
        add("END")
        return "\n".join(self.lines), self.params
