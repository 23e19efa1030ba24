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
    releases the mutexes before it is raised. One draft uses scalar variables, and re-reads
    in step 3 only if it had to wait for the mutex (``GET_LOCK(name, 0)`` first). Several
    (MariaDB 10.6+) travel as one JSON document read with ``JSON_TABLE``: set-based, so the
    cost grows with the rows and not with their square; every join starts from the document
    (``STRAIGHT_JOIN``) and reaches the journal through its unique index, so the locking
    read locks exactly the chunk's keys. MySQL has no compound statements outside stored
    programs (and MariaDB 10.5 no ``JSON_TABLE`` for bulk chunks): there the same steps are
    separate statements.

Alone in a transaction
    When the write *is* the whole transaction (autocommit, or the transaction
    ``record_activities`` opens outside any caller's), a deadlock loses nothing but the
    write itself, which is retried: there the plain ``INSERT IGNORE`` serves, as fast as a
    raw insert (see :meth:`MySQLBackend._insert_alone <.mysql.MySQLBackend._insert_alone>`).
    The protocol above is for writes inside a caller's transaction.

What remains
    A real cross-key deadlock of the application (T1 writes K1 then K2 while T2 writes K2 then
    K1, both uncommitted) still exists, as on every database; since one side of it waits on a
    mutex InnoDB cannot see, it ends with a lock-wait timeout (1205, which rolls back the
    statement, not the transaction) after ``innodb_lock_wait_timeout`` instead of a deadlock
    error. Under REPEATABLE READ step 1 reads an older snapshot and locking reads take gap
    locks: use READ COMMITTED (Django's default) for the guarantee. A writer inside a
    transaction whose insert loses the key to a concurrent *autocommit* writer (which takes
    no mutex) keeps that duplicate's shared lock until it commits, as before this protocol;
    two such losers in one gap are needed for a deadlock.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from typing import Any

from ..limits import ENTRY_TABLE
from ..records import COLUMNS
from ..validation import Draft

__all__ = ["LOCK_PREFIX", "compound_write", "lock_name"]

#: The prefix of the named locks serialising the writers of one identity (kind and key).
LOCK_PREFIX = "tilttek_activity:"
DUPLICATE_KEY = 1062


def lock_name(database: str, kind: str, key: str) -> str:
    """The ``GET_LOCK`` name of one identity. User locks are server-wide (every schema shares
    them) and their names at most 64 characters long, so database, kind and key are hashed."""
    text = f"{database}\x00{kind}\x00{key}".encode("utf-8", "surrogatepass")
    return LOCK_PREFIX + hashlib.blake2b(text, digest_size=20).hexdigest()


def compound_write(
    drafts: Sequence[Draft],
    names: Sequence[str],
    row_params: Sequence[Sequence[Any]],
    collation: str,
) -> tuple[str, list[Any]]:
    """The MariaDB compound statement writing ``drafts`` once (steps 1-5 above), and its
    one parameter. ``names`` are the drafts' lock names, ``row_params`` their insert values
    (``insert_columns`` order), ``collation`` the one of ``idempotency_key``.

    It returns one or two result sets: the rows it wrote (``written_position, kind,
    idempotency_key``; only when it inserted several), then one row per draft, in draft
    order: ``got_locks, locked, warning_code, warning_message, ord, written_position`` (the
    row it wrote, for one draft) and the draft's stored row in ``COLUMNS`` order (NULL when
    there is none or it was just written). ``got_locks`` is 1 when every mutex needed
    was acquired, 0 on a timeout, NULL when none was needed (or ``GET_LOCK`` failed). A
    warning code means IGNORE downgraded an error: the caller must delete what was written.

    One draft (``record_activity``, ``cancel_activity``) gets a shorter statement with
    scalar variables; more get the set-based one.
    """
    if len(drafts) == 1:
        draft, params = drafts[0], list(row_params[0])
        identity = [draft.idempotency_key, draft.kind]
        return _render_one(), [*identity, names[0], *identity, *identity, *params, *identity]
    document = json.dumps(
        [
            [index, name, *params]
            for index, (name, params) in enumerate(zip(names, row_params, strict=True))
        ],
        ensure_ascii=False,
        separators=(",", ":"),
        default=str,
    )
    return _render(collation), [document]


def _q(name: str) -> str:
    return f"`{name}`"


def _render_one() -> str:
    """The same protocol for one draft, with scalar variables. Parameters: key, kind (plain
    read), lock name, key, kind (read again, only after waiting for the mutex), key, kind
    (locking read), the insert values, key, kind (the row of a writer without the mutex,
    when the insert lost to it)."""
    table = _q(ENTRY_TABLE)
    cols = [_q(c) for c in COLUMNS]
    position, kind, key = cols[0], cols[1], cols[2]
    where = f"{key} = %s AND {kind} = %s"
    values = ", ".join(["%s"] * (len(cols) - 1))
    status = "SELECT v_got, v_locked, v_code, v_message, 0, IF(v_rows = 1, v_kept, NULL)"
    answer = (
        f"{status}, {', '.join('e.' + c for c in cols)} "
        f"FROM (SELECT 1) AS d LEFT JOIN {table} AS e ON e.{position} = v_kept"
    )
    return "\n".join(
        [
            "/* tilttek_activity: write once */ BEGIN NOT ATOMIC",
            "DECLARE v_kept BIGINT DEFAULT NULL;",
            "DECLARE v_got INT DEFAULT NULL;",
            "DECLARE v_waited INT DEFAULT 0;",
            "DECLARE v_locked INT DEFAULT 0;",
            "DECLARE v_rows INT DEFAULT 0;",
            "DECLARE v_count INT DEFAULT 0;",
            "DECLARE v_code INT DEFAULT NULL;",
            "DECLARE v_message TEXT DEFAULT NULL;",
            "DECLARE v_name VARCHAR(64) CHARACTER SET ascii DEFAULT NULL;",
            "DECLARE EXIT HANDLER FOR SQLEXCEPTION BEGIN "
            "IF v_name IS NOT NULL THEN DO RELEASE_LOCK(v_name); END IF; RESIGNAL; END;",
            "DECLARE CONTINUE HANDLER FOR NOT FOUND BEGIN END;",
            # 1. plain read
            f"SELECT {position} INTO v_kept FROM {table} WHERE {where};",
            "SET v_name = %s;",
            "IF v_kept IS NULL THEN",
            # 2. the mutex: at once when free, else waiting
            "SET v_got = GET_LOCK(v_name, 0);",
            "IF v_got = 0 THEN",
            "SET v_waited = 1, v_got = GET_LOCK(v_name, @@innodb_lock_wait_timeout);",
            "END IF;",
            "IF v_got = 1 THEN",
            # 3. read again if another writer held the mutex (it may have committed the key),
            #    then wait for a concurrent writer's uncommitted row, if any
            "IF v_waited = 1 THEN",
            f"SELECT {position} INTO v_kept FROM {table} WHERE {where};",
            "END IF;",
            "IF v_kept IS NULL THEN",
            f"SELECT {position} INTO v_kept FROM {table} WHERE {where} FOR UPDATE;",
            "IF v_kept IS NOT NULL THEN SET v_locked = 1; END IF;",
            "END IF;",
            # 4. insert if still absent
            "IF v_kept IS NULL THEN",
            f"INSERT IGNORE INTO {table} ({', '.join(cols[1:])}) VALUES ({values});",
            "GET DIAGNOSTICS v_count = NUMBER, v_rows = ROW_COUNT;",
            "IF v_rows = 1 THEN SET v_kept = LAST_INSERT_ID(); END IF;",
            "IF v_rows = 1 AND v_count > 0 THEN",
            "GET DIAGNOSTICS CONDITION 1 v_code = MYSQL_ERRNO, v_message = MESSAGE_TEXT;",
            "END IF;",
            "IF v_rows = 0 THEN",  # lost to a writer without the mutex
            f"SELECT {position} INTO v_kept FROM {table} WHERE {where} LOCK IN SHARE MODE;",
            "SET v_locked = 1;",
            "END IF;",
            "END IF;",
            "END IF;",
            # 5. release
            "DO RELEASE_LOCK(v_name);",
            "END IF;",
            # The answer (nothing to read for a written row). A row found by a locking read
            # may be newer than a REPEATABLE READ snapshot: read it the same way.
            f"IF v_rows = 1 THEN {status}, {', '.join(['NULL'] * len(cols))};",
            f"ELSEIF v_locked = 1 THEN {answer} LOCK IN SHARE MODE;",
            f"ELSE {answer}; END IF;",
            "END",
        ]
    )


def _render(collation: str) -> str:
    table = _q(ENTRY_TABLE)
    cols = [_q(c) for c in COLUMNS]
    position, kind, key = cols[0], cols[1], cols[2]
    # The document: [ord, lock name, kind, key, member, verb, object, quantity, context,
    # occurred_at, recorded_at] per draft. ``kind`` is ASCII so that it compares in the
    # column's own collation; ``key`` is declared in the key column's.
    drafts = (
        "JSON_TABLE(v_doc, '$[*]' COLUMNS("
        "ord INT PATH '$[0]', name VARCHAR(64) CHARACTER SET ascii PATH '$[1]', "
        "kind VARCHAR(16) CHARACTER SET ascii PATH '$[2]', "
        f"k VARCHAR(255) CHARACTER SET utf8mb4 COLLATE {collation} PATH '$[3]', "
        "member VARCHAR(320) CHARACTER SET utf8mb4 PATH '$[4]', "
        "verb VARCHAR(128) CHARACTER SET utf8mb4 PATH '$[5]', "
        "object VARCHAR(320) CHARACTER SET utf8mb4 PATH '$[6]', "
        "quantity INT PATH '$[7]', context LONGTEXT CHARACTER SET utf8mb4 PATH '$[8]', "
        "occurred_at VARCHAR(32) CHARACTER SET ascii PATH '$[9]', "
        "recorded_at VARCHAR(32) CHARACTER SET ascii PATH '$[10]')) AS d"
    )
    same = f"e.{key} = d.k AND e.{kind} = d.kind"
    # Drafts whose key a plain (consistent, non-locking) read does not show.
    unseen = f"{drafts} LEFT JOIN {table} AS e ON {same} WHERE e.{position} IS NULL"
    # v_unseen: one character per draft, "1" where the second plain read did not show it.
    chosen = "SUBSTRING(v_unseen, d.ord + 1, 1) = '1'"
    release = f"SELECT COUNT(RELEASE_LOCK(d.name)) INTO v_e FROM {drafts};"
    values = ", ".join(
        "d." + name
        for name in (
            "kind",
            "k",
            "member",
            "verb",
            "object",
            "quantity",
            "context",
            "occurred_at",
            "recorded_at",
        )
    )
    answer = (
        f"SELECT STRAIGHT_JOIN v_got, v_locked, v_code, v_message, d.ord, NULL, "
        f"{', '.join('e.' + c for c in cols)} "
        f"FROM {drafts} LEFT JOIN {table} AS e ON {same} ORDER BY d.ord"
    )
    return "\n".join(
        [
            "/* tilttek_activity: write once */ BEGIN NOT ATOMIC",
            "DECLARE v_doc LONGTEXT CHARACTER SET utf8mb4 DEFAULT %s;",
            "DECLARE v_timeout INT DEFAULT @@innodb_lock_wait_timeout;",
            "DECLARE v_got INT DEFAULT NULL;",
            "DECLARE v_name VARCHAR(64) CHARACTER SET ascii DEFAULT NULL;",
            "DECLARE v_end INT DEFAULT 0;",
            "DECLARE v_locked INT DEFAULT 0;",
            "DECLARE v_count INT DEFAULT 0;",
            "DECLARE v_i INT DEFAULT 1;",
            "DECLARE v_e INT DEFAULT NULL;",
            "DECLARE v_m TEXT DEFAULT NULL;",
            "DECLARE v_code INT DEFAULT NULL;",
            "DECLARE v_message TEXT DEFAULT NULL;",
            "DECLARE v_unseen LONGTEXT DEFAULT NULL;",
            f"DECLARE unseen_names CURSOR FOR SELECT STRAIGHT_JOIN d.name FROM {unseen} "
            "ORDER BY d.name;",
            # An error anywhere (a lock wait timeout, a lost connection...): release the
            # mutexes, then raise it unchanged. RELEASE_LOCK of a name not held is a no-op.
            f"DECLARE EXIT HANDLER FOR SQLEXCEPTION BEGIN {release} RESIGNAL; END;",
            "DECLARE CONTINUE HANDLER FOR NOT FOUND SET v_end = 1;",
            # 1-2. the mutexes of the keys a plain read does not show, in name order
            "OPEN unseen_names;",
            "locking: LOOP",
            "FETCH unseen_names INTO v_name;",
            "IF v_end = 1 THEN LEAVE locking; END IF;",
            "SET v_got = GET_LOCK(v_name, v_timeout);",
            "IF v_got IS NULL OR v_got <> 1 THEN LEAVE locking; END IF;",
            "END LOOP;",
            "CLOSE unseen_names;",
            "IF v_got = 1 THEN",
            # 3. read again (committed while we waited for a mutex?), then wait for a
            #    concurrent writer's uncommitted rows with exclusive record locks
            f"SELECT STRAIGHT_JOIN GROUP_CONCAT(IF(e.{position} IS NULL, '1', '0') "
            f"ORDER BY d.ord SEPARATOR '') INTO v_unseen FROM {drafts} "
            f"LEFT JOIN {table} AS e ON {same};",
            "IF INSTR(v_unseen, '1') > 0 THEN",
            f"SELECT STRAIGHT_JOIN COUNT(*) INTO v_locked FROM {drafts} "
            f"JOIN {table} AS e ON {same} WHERE {chosen} FOR UPDATE;",
            # 4. insert what is still absent, in draft order
            f"INSERT IGNORE INTO {table} ({', '.join(cols[1:])}) "
            f"SELECT STRAIGHT_JOIN {values} FROM {unseen} AND {chosen} ORDER BY d.ord "
            f"RETURNING {position} AS written_position, {kind}, {key};",
            "GET DIAGNOSTICS v_count = NUMBER;",
            "WHILE v_i <= v_count AND v_code IS NULL DO",
            "GET DIAGNOSTICS CONDITION v_i v_e = MYSQL_ERRNO, v_m = MESSAGE_TEXT;",
            f"IF v_e <> {DUPLICATE_KEY} THEN SET v_code = v_e, v_message = v_m; END IF;",
            "SET v_i = v_i + 1;",
            "END WHILE;",
            "END IF;",
            "END IF;",
            # 5. release
            release,
            # The answer. A row found by the locking read may be newer than a REPEATABLE
            # READ snapshot: then read the same way (this transaction holds those locks).
            f"IF v_locked > 0 THEN {answer} LOCK IN SHARE MODE; ELSE {answer}; END IF;",
            "END",
        ]
    )
