"""Several actors at once: leases and first claims of many cold actors, and the fenced
commit of their turns, in a few statements instead of a few per actor.

A worker that finds many actors with one due message each (independent one-off work: a
task queue, a fan-out) leases up to ``MAX_ACTORS_PER_COMMIT`` of them and claims each one's
head together (:func:`claim_batch`), runs one turn per actor, and commits the turns that
staged nothing together (:func:`commit_batch`). Every actor keeps its own fence: the
commit checks owner, token, generation, the unexpired lease and the claimed row *per
instance*, writes only the actors whose fence holds and reports which they were, so one
actor's lost lease never commits or blocks another's work. The leases of a batch share
one token (each instance still has its own generation).

PostgreSQL: each step is one autocommit statement (``unnest`` arrays, ``LATERAL`` heads).
MySQL and SQLite: a handful of statements for the whole batch, inside the caller's
transaction.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .claims import MESSAGE_COLUMNS, MESSAGE_COLUMNS_N
from .dialect import Dialect
from .fence import complete
from .leases import FREE, LEASE_SETS, candidate_order_sqlite, state_unless_cached
from .rows import BatchedTurn, Completion, LeaseRow, MessageRow, lease_from_row, message_from_row
from .sql import each, in_list, render

# -- PostgreSQL: one statement each ---------------------------------------------------------

#: Lease up to ``%(limit)s`` free candidates (oldest work first, locked rows skipped) and
#: claim each one's head if it is due; one row per lease, with its claimed message (none
#: when a dead activation left a claimed row, or the head is not due).
CLAIM_BATCH_POSTGRESQL = (
    "WITH c AS (SELECT f.id FROM unnest(%(ids)s::bigint[]) WITH ORDINALITY AS u(id, position) "
    "JOIN {t_instances} f ON f.id = u.id WHERE " + FREE + "{apart} "
    "ORDER BY u.position LIMIT %(limit)s FOR UPDATE OF f SKIP LOCKED), "
    "i AS (UPDATE {t_instances} AS i SET " + LEASE_SETS + " FROM c WHERE i.id = c.id "
    "RETURNING i.id, i.actor_type, i.actor_id, {state} AS state, i.state_version, "
    "i.state_revision, i.activation_generation, "
    "EXISTS (SELECT 1 FROM {t_claimed} x WHERE x.instance_id = i.id) AS stale), "
    "head AS (SELECT hh.id, hh.available_at FROM i CROSS JOIN LATERAL (SELECT h.id, "
    "h.available_at FROM {t_ready} h WHERE h.instance_id = i.id ORDER BY h.sequence LIMIT 1) "
    "AS hh WHERE NOT i.stale), "
    "moved AS (DELETE FROM {t_ready} x USING head WHERE x.id = head.id "
    "AND head.available_at <= {now} RETURNING x.message_id, x.instance_id), "
    "cl AS (INSERT INTO {t_claimed} (message_id, instance_id, process_id, activation_token, "
    "activation_generation, claimed_at) SELECT moved.message_id, i.id, %(owner_id)s, "
    "%(token)s, i.activation_generation, {now} FROM moved JOIN i ON i.id = moved.instance_id "
    "RETURNING message_id, instance_id), "
    "m AS (UPDATE {t_messages} n SET attempt_count = n.attempt_count + 1, started_at = {now}, "
    "updated_at = {now} FROM cl WHERE n.id = cl.message_id "
    "RETURNING cl.instance_id AS leased, " + MESSAGE_COLUMNS_N + ") "
    "SELECT i.id, i.actor_type, i.actor_id, i.state, i.state_version, i.state_revision, "
    "i.activation_generation, i.stale, m.id, m.sequence, m.operation, m.arguments, "
    "m.delivery_mode, m.attempt_count, m.max_attempts, m.request_id, m.idempotency_key "
    "FROM i LEFT JOIN m ON m.leased = i.id ORDER BY array_position(%(ids)s::bigint[], i.id)"
)

#: The turns of a batch (``v``, one row per actor from arrays).
BATCH_ROWS_CTE_POSTGRESQL = (
    "v AS (SELECT * FROM unnest(%(instance_ids)s::bigint[], %(generations)s::bigint[], "
    "%(message_ids)s::bigint[], %(states)s::text[], %(state_versions)s::int[], "
    "%(state_revisions)s::bigint[], %(results)s::text[], %(rejections)s::text[]) "
    "AS v(instance_id, generation, message_id, state, state_version, state_revision, "
    "result, rejection))"
)

#: Commit a batch and release its leases: the fence per instance (``f``), then the
#: results (``d``) and the claimed rows (``u``) of the fenced ones only. Returns the ids of
#: the instances fenced and of those whose claimed row was deleted.
COMMIT_BATCH_POSTGRESQL = (
    "WITH " + BATCH_ROWS_CTE_POSTGRESQL + ", "
    "f AS (UPDATE {t_instances} i SET last_used_at = {now}, updated_at = {now}, "
    "state = CASE WHEN v.state IS NULL THEN i.state ELSE v.state{json_cast} END, "
    "state_version = CASE WHEN v.state IS NULL THEN i.state_version ELSE v.state_version END, "
    "state_revision = CASE WHEN v.state IS NULL THEN i.state_revision "
    "ELSE v.state_revision END, "
    "activation_owner_id = NULL, activation_token = NULL, activation_expires_at = NULL "
    "FROM v WHERE i.id = v.instance_id AND i.activation_owner_id = %(owner_id)s "
    "AND i.activation_token = %(token)s AND i.activation_generation = v.generation "
    "AND i.activation_expires_at > {now} AND EXISTS (SELECT 1 FROM {t_claimed} c "
    "WHERE c.instance_id = v.instance_id AND c.message_id = v.message_id "
    "AND c.activation_token = %(token)s) RETURNING i.id), "
    "d AS (UPDATE {t_messages} m SET result = v.result{json_cast}, "
    "rejection = v.rejection{json_cast}, "
    "rejected_at = CASE WHEN v.rejection IS NULL THEN m.rejected_at ELSE {now} END, "
    "started_at = COALESCE(m.started_at, {now}), completed_at = {now}, updated_at = {now} "
    "FROM v JOIN f ON f.id = v.instance_id WHERE m.id = v.message_id RETURNING m.id), "
    "u AS (DELETE FROM {t_claimed} c USING v JOIN f ON f.id = v.instance_id "
    "WHERE c.instance_id = v.instance_id AND c.message_id = v.message_id "
    "RETURNING c.instance_id) "
    "SELECT ARRAY(SELECT id FROM f), ARRAY(SELECT instance_id FROM u), "
    "(SELECT COUNT(*) FROM d)"
)

# -- MySQL, SQLite: a few statements for the whole batch ------------------------------------

#: MySQL: which candidates are free and may commit with others (a plain read).
FREE_BATCH_CANDIDATES = "SELECT id FROM {t_instances} WHERE id IN ({ids}) AND " + FREE + "{apart}"

#: MySQL: lock the free candidates found by a plain read (rows others hold are skipped).
LOCK_CANDIDATES = "SELECT id FROM {t_instances} WHERE id IN ({ids}) AND " + FREE + "{skip_locked}"

#: MySQL: take the leases of the locked candidates.
TAKE_LEASES = "UPDATE {t_instances} SET " + LEASE_SETS + " WHERE id IN ({ids})"

#: MySQL: read the leases just taken.
READ_LEASES = (
    "SELECT id, actor_type, actor_id, {state}, state_version, state_revision, "
    "activation_generation, (SELECT COUNT(*) FROM {t_claimed} c WHERE c.instance_id = i.id) "
    "FROM {t_instances} i WHERE id IN ({ids})"
)

#: SQLite: lease up to ``%(limit)s`` free candidates in order, in one statement.
CLAIM_LEASES_SQLITE = (
    "UPDATE {t_instances} SET " + LEASE_SETS + " WHERE id IN (SELECT id FROM {t_instances} "
    "WHERE id IN ({ids}) AND " + FREE + "{apart}{order} LIMIT %(limit)s) "
    "RETURNING id, actor_type, actor_id, {state}, state_version, state_revision, "
    "activation_generation, (SELECT COUNT(*) FROM {t_claimed} c "
    "WHERE c.instance_id = {t_instances}.id)"
)

#: The due heads of several actors (the lowest sequence of each: one index probe each).
DUE_HEADS = (
    "SELECT r.instance_id, r.message_id FROM {t_ready} r JOIN (SELECT instance_id, "
    "MIN(sequence) AS head FROM {t_ready} WHERE instance_id IN ({ids}) GROUP BY instance_id) "
    "AS h ON h.instance_id = r.instance_id AND h.head = r.sequence WHERE r.available_at <= {now}"
)

#: The heads out of ready.
UNREADY_HEADS = "DELETE FROM {t_ready} WHERE message_id IN ({ids})"

#: The heads claimed under their leases (``{rows}``: one :data:`CLAIM_ROW` per head).
INSERT_CLAIMS = (
    "INSERT INTO {t_claimed} (message_id, instance_id, process_id, activation_token, "
    "activation_generation, claimed_at) VALUES {rows}"
)

#: One head claimed: message ``m_N`` of instance ``i_N`` under the lease's generation ``g_N``.
CLAIM_ROW = "(%(m_{n})s, %(i_{n})s, %(owner_id)s, %(token)s, %(g_{n})s, {now})"

#: Their attempts counted.
COUNT_ATTEMPTS = (
    "UPDATE {t_messages} SET attempt_count = attempt_count + 1, started_at = {now}, "
    "updated_at = {now} WHERE id IN ({ids})"
)

#: The claimed messages read back.
CLAIMED_MESSAGES = (
    "SELECT m.instance_id, " + MESSAGE_COLUMNS + " FROM {t_messages} m WHERE m.id IN ({ids})"
)

#: Which instances of a batch are still fenced (``{where}``: :data:`BATCH_FENCE_WHERE`).
FENCED_INSTANCES = "SELECT id FROM {t_instances} WHERE {where}{for_update}"

#: The fence of every instance of a batch: owner, token, the unexpired lease, each
#: instance's generation and claimed message (``{generations}``, ``{claimed}``: one
#: :data:`TURN_WHEN` per turn, named ``gen`` and ``claim``; the claimed message's ``CASE``
#: is keyed on the instance the subquery correlates to).
BATCH_FENCE_WHERE = (
    "id IN ({ids}) AND activation_owner_id = %(owner_id)s AND activation_token = %(token)s "
    "AND activation_expires_at > {now} AND activation_generation = "
    "CASE id {generations} ELSE NULL END "
    "AND EXISTS (SELECT 1 FROM {t_claimed} c WHERE c.instance_id = {t_instances}.id "
    "AND c.activation_token = %(token)s AND c.message_id = "
    "CASE {t_instances}.id {claimed} ELSE NULL END)"
)

#: MySQL: the instances found fenced (``{ids}``), written by :data:`RELEASE_BATCH`.
FENCED_IDS = "id IN ({ids})"

#: The value of one turn's instance (``{name}_id_N``) in a ``CASE id``: ``{name}_N``
#: (``{cast}``: the JSON cast of a state, or nothing).
TURN_WHEN = "WHEN %({name}_id_{n})s THEN %({name}_{n})s{cast}"

#: A column written per instance (``{whens}``: :data:`TURN_WHEN` per turn writing it), the
#: others keep ``{column}``.
COLUMN_BY_INSTANCE = "CASE id {whens} ELSE {column} END"

#: The state the turns left and the leases released (``{where}``: :data:`FENCED_IDS`, or
#: the whole fence on SQLite, which returns the ids it wrote with
#: :data:`RETURNING_RELEASED`; ``{state}``, ``{state_version}``, ``{state_revision}``:
#: :data:`COLUMN_BY_INSTANCE`, or the column itself when no turn wrote state).
RELEASE_BATCH = (
    "UPDATE {t_instances} SET last_used_at = {now}, updated_at = {now}, state = {state}, "
    "state_version = {state_version}, state_revision = {state_revision}, "
    "activation_owner_id = NULL, activation_token = NULL, activation_expires_at = NULL "
    "WHERE {where}{returning}"
)

#: SQLite: the instances :data:`RELEASE_BATCH` wrote.
RETURNING_RELEASED = " RETURNING id"

#: The actor types that never commit with others, left out of a batch (``{types}``).
APART = " AND actor_type NOT IN ({types})"

#: The claimed rows of the committed turns.
UNCLAIM_BATCH = (
    "DELETE FROM {t_claimed} WHERE message_id IN ({ids}) AND activation_token = %(token)s"
)


def claim_batch_postgresql(
    dialect: Dialect,
    cursor: Any,
    instance_ids: Sequence[int],
    *,
    limit: int,
    owner_id: str,
    token: str,
    lease_seconds: float,
    cached: dict[int, int] | None = None,
    apart: Sequence[str] = (),
) -> list[tuple[LeaseRow, MessageRow | None]]:
    if not instance_ids or limit < 1:
        return []
    state, state_params = state_unless_cached(dialect, "i", cached, instance_ids)
    kept_apart, apart_params = _apart(dialect, apart)
    cursor.execute(
        render(dialect, CLAIM_BATCH_POSTGRESQL, state=state, apart=kept_apart),
        {
            **apart_params,
            "ids": list(instance_ids),
            "limit": limit,
            "owner_id": owner_id,
            "token": token,
            "lease": dialect.interval(lease_seconds),
            **state_params,
        },
    )
    return [
        (
            lease_from_row(row[:8], owner_id, token),
            None if row[8] is None else message_from_row(row[8:17]),
        )
        for row in cursor.fetchall()
    ]


def _leases_mysql(
    dialect: Dialect,
    cursor: Any,
    instance_ids: Sequence[int],
    limit: int,
    params: dict[str, Any],
    cached: dict[int, int] | None,
    kept_apart: Sequence[str],
) -> list[LeaseRow]:
    """A plain read finds the free candidates (a sorted locking read would lock every row
    it examines), then one locking read takes those nobody else holds."""
    ids, id_params = in_list("id", instance_ids)
    apart, apart_params = _apart(dialect, kept_apart)
    cursor.execute(
        render(dialect, FREE_BATCH_CANDIDATES, ids=ids, apart=apart), {**id_params, **apart_params}
    )
    free = {int(row[0]) for row in cursor.fetchall()}
    wanted = [i for i in instance_ids if i in free][:limit]
    if not wanted:
        return []
    ids, id_params = in_list("id", wanted)
    cursor.execute(render(dialect, LOCK_CANDIDATES, ids=ids), id_params)
    locked = {int(row[0]) for row in cursor.fetchall()}
    wanted = [i for i in wanted if i in locked]
    if not wanted:
        return []
    ids, id_params = in_list("id", wanted)
    cursor.execute(render(dialect, TAKE_LEASES, ids=ids), {**params, **id_params})
    state, state_params = state_unless_cached(dialect, "i", cached, wanted)
    cursor.execute(
        render(dialect, READ_LEASES, ids=ids, state=state), {**id_params, **state_params}
    )
    return _leases_in_order(cursor, wanted, params)


def _leases_sqlite(
    dialect: Dialect,
    cursor: Any,
    instance_ids: Sequence[int],
    limit: int,
    params: dict[str, Any],
    cached: dict[int, int] | None,
    kept_apart: Sequence[str],
) -> list[LeaseRow]:
    ids, id_params = in_list("id", instance_ids)
    state, state_params = state_unless_cached(dialect, dialect.t_instances, cached, instance_ids)
    order, order_params = candidate_order_sqlite(dialect, instance_ids)
    apart, apart_params = _apart(dialect, kept_apart)
    cursor.execute(
        render(dialect, CLAIM_LEASES_SQLITE, ids=ids, state=state, order=order, apart=apart),
        {
            **params,
            **id_params,
            **state_params,
            **order_params,
            **apart_params,
            "limit": limit,
        },
    )
    return _leases_in_order(cursor, instance_ids, params)


def _leases_in_order(
    cursor: Any, instance_ids: Sequence[int], params: dict[str, Any]
) -> list[LeaseRow]:
    """The leases the last statement returned, in the candidates' order."""
    found = {
        lease.instance_id: lease
        for lease in (
            lease_from_row(row, params["owner_id"], params["token"]) for row in cursor.fetchall()
        )
    }
    return [found[i] for i in instance_ids if i in found]


