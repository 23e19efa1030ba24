"""Finding work and leasing an actor, statement by statement.

A worker scans for instances whose head (lowest-sequence ready message) is due, then
leases one candidate: it locks the first free one in the candidates' order (oldest work
first; rows another worker holds are skipped), and sets owner, a fresh token,
``generation + 1`` and the expiry on the database clock. The lease is the fence every
later statement of the activation checks. PostgreSQL and SQLite lease with one
``UPDATE ... RETURNING``; MySQL finds the free candidates with a plain read and locks them
one by one (InnoDB locks every row a sorted locking read examines). PostgreSQL can also
lease and claim the first turn in one statement (``claims.acquire_and_claim_postgresql``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .dialect import Dialect
from .rows import LeaseRow, lease_from_row
from .sql import each, in_list, render
from .work_filter import WorkFilter

#: The head of ``r``'s actor is due (strict order: only a due head makes an actor runnable).
HEAD_IS_DUE = (
    "(SELECT h.available_at FROM {t_ready} h WHERE h.instance_id = r.instance_id "
    "ORDER BY h.sequence LIMIT 1) <= {now}"
)

#: Instances with a due head, oldest work first, among those ``{work}`` takes (a
#: non-locking scan; ``{join}`` joins the instance row ``i`` when ``{work}`` needs it).
DUE_INSTANCES = (
    "SELECT r.instance_id FROM {t_ready} r{join} WHERE r.available_at <= {now} "
    "AND " + HEAD_IS_DUE + "{work} "
    "ORDER BY r.available_at, r.instance_id, r.sequence LIMIT %(limit)s"
)

#: Whether an actor other than ``instance_id`` has a due head.
OTHERS_DUE = (
    "SELECT 1 FROM {t_ready} r{join} WHERE r.instance_id <> %(instance_id)s "
    "AND r.available_at <= {now} AND " + HEAD_IS_DUE + "{work} LIMIT 1"
)

#: The join of the instance row a :class:`WorkFilter` condition reads.
WORK_JOIN = " JOIN {t_instances} i ON i.id = r.instance_id"

#: The ``{work}`` of a scan: the :class:`WorkFilter` condition (``{condition}``).
WORK_CONDITION = " AND {condition}"

#: The ``{state}`` a lease reads: the state column of the instance row ``{alias}`` as text.
STATE_TEXT = "{alias}.state{as_text}"

#: The ``{state}`` a lease reads when this process caches some of the candidates:
#: ``NULL`` where the cached revision is still current (``{whens}``: one
#: :data:`CACHED_REVISION_WHEN` per cached candidate), so a warm actor's state is not sent.
STATE_UNLESS_CACHED = (
    "CASE WHEN {alias}.state_revision = CASE {alias}.id {whens} ELSE -1 END "
    "THEN NULL ELSE {alias}.state{as_text} END"
)

#: The revision this process caches of one candidate (``cached_id_N``).
CACHED_REVISION_WHEN = "WHEN %(cached_id_{n})s THEN %(cached_revision_{n})s"

#: An instance nobody leases (or whose lease expired) and that is not paused.
FREE = "paused_at IS NULL AND (activation_token IS NULL OR activation_expires_at <= {now})"

#: MySQL: which candidates are free (a plain read; the first in order is then locked).
FREE_CANDIDATES = "SELECT id FROM {t_instances} WHERE id IN ({ids}) AND " + FREE

#: MySQL: lock one candidate if it is free (``{lock}``: skip it if another holds it, or wait).
LOCK_CANDIDATE = "SELECT id FROM {t_instances} WHERE id = %(id)s AND " + FREE + "{lock}"

#: MySQL: lock any one of the remaining candidates that is free.
LOCK_ANY_CANDIDATE = (
    "SELECT id FROM {t_instances} WHERE id IN ({ids}) AND " + FREE + " LIMIT 1{lock}"
)

#: The columns a lease is taken on (``instance_id ... generation``, then whether a
#: claimed row is left).
LEASE_SETS = (
    "activation_owner_id = %(owner_id)s, activation_token = %(token)s, "
    "activation_expires_at = {later:lease}, "
    "activation_generation = activation_generation + 1, "
    "activated_at = {now}, last_claimed_at = {now}, updated_at = {now}"
)

#: MySQL: take the lease of the locked instance.
TAKE_LEASE = "UPDATE {t_instances} SET " + LEASE_SETS + " WHERE id = %(id)s"

#: MySQL: take the lease of one candidate if it is free, without a locking read first
#: (for a row this transaction already locks, or one worth waiting for).
TAKE_FREE_LEASE = TAKE_LEASE + " AND " + FREE

#: MySQL: read the lease just taken (``{state}``: the state unless the cached revision is
#: current).
READ_LEASE = (
    "SELECT id, actor_type, actor_id, {state}, state_version, state_revision, "
    "activation_generation, (SELECT COUNT(*) FROM {t_claimed} c WHERE c.instance_id = i.id) "
    "FROM {t_instances} i WHERE id = %(id)s"
)

#: SQLite: lock (the database write lock) and lease the first free candidate in one
#: statement, in the candidates' order (``{order}``: :data:`CANDIDATE_ORDER_SQLITE`, or
#: nothing for a single candidate).
ACQUIRE_LEASE_SQLITE = (
    "UPDATE {t_instances} SET " + LEASE_SETS + " WHERE id = (SELECT id FROM {t_instances} "
    "WHERE id IN ({ids}) AND " + FREE + "{order} LIMIT 1) "
    "RETURNING id, actor_type, actor_id, {state}, state_version, state_revision, "
    "activation_generation, (SELECT COUNT(*) FROM {t_claimed} c "
    "WHERE c.instance_id = {t_instances}.id)"
)

#: SQLite: the candidates' order, oldest work first (``{whens}``: one
#: :data:`CANDIDATE_POSITION_WHEN` per candidate).
CANDIDATE_ORDER_SQLITE = " ORDER BY CASE id {whens} END"

#: The position of one candidate (``order_id_N``) in :data:`CANDIDATE_ORDER_SQLITE`.
CANDIDATE_POSITION_WHEN = "WHEN %(order_id_{n})s THEN %(order_position_{n})s"

#: PostgreSQL: the first free candidate in the given order (not the lowest id), locked
#: (``{lock}``: :data:`LOCK_CANDIDATE_POSTGRESQL` or :data:`SKIP_LOCKED_CANDIDATE_POSTGRESQL`).
#: The candidates drive the plan: one primary-key probe each, in their order (``WITH
#: ORDINALITY`` comes out sorted, so there is no sort), and the probes stop at the first
#: free row LockRows gets. Written as ``id = ANY(ids)`` the planner may scan the whole table
#: instead, evaluating the array on every row (a plan it picks while the table's statistics
#: still describe it as empty, as after a deploy or a ``TRUNCATE``, and keeps in the
#: connection's prepared statement).
FIRST_FREE_CANDIDATE_POSTGRESQL = (
    "SELECT f.id FROM unnest(%(ids)s::bigint[]) WITH ORDINALITY AS u(id, position) "
    "JOIN {t_instances} f ON f.id = u.id WHERE " + FREE + " ORDER BY u.position LIMIT 1 {lock}"
)

#: The lock of :data:`FIRST_FREE_CANDIDATE_POSTGRESQL` that waits for a locked candidate.
LOCK_CANDIDATE_POSTGRESQL = "FOR UPDATE OF f"

#: The lock of :data:`FIRST_FREE_CANDIDATE_POSTGRESQL` that skips locked candidates.
SKIP_LOCKED_CANDIDATE_POSTGRESQL = "FOR UPDATE OF f SKIP LOCKED"

#: PostgreSQL: lease the first free candidate in one statement.
ACQUIRE_LEASE_POSTGRESQL = (
    "UPDATE {t_instances} AS i SET " + LEASE_SETS + " "
    "WHERE i.id = (" + FIRST_FREE_CANDIDATE_POSTGRESQL + ") "
    "RETURNING i.id, i.actor_type, i.actor_id, {state}, i.state_version, i.state_revision, "
    "i.activation_generation, EXISTS (SELECT 1 FROM {t_claimed} c WHERE c.instance_id = i.id)"
)

#: Lock the instance row while ``lease`` is still ours and unexpired.
HOLD_LEASE = (
    "SELECT id FROM {t_instances} WHERE id = %(instance_id)s "
    "AND activation_owner_id = %(owner_id)s AND activation_token = %(token)s "
    "AND activation_generation = %(generation)s AND activation_expires_at > {now}{for_update}"
)

#: Push the expiry of a live lease out.
RENEW = (
    "UPDATE {t_instances} SET activation_expires_at = {later:lease} "
    "WHERE id = %(instance_id)s AND activation_token = %(token)s "
    "AND activation_generation = %(generation)s AND activation_expires_at > {now}"
)

#: Give a lease up.
RELEASE = (
    "UPDATE {t_instances} SET activation_owner_id = NULL, activation_token = NULL, "
    "activation_expires_at = NULL, updated_at = {now} WHERE id = %(instance_id)s "
    "AND activation_token = %(token)s AND activation_generation = %(generation)s"
)

#: Whether an actor has a due ready message.
HAS_DUE = (
    "SELECT 1 FROM {t_ready} WHERE instance_id = %(instance_id)s AND available_at <= {now} LIMIT 1"
)

#: The stored state of an instance.
LOAD_STATE = "SELECT state FROM {t_instances} WHERE id = %(instance_id)s"


def _work(dialect: Dialect, work: WorkFilter | None) -> tuple[dict[str, str], dict[str, Any]]:
    """The ``{join}`` and ``{work}`` fragments of a scan, and their parameters."""
    if not work:
        return {"join": "", "work": ""}, {}
    condition, params = work.condition("i")
    fragments = {
        "join": render(dialect, WORK_JOIN),
        "work": render(dialect, WORK_CONDITION, condition=condition),
    }
    return fragments, params


def due_instances(
    dialect: Dialect, cursor: Any, limit: int, work: WorkFilter | None = None
) -> dict[int, int]:
    """Turns run strictly in order, so an actor can run only when its head is due. Due
    messages behind a head that is not (a retry backing off, a message scheduled for
    later) are left out: otherwise actors waiting for a retry would fill the candidate
    window on every poll, cost a lease and a release each time, and starve actors that do
    have work. The head is one probe of the ``(instance_id, sequence)`` index.

    Returns each instance with the number of its due messages the window saw, oldest work
    first: an actor seen once is likely cold (one message), one seen often is hot."""
    fragments, params = _work(dialect, work)
    cursor.execute(render(dialect, DUE_INSTANCES, **fragments), {**params, "limit": limit})
    seen: dict[int, int] = {}
    for (instance_id,) in cursor.fetchall():
        seen[int(instance_id)] = seen.get(int(instance_id), 0) + 1
    return seen


def others_due(
    dialect: Dialect, cursor: Any, instance_id: int, work: WorkFilter | None = None
) -> bool:
    fragments, params = _work(dialect, work)
    cursor.execute(render(dialect, OTHERS_DUE, **fragments), {**params, "instance_id": instance_id})
    return cursor.fetchone() is not None


def state_unless_cached(
    dialect: Dialect, alias: str, cached: dict[int, int] | None, instance_ids: Sequence[int]
) -> tuple[str, dict[str, Any]]:
    """The ``{state}`` fragment: the state column as text, ``NULL`` where the revision
    this process caches is still current (so a warm actor's state is not transferred)."""
    pairs = [(i, cached[i]) for i in instance_ids if cached and i in cached]
    if not pairs:
        return render(dialect, STATE_TEXT, alias=alias), {}
    params: dict[str, Any] = {}
    for index, (instance_id, revision) in enumerate(pairs):
        params[f"cached_id_{index}"] = instance_id
        params[f"cached_revision_{index}"] = revision
    whens = each(dialect, CACHED_REVISION_WHEN, len(pairs), " ")
    return render(dialect, STATE_UNLESS_CACHED, alias=alias, whens=whens), params


def _lease_params(
    dialect: Dialect, owner_id: str, token: str, lease_seconds: float
) -> dict[str, Any]:
    return {"owner_id": owner_id, "token": token, "lease": dialect.interval(lease_seconds)}


def acquire_lease_mysql(
    dialect: Dialect,
    cursor: Any,
    instance_ids: Sequence[int],
    *,
    owner_id: str,
    token: str,
    lease_seconds: float,
    cached: dict[int, int] | None = None,
    wait: bool = False,
) -> LeaseRow | None:
    """Candidates come oldest work first; the lease must go to the first free one, or the
    lowest instance id would win every time and a hot actor would starve the others
    despite yielding. InnoDB locks every row a sorted locking read examines, so find the
    free ones with a plain read, then lock the first in order."""
    if not instance_ids:
        return None
    if wait and len(instance_ids) == 1:
        # One conditional UPDATE: Django's MySQL connections count matched rows, so the
        # row count says whether the candidate was free.
        instance_id = int(instance_ids[0])
        cursor.execute(
            render(dialect, TAKE_FREE_LEASE),
            {**_lease_params(dialect, owner_id, token, lease_seconds), "id": instance_id},
        )
        if cursor.rowcount != 1:
            return None
        return _read_lease(dialect, cursor, instance_id, owner_id, token, cached)
    lock = dialect.for_update if wait else dialect.skip_locked
    candidates = list(instance_ids)
    if len(candidates) > 1:
        ids, params = in_list("id", candidates)
        cursor.execute(render(dialect, FREE_CANDIDATES, ids=ids), params)
        found = {int(row[0]) for row in cursor.fetchall()}
        candidates = [i for i in candidates if i in found]
    row = None
    for candidate in candidates[:4]:  # another worker may lock the first meanwhile
        cursor.execute(render(dialect, LOCK_CANDIDATE, lock=lock), {"id": candidate})
        row = cursor.fetchone()
        if row is not None:
            break
    if row is None and len(candidates) > 4:
        ids, params = in_list("id", candidates[4:])
        cursor.execute(render(dialect, LOCK_ANY_CANDIDATE, ids=ids, lock=lock), params)
        row = cursor.fetchone()
    if row is None:
        return None
    instance_id = int(row[0])
    cursor.execute(
        render(dialect, TAKE_LEASE),
        {**_lease_params(dialect, owner_id, token, lease_seconds), "id": instance_id},
    )
    return _read_lease(dialect, cursor, instance_id, owner_id, token, cached)


def _read_lease(
    dialect: Dialect,
    cursor: Any,
    instance_id: int,
    owner_id: str,
    token: str,
    cached: dict[int, int] | None,
) -> LeaseRow:
    """MySQL: the lease just taken, as :data:`READ_LEASE` reads it."""
    state, state_params = state_unless_cached(dialect, "i", cached, [instance_id])
    cursor.execute(render(dialect, READ_LEASE, state=state), {**state_params, "id": instance_id})
    return lease_from_row(cursor.fetchone(), owner_id, token)


def candidate_order_sqlite(
    dialect: Dialect, instance_ids: Sequence[int]
) -> tuple[str, dict[str, Any]]:
    """:data:`CANDIDATE_ORDER_SQLITE` keeping the candidates' order (oldest work first), or
    nothing."""
    if len(instance_ids) < 2:
        return "", {}
    params: dict[str, Any] = {}
    for position, instance_id in enumerate(instance_ids):
        params[f"order_id_{position}"] = instance_id
        params[f"order_position_{position}"] = position
    whens = each(dialect, CANDIDATE_POSITION_WHEN, len(instance_ids), " ")
    return render(dialect, CANDIDATE_ORDER_SQLITE, whens=whens), params


def acquire_lease_sqlite(
    dialect: Dialect,
    cursor: Any,
    instance_ids: Sequence[int],
    *,
    owner_id: str,
    token: str,
    lease_seconds: float,
    cached: dict[int, int] | None = None,
    wait: bool = False,
) -> LeaseRow | None:
    """One ``UPDATE ... RETURNING``: writers are serialised by the database lock, so the
    first free candidate in order is leased without row locks."""
    if not instance_ids:
        return None
    ids, params = in_list("id", instance_ids)
    state, state_params = state_unless_cached(dialect, dialect.t_instances, cached, instance_ids)
    order, order_params = candidate_order_sqlite(dialect, instance_ids)
    cursor.execute(
        render(dialect, ACQUIRE_LEASE_SQLITE, ids=ids, state=state, order=order),
        {
            **_lease_params(dialect, owner_id, token, lease_seconds),
            **params,
            **state_params,
            **order_params,
        },
    )
    row = cursor.fetchone()
    return None if row is None else lease_from_row(row, owner_id, token)


def acquire_lease_postgresql(
    dialect: Dialect,
    cursor: Any,
    instance_ids: Sequence[int],
    *,
    owner_id: str,
    token: str,
    lease_seconds: float,
    cached: dict[int, int] | None = None,
    wait: bool = False,
) -> LeaseRow | None:
    """One ``UPDATE ... RETURNING`` of the first free candidate in order."""
    if not instance_ids:
        return None
    state, state_params = state_unless_cached(dialect, "i", cached, instance_ids)
    lock = LOCK_CANDIDATE_POSTGRESQL if wait else SKIP_LOCKED_CANDIDATE_POSTGRESQL
    cursor.execute(
        render(dialect, ACQUIRE_LEASE_POSTGRESQL, state=state, lock=lock),
        {
            **_lease_params(dialect, owner_id, token, lease_seconds),
            "ids": list(instance_ids),
            **state_params,
        },
    )
    row = cursor.fetchone()
    return None if row is None else lease_from_row(row, owner_id, token)


def fence_params(lease: LeaseRow) -> dict[str, Any]:
    """The parameters naming a lease: ``instance_id``, ``owner_id``, ``token``,
    ``generation``."""
    return {
        "instance_id": lease.instance_id,
        "owner_id": lease.owner_id,
        "token": lease.token,
        "generation": lease.generation,
    }


def hold_lease(dialect: Dialect, cursor: Any, lease: LeaseRow) -> bool:
    cursor.execute(render(dialect, HOLD_LEASE), fence_params(lease))
    return cursor.fetchone() is not None


def renew(dialect: Dialect, cursor: Any, lease: LeaseRow, lease_seconds: float) -> bool:
    cursor.execute(
        render(dialect, RENEW),
        {**fence_params(lease), "lease": dialect.interval(lease_seconds)},
    )
    return bool(cursor.rowcount == 1)


def release(dialect: Dialect, cursor: Any, lease: LeaseRow) -> bool:
    cursor.execute(render(dialect, RELEASE), fence_params(lease))
    return bool(cursor.rowcount == 1)


def has_due(dialect: Dialect, cursor: Any, instance_id: int) -> bool:
    cursor.execute(render(dialect, HAS_DUE), {"instance_id": instance_id})
    return cursor.fetchone() is not None


def load_state(dialect: Dialect, cursor: Any, instance_id: int) -> Any:
    cursor.execute(render(dialect, LOAD_STATE), {"instance_id": instance_id})
    return cursor.fetchone()[0]