def claim_batch(
    dialect: Dialect,
    cursor: Any,
    instance_ids: Sequence[int],
    *,
    limit: int,
    owner_id: str,
    token: str,
    lease_seconds: float,
    cached: dict[int, int] | None = None,
    apart: Sequence[str] = (),
) -> list[tuple[LeaseRow, MessageRow | None]]:
    """MySQL, SQLite, inside the caller's transaction: the leases, then the due heads of
    those no dead activation left a claim on, moved to claimed and counted together."""
    if not instance_ids or limit < 1:
        return []
    params = {"owner_id": owner_id, "token": token, "lease": dialect.interval(lease_seconds)}
    take = _leases_sqlite if dialect.vendor == "sqlite" else _leases_mysql
    leases = take(dialect, cursor, instance_ids, limit, params, cached, apart)
    clean = [lease for lease in leases if not lease.has_stale_claim]
    heads: dict[int, int] = {}
    if clean:
        ids, id_params = in_list("id", [lease.instance_id for lease in clean])
        cursor.execute(render(dialect, DUE_HEADS, ids=ids), id_params)
        heads = {int(row[0]): int(row[1]) for row in cursor.fetchall()}
    messages: dict[int, MessageRow] = {}
    if heads:
        by_instance = {lease.instance_id: lease for lease in clean}
        ids, id_params = in_list("id", heads.values())
        cursor.execute(render(dialect, UNREADY_HEADS, ids=ids), id_params)
        row_params: dict[str, Any] = {"owner_id": owner_id, "token": token}
        for index, (instance_id, message_id) in enumerate(heads.items()):
            row_params.update(
                {
                    f"m_{index}": message_id,
                    f"i_{index}": instance_id,
                    f"g_{index}": by_instance[instance_id].generation,
                }
            )
        rows = each(dialect, CLAIM_ROW, len(heads))
        cursor.execute(render(dialect, INSERT_CLAIMS, rows=rows), row_params)
        cursor.execute(render(dialect, COUNT_ATTEMPTS, ids=ids), id_params)
        cursor.execute(render(dialect, CLAIMED_MESSAGES, ids=ids), id_params)
        messages = {int(row[0]): message_from_row(row[1:]) for row in cursor.fetchall()}
    return [(lease, messages.get(lease.instance_id)) for lease in leases]


def _apart(dialect: Dialect, actor_types: Sequence[str]) -> tuple[str, dict[str, Any]]:
    """The ``{apart}`` condition leaving out actor types that never commit with others
    (:data:`APART`), or nothing."""
    if not actor_types:
        return "", {}
    marks, params = in_list("apart", actor_types)
    return render(dialect, APART, types=marks), params


def _batch_arrays(turns: Sequence[BatchedTurn]) -> dict[str, list[Any]]:
    return {
        "instance_ids": [t.instance_id for t in turns],
        "generations": [t.generation for t in turns],
        "message_ids": [t.message_id for t in turns],
        "states": [t.state for t in turns],
        "state_versions": [t.state_version for t in turns],
        "state_revisions": [t.state_revision for t in turns],
        "results": [t.result for t in turns],
        "rejections": [t.rejection for t in turns],
    }


def commit_batch_postgresql(
    dialect: Dialect, cursor: Any, turns: Sequence[BatchedTurn], *, owner_id: str, token: str
) -> set[int]:
    """ONE autocommit statement: the instances whose fence held (their turns written)."""
    if not turns:
        return set()
    cursor.execute(
        render(dialect, COMMIT_BATCH_POSTGRESQL),
        {"owner_id": owner_id, "token": token, **_batch_arrays(turns)},
    )
    fenced, unclaimed, _done = cursor.fetchone()
    return set(fenced or ()) & set(unclaimed or ())


def _turn_whens(
    dialect: Dialect, name: str, pairs: Sequence[tuple[int, Any]], cast: str = ""
) -> tuple[str, dict[str, Any]]:
    """One :data:`TURN_WHEN` per ``(instance_id, value)``, and their parameters."""
    params: dict[str, Any] = {}
    for index, (instance_id, value) in enumerate(pairs):
        params[f"{name}_id_{index}"] = instance_id
        params[f"{name}_{index}"] = value
    return each(dialect, TURN_WHEN, len(pairs), " ", name=name, cast=cast), params


def _column_by_instance(
    dialect: Dialect, name: str, column: str, pairs: Sequence[tuple[int, Any]], cast: str = ""
) -> tuple[str, dict[str, Any]]:
    """:data:`COLUMN_BY_INSTANCE` for ``pairs`` (``column`` alone when there are none)."""
    if not pairs:
        return column, {}
    whens, params = _turn_whens(dialect, name, pairs, cast)
    return render(dialect, COLUMN_BY_INSTANCE, whens=whens, column=column), params


def _fence_where(
    dialect: Dialect, turns: Sequence[BatchedTurn], owner_id: str, token: str
) -> tuple[str, dict[str, Any]]:
    ids, params = in_list("fence", [t.instance_id for t in turns])
    generations, generation_params = _turn_whens(
        dialect, "gen", [(t.instance_id, t.generation) for t in turns]
    )
    claimed, claimed_params = _turn_whens(
        dialect, "claim", [(t.instance_id, t.message_id) for t in turns]
    )
    where = render(dialect, BATCH_FENCE_WHERE, ids=ids, generations=generations, claimed=claimed)
    return where, {
        **params,
        **generation_params,
        **claimed_params,
        "owner_id": owner_id,
        "token": token,
    }


def commit_batch(
    dialect: Dialect, cursor: Any, turns: Sequence[BatchedTurn], *, owner_id: str, token: str
) -> set[int]:
    """MySQL, SQLite, inside the caller's transaction: the instances whose fence held.

    MySQL locks the fenced rows first (a plain ``UPDATE`` cannot say which rows it
    changed); SQLite, serialised by its database lock, fences and writes with one
    ``UPDATE ... RETURNING``. Then the results and the claimed rows of the fenced turns.
    """
    if not turns:
        return set()
    where, params = _fence_where(dialect, turns, owner_id, token)
    sqlite = dialect.vendor == "sqlite"
    if not sqlite:
        cursor.execute(render(dialect, FENCED_INSTANCES, where=where), params)
        fenced = {int(row[0]) for row in cursor.fetchall()}
        if not fenced:
            return set()
        ids, params = in_list("fenced", sorted(fenced))
        where = render(dialect, FENCED_IDS, ids=ids)
    writing = [t for t in turns if t.state is not None]
    state, state_params = _column_by_instance(
        dialect, "state", "state", [(t.instance_id, t.state) for t in writing], dialect.json_cast
    )
    version, version_params = _column_by_instance(
        dialect, "version", "state_version", [(t.instance_id, t.state_version) for t in writing]
    )
    revision, revision_params = _column_by_instance(
        dialect,
        "revision",
        "state_revision",
        [(t.instance_id, t.state_revision) for t in writing],
    )
    cursor.execute(
        render(
            dialect,
            RELEASE_BATCH,
            state=state,
            state_version=version,
            state_revision=revision,
            where=where,
            returning=RETURNING_RELEASED if sqlite else "",
        ),
        {**params, **state_params, **version_params, **revision_params},
    )
    if sqlite:
        fenced = {int(row[0]) for row in cursor.fetchall()}
        if not fenced:
            return set()
    done = [t for t in turns if t.instance_id in fenced]
    complete(
        dialect,
        cursor,
        [Completion(t.message_id, t.result, t.rejection, claimed=True) for t in done],
    )
    ids, id_params = in_list("unclaim", [t.message_id for t in done])
    cursor.execute(render(dialect, UNCLAIM_BATCH, ids=ids), {**id_params, "token": token})
    if cursor.rowcount != len(done):
        # A fenced instance's claimed row was not ours after all (cannot happen while the
        # fence holds the row lock); the caller's transaction must roll back.
        raise BatchFenceMismatch(f"{cursor.rowcount} claimed rows of {len(done)} fenced turns")
    return fenced


class BatchFenceMismatch(RuntimeError):
    """The claimed rows of a batch did not match its fenced instances: roll back."""
