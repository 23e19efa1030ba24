"""The fenced commit, statement by statement, and the rows a turn staged that it writes.

The *fence* is one ``UPDATE`` of the instance row that checks owner, token, generation and
the unexpired lease (on the database clock) while taking the row lock, and writes the state
and the lease's new expiry (or releases it). The claimed row must still be ours. Then the
group's results and rejections are written, the last failure recorded (retry after a
backoff, or dead letter), and what the turns staged inserted. On PostgreSQL a group that
staged nothing commits in ONE autocommit statement (:func:`commit_group_postgresql`): every
part joins the fence ``f``, so if it fails nothing at all is written.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any

from .claims import (
    COUNT_MOVED_ATTEMPT_POSTGRESQL,
    MOVE_HEAD_CTE_POSTGRESQL,
    head_and_ahead,
    unclaim_to_ready,
)
from .dialect import Dialect
from .leases import fence_params
from .notify import CHANNEL
from .rows import Completion, JoinedWrite, LeaseRow, MessageRow, StagedEffectRow, message_from_row
from .sql import each, in_list, render

# -- the fence ----------------------------------------------------------------------------

#: Check the lease and write what the group changed (``{sets}``: :data:`FENCE_SETS`).
FENCE = (
    "UPDATE {t_instances} SET {sets} WHERE id = %(instance_id)s "
    "AND activation_owner_id = %(owner_id)s AND activation_token = %(token)s "
    "AND activation_generation = %(generation)s AND activation_expires_at > {now}"
)

#: What the fence writes: the use times, the state (:data:`STATE_SETS`, or nothing) and the
#: lease (:data:`RENEW_SETS`, :data:`RELEASE_SETS`, PostgreSQL's :data:`KEEP_SETS_POSTGRESQL`).
FENCE_SETS = "last_used_at = {now}, updated_at = {now}{state_sets}{lease_sets}"

#: The state a group left.
STATE_SETS = (
    ", state = %(state)s{json_cast}, state_version = %(state_version)s, "
    "state_revision = %(state_revision)s"
)

#: The lease kept: its expiry pushed out.
RENEW_SETS = ", activation_expires_at = {later:lease}"

#: The lease released.
RELEASE_SETS = ", activation_owner_id = NULL, activation_token = NULL, activation_expires_at = NULL"

#: MySQL, SQLite: the claimed row, deleted only while it is the lease's.
UNCLAIM_FENCED = (
    "DELETE FROM {t_claimed} WHERE instance_id = %(instance_id)s "
    "AND message_id = %(claimed_message_id)s AND activation_token = %(token)s"
)

#: PostgreSQL: the fence alone (a group whose claimed turn failed).
FENCE_POSTGRESQL = "WITH f AS (" + FENCE + " RETURNING id) SELECT COUNT(*), 1 FROM f"

#: PostgreSQL: the fence and the claimed row's deletion in one statement.
FENCE_AND_UNCLAIM_POSTGRESQL = (
    "WITH f AS (" + FENCE + " RETURNING id), u AS (DELETE FROM {t_claimed} c USING f "
    "WHERE c.instance_id = f.id AND c.message_id = %(claimed_message_id)s "
    "AND c.activation_token = %(token)s RETURNING c.message_id) "
    "SELECT (SELECT COUNT(*) FROM f), (SELECT COUNT(*) FROM u)"
)

# -- results, failures, dead letters --------------------------------------------------------

#: The results, rejections and attempts of a group's finished turns (``{result}``,
#: ``{rejection}``: :data:`JSON_BY_MESSAGE`, ``{rejected_at}``: :data:`REJECTED_AT`,
#: ``{attempts}``: :data:`ATTEMPT_COUNTED`, each or the column itself;
#: ``{started_at}``, ``{completed_at}``: :data:`STARTED_AT` and :data:`COMPLETED_AT`, or
#: with the next claim :data:`STARTED_AT_OR_CLAIMED` and :data:`COMPLETED_AT_OR_CLAIMED`).
COMPLETE = (
    "UPDATE {t_messages} SET result = {result}, rejection = {rejection}, "
    "rejected_at = {rejected_at}, attempt_count = {attempts}, "
    "started_at = {started_at}, completed_at = {completed_at}, updated_at = {now} "
    "WHERE id IN ({ids})"
)

#: A JSON column written per message (``{whens}``: :data:`JSON_WHEN` per message), the
#: others keep ``{column}``.
JSON_BY_MESSAGE = "CASE {key} {whens} ELSE {column} END"

#: The value of one message (``{column}_id_N``) in :data:`JSON_BY_MESSAGE`: ``{column}_N``.
JSON_WHEN = "WHEN %({column}_id_{n})s THEN %({column}_{n})s{json_cast}"

#: The rejected messages stamped (``{ids}``: the ``rejection_id_N`` of :data:`JSON_WHEN`).
REJECTED_AT = "CASE WHEN {key} IN ({ids}) THEN {now} ELSE rejected_at END"

#: One rejected message of :data:`REJECTED_AT`.
REJECTION_ID = "%(rejection_id_{n})s"

#: The attempts of the turns run without a claim of their own counted (``{ids}``).
ATTEMPT_COUNTED = "CASE WHEN {key} IN ({ids}) THEN attempt_count + 1 ELSE attempt_count END"

#: A finished turn's start (kept when its claim stamped it).
STARTED_AT = "COALESCE(started_at, {now})"

#: A finished turn's completion.
COMPLETED_AT = "{now}"

#: :data:`STARTED_AT`, and the message claimed next (``next_id``) starts now.
STARTED_AT_OR_CLAIMED = (
    "CASE WHEN {key} = %(next_id)s THEN {now} ELSE COALESCE(started_at, {now}) END"
)

#: :data:`COMPLETED_AT`, except for the message claimed next (``next_id``).
COMPLETED_AT_OR_CLAIMED = "CASE WHEN {key} = %(next_id)s THEN completed_at ELSE {now} END"

#: MySQL/MariaDB: :data:`COMPLETE` and :data:`MOVE_CLAIM` in one multiple-table ``UPDATE``
#: (the message columns are the history row's, ``{key}`` is ``m.id``); nothing is written
#: unless the lease's claimed row is there to move.
COMPLETE_AND_MOVE_CLAIM_MYSQL = (
    "UPDATE {t_messages} m JOIN {t_claimed} c ON c.instance_id = %(instance_id)s "
    "AND c.message_id = %(claimed_message_id)s AND c.activation_token = %(token)s "
    "SET m.result = {result}, m.rejection = {rejection}, m.rejected_at = {rejected_at}, "
    "m.attempt_count = {attempts}, m.started_at = {started_at}, "
    "m.completed_at = {completed_at}, m.updated_at = {now}, "
    "c.message_id = %(next_id)s, c.claimed_at = {now} "
    "WHERE m.id IN ({ids})"
)

#: MySQL, SQLite: the lease's claimed row moved in place to the next turn.
MOVE_CLAIM = (
    "UPDATE {t_claimed} SET message_id = %(next_id)s, claimed_at = {now} "
    "WHERE instance_id = %(instance_id)s AND message_id = %(claimed_message_id)s "
    "AND activation_token = %(token)s"
)

#: The ready rows of the group's followers (turns run without their own claim).
UNREADY_FOLLOWERS = "DELETE FROM {t_ready} WHERE message_id IN ({ids})"

#: A failed attempt's error (``{attempts}``: :data:`ATTEMPT_OF_FOLLOWER` counted here for a
#: follower, :data:`ATTEMPT_OF_CLAIM` as its claim counted it otherwise).
STORE_ERROR = (
    "UPDATE {t_messages} SET error = %(error)s{json_cast}, attempt_count = {attempts}, "
    "last_failed_at = {now}, started_at = COALESCE(started_at, {now}), updated_at = {now} "
    "WHERE id = %(message_id)s"
)

#: The attempts of a claimed turn: its claim counted this one.
ATTEMPT_OF_CLAIM = "attempt_count"

#: The attempts of a follower (run without a claim of its own): this one counted now.
ATTEMPT_OF_FOLLOWER = "attempt_count + 1"

#: A follower's retry: its ready row due after the backoff.
DELAY_READY = "UPDATE {t_ready} SET available_at = {later:delay} WHERE message_id = %(message_id)s"

#: The dead letter of a message, copied from its history row.
INSERT_DEAD_LETTER = (
    "INSERT INTO {t_dead} (message_id, instance_id, actor_type, actor_id, operation, "
    "arguments, attempts, exception_class, exception_message, backtrace, first_failed_at, "
    "last_failed_at, created_at, updated_at) SELECT id, instance_id, actor_type, actor_id, "
    "operation, arguments, CASE WHEN attempt_count < 1 THEN 1 ELSE attempt_count END, "
    "%(exception_class)s, %(exception_message)s, %(backtrace)s{json_cast}, "
    "COALESCE(started_at, {now}), {now}, {now}, {now} FROM {t_messages} "
    "WHERE id = %(message_id)s"
)

#: PostgreSQL: the id of the dead letter just inserted.
DEAD_LETTER_ID_POSTGRESQL = "SELECT id FROM {t_dead} WHERE message_id = %(message_id)s"

#: The dead message leaves the mailbox: its claimed row (a claimed turn)...
DELETE_CLAIMED_MESSAGE = "DELETE FROM {t_claimed} WHERE message_id = %(message_id)s"

#: ... or its ready row (a follower of a group, run without a claim of its own).
DELETE_READY_MESSAGE = "DELETE FROM {t_ready} WHERE message_id = %(message_id)s"

#: Fairness: the actor's ready head goes to the back of the poll order.
YIELD_HEAD = (
    "UPDATE {t_ready} SET available_at = {now} WHERE instance_id = %(instance_id)s "
    "AND available_at < {now}"
)

# -- PostgreSQL: the whole group in one statement -------------------------------------------

#: Keep the lease only if a due message follows the group (the condition the claim of the
#: next turn uses); otherwise the statement releases it.
KEEP_CONDITION_POSTGRESQL = (
    "EXISTS (SELECT 1 FROM (SELECT k.available_at FROM {t_ready} k "
    "WHERE k.instance_id = %(instance_id)s AND k.message_id <> ALL(%(followers)s) "
    "ORDER BY k.sequence LIMIT 1) AS kk WHERE kk.available_at <= {now})"
)

#: The lease kept (and renewed) or released by that condition.
KEEP_SETS_POSTGRESQL = (
    ", activation_owner_id = CASE WHEN "
    + KEEP_CONDITION_POSTGRESQL
    + " THEN activation_owner_id END, activation_token = CASE WHEN "
    + KEEP_CONDITION_POSTGRESQL
    + " THEN activation_token END, "
    "activation_expires_at = CASE WHEN " + KEEP_CONDITION_POSTGRESQL + " THEN {later:lease} END"
)

#: The fence of a group (``f``): the lease, and the claimed row still the lease's.
GROUP_FENCE_CTE_POSTGRESQL = (
    "f AS (" + FENCE + " AND EXISTS (SELECT 1 FROM {t_claimed} "
    "WHERE instance_id = %(instance_id)s AND message_id = %(claimed_message_id)s "
    "AND activation_token = %(token)s) RETURNING id)"
)

#: The finished turns (``d``), from the arrays of :func:`_completion_rows` (one text
#: whatever the group's size, so the driver parses it once and the server plans it once).
GROUP_DONE_CTE_POSTGRESQL = (
    "d AS (UPDATE {t_messages} m SET result = v.result::jsonb, "
    "rejection = v.rejection::jsonb, "
    "rejected_at = CASE WHEN v.rejection IS NULL THEN m.rejected_at ELSE {now} END, "
    "attempt_count = m.attempt_count + v.bump, started_at = COALESCE(m.started_at, {now}), "
    "completed_at = {now}, updated_at = {now} "
    "FROM unnest(%(done_ids)s::bigint[], %(done_results)s::text[], "
    "%(done_rejections)s::text[], %(done_bumps)s::int[]) AS v(id, result, rejection, bump), f "
    "WHERE m.id = v.id "
    "RETURNING m.id)"
)

#: The followers' ready rows (``r``).
GROUP_UNREADY_CTE_POSTGRESQL = (
    "r AS (DELETE FROM {t_ready} r USING f WHERE r.message_id = ANY(%(followers)s) "
    "RETURNING r.message_id)"
)

#: The parts every group commit has, then ``{joined}`` (another app's joined write, or
#: nothing).
GROUP_PARTS_POSTGRESQL = (
    "WITH "
    + GROUP_FENCE_CTE_POSTGRESQL
    + ", "
    + GROUP_DONE_CTE_POSTGRESQL
    + ", "
    + GROUP_UNREADY_CTE_POSTGRESQL
    + "{joined}"
)

#: Due work left after the group (the statement's snapshot still shows the followers'
#: ready rows: they are excluded by id).
DUE_LEFT_POSTGRESQL = (
    "FROM {t_ready} k, f WHERE k.instance_id = f.id AND k.message_id <> ALL(%(followers)s) "
    "AND k.available_at <= {now} LIMIT 1"
)

#: Whether due work is left (``{left}`` of :data:`COMMIT_GROUP_POSTGRESQL`).
DUE_LEFT_UNHINTED_POSTGRESQL = "EXISTS (SELECT 1 " + DUE_LEFT_POSTGRESQL + ")"

#: Hint workers and waiting callers if due work is left (``NOTIFY`` on commit); FALSE.
DUE_LEFT_HINTED_POSTGRESQL = (
    "(SELECT COUNT(*) FROM (SELECT pg_notify(%(channel)s, 'work'), "
    "pg_notify(%(channel)s, %(result_hint)s) " + DUE_LEFT_POSTGRESQL + ") AS hint) < 0"
)

#: The ``result`` hint of a group that finished other callers' sync calls, sent by the
#: commit itself (delivered only if the fence held and the statement committed); its
#: payload ``waited_hint`` may carry their results. NULL: nobody waits, nothing is sent.
WAITED_HINT_POSTGRESQL = (
    "(SELECT COUNT(*) FROM (SELECT pg_notify(%(channel)s, %(waited_hint)s::text) FROM f "
    "WHERE %(waited_hint)s::text IS NOT NULL) AS w)"
)

#: The group's commit that releases the lease: the claimed row deleted; ``{left}`` says
#: whether due work is left without a hint sent.
COMMIT_GROUP_POSTGRESQL = (
    GROUP_PARTS_POSTGRESQL + ", u AS (DELETE FROM {t_claimed} c USING f "
    "WHERE c.instance_id = f.id AND c.message_id = %(claimed_message_id)s "
    "RETURNING c.message_id) SELECT (SELECT COUNT(*) FROM f), (SELECT COUNT(*) FROM u), "
    "(SELECT COUNT(*) FROM d), (SELECT COUNT(*) FROM r), {left}, {joined_column}, "
    + WAITED_HINT_POSTGRESQL
)

#: The group's commit that claims the next turn: the claim of ``claims.py`` behind the
#: fence, the claimed row moved in place to the next message (``cu``; updating it keeps
#: the one-claim-per-actor unique index out of the way) or deleted when none is due (``cd``).
#: The head is found by the instance id itself, not through ``f``: a prepared statement's
#: plan then walks the (instance, sequence) index to the first row instead of sorting the
#: whole mailbox.
COMMIT_GROUP_AND_CLAIM_POSTGRESQL = (
    GROUP_PARTS_POSTGRESQL + ", "
    "head AS (SELECT h.id, h.message_id, h.available_at FROM {t_ready} h "
    "WHERE h.instance_id = %(instance_id)s AND EXISTS (SELECT 1 FROM f) "
    "AND h.message_id <> ALL(%(followers)s) "
    "ORDER BY h.sequence LIMIT 1), " + MOVE_HEAD_CTE_POSTGRESQL + ", "
    "cu AS (UPDATE {t_claimed} c SET message_id = moved.message_id, claimed_at = {now} "
    "FROM moved, f WHERE c.instance_id = f.id AND c.message_id = %(claimed_message_id)s "
    "RETURNING c.message_id), "
    "cd AS (DELETE FROM {t_claimed} c USING f WHERE c.instance_id = f.id "
    "AND c.message_id = %(claimed_message_id)s AND NOT EXISTS (SELECT 1 FROM moved) "
    "RETURNING c.message_id), "
    "nxt AS (" + COUNT_MOVED_ATTEMPT_POSTGRESQL + ") "
    "SELECT (SELECT COUNT(*) FROM f), (SELECT COUNT(*) FROM cu) + (SELECT COUNT(*) FROM cd), "
    "(SELECT COUNT(*) FROM d), (SELECT COUNT(*) FROM r), {joined_column}, "
    + WAITED_HINT_POSTGRESQL
    + ", nxt.* FROM (SELECT 1) AS one LEFT JOIN nxt ON TRUE"
)

#: The positions another app's joined write (``j``) returned.
JOINED_POSITIONS_POSTGRESQL = "ARRAY(SELECT position FROM j)"

#: Another app's joined write as the part ``j`` of a group commit (``{joined}`` of
#: :data:`GROUP_PARTS_POSTGRESQL`; ``{statement}``: its ``INSERT``, already rendered).
JOINED_CTE_POSTGRESQL = ", j AS ({statement})"

#: What the group commit returns where nothing was joined (``{joined_column}``).
NOTHING_JOINED = "NULL"

#: Due work left is not looked for (``{left}`` of :data:`COMMIT_GROUP_POSTGRESQL`).
NO_DUE_LEFT_POSTGRESQL = "FALSE"

# -- what a turn staged ---------------------------------------------------------------------

#: One ``pending`` effect per staged effect (``{rows}``: :data:`EFFECT_ROW` per effect).
INSERT_EFFECTS = (
    "INSERT INTO {t_effects} (message_id, instance_id, effect_id, name, arguments, "
    "success_operation, failure_operation, status, attempt_count, max_attempts, "
    "available_at, created_at, updated_at) VALUES {rows}"
)

#: One staged effect of :data:`INSERT_EFFECTS` (its parameters ``effect_id_N``, ``name_N``,
#: ``arguments_N``, ``success_N``, ``failure_N``, ``max_attempts_N``).
EFFECT_ROW = (
    "(%(message_id)s, %(instance_id)s, %(effect_id_{n})s, %(name_{n})s, "
    "%(arguments_{n})s{json_cast}, %(success_{n})s, %(failure_{n})s, 'pending', 0, "
    "%(max_attempts_{n})s, {now}, {now}, {now})"
)

#: A named reminder cancelled.
CANCEL_REMINDER = (
    "DELETE FROM {t_reminders} WHERE instance_id = %(instance_id)s AND name = %(name)s"
)

#: A named reminder moved (``{next_run_at}``: :data:`RUN_AT` or :data:`RUN_AFTER_DELAY`).
MOVE_REMINDER = (
    "UPDATE {t_reminders} SET operation = %(operation)s, arguments = %(arguments)s{json_cast}, "
    "next_run_at = {next_run_at}, interval_seconds = %(interval)s, cron = %(cron)s, "
    "time_zone = %(time_zone)s, missed_policy = %(missed_policy)s, status = 'scheduled', "
    "claimed_by = NULL, claimed_at = NULL, updated_at = {now} WHERE instance_id = %(instance_id)s "
    "AND name = %(name)s"
)

#: A named reminder created (when :data:`MOVE_REMINDER` found none).
INSERT_REMINDER = (
    "INSERT INTO {t_reminders} (instance_id, actor_type, actor_id, name, operation, "
    "arguments, next_run_at, interval_seconds, cron, time_zone, occurrence, missed_policy, "
    "status, created_at, updated_at) VALUES (%(instance_id)s, %(actor_type)s, %(actor_id)s, "
    "%(name)s, %(operation)s, %(arguments)s{json_cast}, {next_run_at}, %(interval)s, "
    "%(cron)s, %(time_zone)s, 0, %(missed_policy)s, 'scheduled', {now}, {now})"
)

#: A reminder's next run at the time given (``at``).
RUN_AT = "%(at)s"

#: A reminder's next run ``delay`` from now, on the database clock.
RUN_AFTER_DELAY = "{later:delay}"

#: One ``pending`` broadcast per observable a turn changed (``{rows}``: :data:`BROADCAST_ROW`
#: per observable).
INSERT_BROADCASTS = (
    "INSERT INTO {t_broadcasts} (message_id, instance_id, broadcast_id, observable_name, "
    "value, state_version, activation_generation, status, attempt_count, available_at, "
    "created_at, updated_at) VALUES {rows}"
)

#: One broadcast of :data:`INSERT_BROADCASTS` (``broadcast_id_N``, ``observable_N``,
#: ``value_N``).
BROADCAST_ROW = (
    "(%(message_id)s, %(instance_id)s, %(broadcast_id_{n})s, %(observable_{n})s, "
    "%(value_{n})s{json_cast}, %(state_version)s, %(generation)s, 'pending', 0, "
    "{now}, {now}, {now})"
)


def _sets(
    dialect: Dialect,
    *,
    state: str | None,
    state_version: int,
    state_revision: int,
    lease_sets: str,
    lease_seconds: float,
) -> tuple[str, dict[str, Any]]:
    """The ``{sets}`` fragment of the fence and its parameters."""
    params: dict[str, Any] = {"lease": dialect.interval(lease_seconds)}
    state_sets = ""
    if state is not None:
        state_sets = render(dialect, STATE_SETS)
        params.update(state=state, state_version=state_version, state_revision=state_revision)
    sets = render(
        dialect, FENCE_SETS, state_sets=state_sets, lease_sets=render(dialect, lease_sets)
    )
    return sets, params


def _fence_parts(
    dialect: Dialect,
    lease: LeaseRow,
    *,
    claimed_message_id: int | None,
    state: str | None,
    state_version: int,
    state_revision: int,
    release: bool,
    lease_seconds: float,
) -> tuple[str, dict[str, Any]]:
    """The SET list and the parameters of a fence (both vendors' variants)."""
    sets, params = _sets(
        dialect,
        state=state,
        state_version=state_version,
        state_revision=state_revision,
        lease_sets=RELEASE_SETS if release else RENEW_SETS,
        lease_seconds=lease_seconds,
    )
    params.update(fence_params(lease), claimed_message_id=claimed_message_id)
    return sets, params


def _fence_update(
    dialect: Dialect,
    cursor: Any,
    lease: LeaseRow,
    *,
    claimed_message_id: int | None,
    state: str | None,
    state_version: int,
    state_revision: int,
    release: bool,
    lease_seconds: float,
) -> dict[str, Any] | None:
    """MySQL, SQLite: the fence's ``UPDATE`` (it takes the instance row lock); its
    parameters if it matched, ``None`` if the lease is not ours."""
    sets, params = _fence_parts(
        dialect,
        lease,
        claimed_message_id=claimed_message_id,
        state=state,
        state_version=state_version,
        state_revision=state_revision,
        release=release,
        lease_seconds=lease_seconds,
    )
    cursor.execute(render(dialect, FENCE, sets=sets), params)
    return params if cursor.rowcount == 1 else None


def fence(
    dialect: Dialect,
    cursor: Any,
    lease: LeaseRow,
    *,
    claimed_message_id: int | None,
    state: str | None,
    state_version: int,
    state_revision: int,
    release: bool,
    lease_seconds: float,
) -> bool:
    """MySQL, SQLite: the fence, then the claimed row's deletion."""
    params = _fence_update(
        dialect,
        cursor,
        lease,
        claimed_message_id=claimed_message_id,
        state=state,
        state_version=state_version,
        state_revision=state_revision,
        release=release,
        lease_seconds=lease_seconds,
    )
    if params is None:
        return False
    if claimed_message_id is None:
        return True
    cursor.execute(render(dialect, UNCLAIM_FENCED), params)
    return bool(cursor.rowcount == 1)


def fence_postgresql(
    dialect: Dialect,
    cursor: Any,
    lease: LeaseRow,
    *,
    claimed_message_id: int | None,
    state: str | None,
    state_version: int,
    state_revision: int,
    release: bool,
    lease_seconds: float,
) -> bool:
    """The fence and the claimed row's deletion in one statement."""
    sets, params = _fence_parts(
        dialect,
        lease,
        claimed_message_id=claimed_message_id,
        state=state,
        state_version=state_version,
        state_revision=state_revision,
        release=release,
        lease_seconds=lease_seconds,
    )
    template = FENCE_POSTGRESQL if claimed_message_id is None else FENCE_AND_UNCLAIM_POSTGRESQL
    cursor.execute(render(dialect, template, sets=sets), params)
    fenced, unclaimed = cursor.fetchone()
    return bool(fenced == 1 and unclaimed == 1)


def _json_by_message(
    dialect: Dialect, column: str, pairs: Sequence[tuple[int, str | None]], key: str = "id"
) -> tuple[str, dict[str, Any]]:
    """:data:`JSON_BY_MESSAGE` for some messages, or the column when there are none."""
    if not pairs:
        return column, {}
    params: dict[str, Any] = {}
    for index, (message_id, value) in enumerate(pairs):
        params[f"{column}_id_{index}"] = message_id
        params[f"{column}_{index}"] = value
    whens = each(dialect, JSON_WHEN, len(pairs), " ", column=column)
    return render(dialect, JSON_BY_MESSAGE, whens=whens, column=column, key=key), params


def complete(
    dialect: Dialect,
    cursor: Any,
    completions: Sequence[Completion],
    next_claim: int | None = None,
) -> None:
    """One ``UPDATE`` of the finished turns; the followers' ready rows deleted.
    ``next_claim``: the message claimed next (MySQL, SQLite): its attempt is counted by the
    same ``UPDATE`` and its ready row deleted with the followers'."""
    _complete(dialect, cursor, completions, next_claim)


def _complete(
    dialect: Dialect,
    cursor: Any,
    completions: Sequence[Completion],
    next_claim: int | None,
    moving: dict[str, Any] | None = None,
) -> int:
    """:func:`complete`; with ``moving`` (MySQL/MariaDB, with ``next_claim``: the fence's
    parameters) the same ``UPDATE`` moves the lease's claimed row to ``next_claim``
    (:data:`COMPLETE_AND_MOVE_CLAIM_MYSQL`). Returns the ``UPDATE``'s row count (0 when
    ``moving`` found no claimed row: nothing was written)."""
    if not completions:
        return 0
    key = "id" if moving is None else "m.id"
    started_at, completed_at = render(dialect, STARTED_AT), render(dialect, COMPLETED_AT)
    finished = [c.message_id for c in completions]
    ids, params = in_list("id", finished if next_claim is None else [*finished, next_claim])
    if next_claim is not None:
        started_at = render(dialect, STARTED_AT_OR_CLAIMED, key=key)
        completed_at = render(dialect, COMPLETED_AT_OR_CLAIMED, key=key)
        params["next_id"] = next_claim
    result, result_params = _json_by_message(
        dialect, "result", [(c.message_id, c.result) for c in completions if c.result], key
    )
    rejected = [(c.message_id, c.rejection) for c in completions if c.rejection]
    rejection, rejection_params = _json_by_message(dialect, "rejection", rejected, key)
    rejected_at = "rejected_at"
    if rejected:
        marks = each(dialect, REJECTION_ID, len(rejected))
        rejected_at = render(dialect, REJECTED_AT, ids=marks, key=key)
    counted = [c.message_id for c in completions if not c.claimed]
    unready = counted + ([] if next_claim is None else [next_claim])
    unclaimed, unclaimed_params = in_list("unclaimed", unready)
    attempts = "attempt_count"
    if unclaimed_params:
        attempts = render(dialect, ATTEMPT_COUNTED, ids=unclaimed, key=key)
    cursor.execute(
        render(
            dialect,
            COMPLETE if moving is None else COMPLETE_AND_MOVE_CLAIM_MYSQL,
            result=result,
            rejection=rejection,
            rejected_at=rejected_at,
            attempts=attempts,
            started_at=started_at,
            completed_at=completed_at,
            ids=ids,
        ),
        {**(moving or {}), **params, **result_params, **rejection_params, **unclaimed_params},
    )
    written = int(cursor.rowcount)
    if unclaimed_params:
        cursor.execute(render(dialect, UNREADY_FOLLOWERS, ids=unclaimed), unclaimed_params)
    return written


def commit_and_claim_next(
    dialect: Dialect,
    cursor: Any,
    lease: LeaseRow,
    *,
    claimed_message_id: int,
    state: str | None,
    state_version: int,
    state_revision: int,
    lease_seconds: float,
    completions: Sequence[Completion],
    read_ahead: int,
) -> tuple[bool, MessageRow | None, list[MessageRow]]:
    """MySQL, SQLite: the fenced commit of a group that staged nothing and whose pass goes
    on, with the claim of the next turn, in five statements: the fence (lease renewed),
    the next head and up to ``read_ahead`` due messages after it (one read), the finished
    turns and the head's attempt (one ``UPDATE``), the ready rows of the followers and the
    head (one ``DELETE``), and the claimed row moved in place to the head (deleted when
    nothing is due); on MySQL/MariaDB the results' ``UPDATE`` moves the claimed row too
    (four statements). Returns ``(fenced, the next claimed message, the due messages read
    after it)``; when not fenced nothing was written (the caller rolls back)."""
    params = _fence_update(
        dialect,
        cursor,
        lease,
        claimed_message_id=claimed_message_id,
        state=state,
        state_version=state_version,
        state_revision=state_revision,
        release=False,
        lease_seconds=lease_seconds,
    )
    if params is None:
        return False, None, []
    # The group's followers are still in ready (deleted below, with the head's row).
    followers = [c.message_id for c in completions if not c.claimed]
    head, ahead = head_and_ahead(dialect, cursor, lease.instance_id, read_ahead, followers)
    if head is not None and dialect.claim_moves_with_results:
        # One UPDATE writes the results and moves the claimed row; without the claimed
        # row it matches nothing (the join is empty) and the caller rolls back.
        moved = _complete(dialect, cursor, completions, head.id, moving=params)
        head.attempt_count += 1
        return moved > 0, head, ahead
    complete(dialect, cursor, completions, next_claim=None if head is None else head.id)
    if head is None:
        cursor.execute(render(dialect, UNCLAIM_FENCED), params)
        return cursor.rowcount == 1, None, []
    cursor.execute(render(dialect, MOVE_CLAIM), {**params, "next_id": head.id})
    head.attempt_count += 1
    return cursor.rowcount == 1, head, ahead


def _store_error(dialect: Dialect, cursor: Any, message_id: int, claimed: bool, error: str) -> None:
    """The error on the history row; the attempt of an unclaimed (grouped) turn counts."""
    attempts = ATTEMPT_OF_CLAIM if claimed else ATTEMPT_OF_FOLLOWER
    cursor.execute(
        render(dialect, STORE_ERROR, attempts=attempts),
        {"error": error, "message_id": message_id},
    )


def record_failure(
    dialect: Dialect,
    cursor: Any,
    *,
    instance_id: int,
    message_id: int,
    claimed: bool,
    error: str,
    retry_seconds: float,
) -> None:
    _store_error(dialect, cursor, message_id, claimed, error)
    if claimed:
        unclaim_to_ready(dialect, cursor, instance_id, message_id, retry_seconds)
        return
    cursor.execute(
        render(dialect, DELAY_READY),
        {"message_id": message_id, "delay": dialect.interval(retry_seconds)},
    )


def _dead_letter(
    dialect: Dialect,
    cursor: Any,
    *,
    message_id: int,
    claimed: bool,
    error: str,
    exception_class: str,
    exception_message: str,
    backtrace: str,
) -> dict[str, Any]:
    _store_error(dialect, cursor, message_id, claimed, error)
    params = {
        "message_id": message_id,
        "exception_class": exception_class,
        "exception_message": exception_message,
        "backtrace": backtrace,
    }
    cursor.execute(render(dialect, INSERT_DEAD_LETTER), params)
    return params


def _out_of_the_mailbox(dialect: Dialect, cursor: Any, message_id: int, claimed: bool) -> None:
    template = DELETE_CLAIMED_MESSAGE if claimed else DELETE_READY_MESSAGE
    cursor.execute(render(dialect, template), {"message_id": message_id})


def dead_letter(
    dialect: Dialect,
    cursor: Any,
    *,
    instance_id: int,
    message_id: int,
    claimed: bool,
    error: str,
    exception_class: str,
    exception_message: str,
    backtrace: str,
) -> int:
    """MySQL, SQLite: the dead letter's id is the insert's ``lastrowid``."""
    _dead_letter(
        dialect,
        cursor,
        message_id=message_id,
        claimed=claimed,
        error=error,
        exception_class=exception_class,
        exception_message=exception_message,
        backtrace=backtrace,
    )
    dead_id = int(cursor.lastrowid)
    _out_of_the_mailbox(dialect, cursor, message_id, claimed)
    return dead_id


def dead_letter_postgresql(
    dialect: Dialect,
    cursor: Any,
    *,
    instance_id: int,
    message_id: int,
    claimed: bool,
    error: str,
    exception_class: str,
    exception_message: str,
    backtrace: str,
) -> int:
    """PostgreSQL: the dead letter's id read back by its message."""
    params = _dead_letter(
        dialect,
        cursor,
        message_id=message_id,
        claimed=claimed,
        error=error,
        exception_class=exception_class,
        exception_message=exception_message,
        backtrace=backtrace,
    )
    cursor.execute(render(dialect, DEAD_LETTER_ID_POSTGRESQL), params)
    dead_id = int(cursor.fetchone()[0])
    _out_of_the_mailbox(dialect, cursor, message_id, claimed)
    return dead_id


def yield_head(dialect: Dialect, cursor: Any, instance_id: int) -> None:
    cursor.execute(render(dialect, YIELD_HEAD), {"instance_id": instance_id})


def _completion_rows(completions: Sequence[Completion]) -> dict[str, Any]:
    """The array parameters of :data:`GROUP_DONE_CTE_POSTGRESQL`."""
    return {
        "done_ids": [c.message_id for c in completions],
        "done_results": [c.result for c in completions],
        "done_rejections": [c.rejection for c in completions],
        "done_bumps": [0 if c.claimed else 1 for c in completions],
    }


def commit_group_postgresql(
    dialect: Dialect,
    cursor: Any,
    lease: LeaseRow,
    *,
    claimed_message_id: int,
    state: str | None,
    state_version: int,
    state_revision: int,
    release: bool,
    lease_seconds: float,
    completions: Sequence[Completion],
    claim_next: bool,
    hand_off: bool = False,
    notify: bool = False,
    joined: JoinedWrite | None = None,
    result_hint: str = "result",
    waited_hint: str | None = None,
) -> tuple[bool, MessageRow | None, bool]:
    """The whole fenced commit of a group, and the claim of the next turn, in ONE
    statement run in autocommit: one round trip and one commit per group.

    ``waited_hint`` (other processes' callers wait for outcomes of the group): the
    payload of the ``result`` hint the statement sends if its fence holds.

    ``hand_off`` (a sync caller releasing the lease at its own message): if a due message
    follows the group, ``NOTIFY`` work and result hints in the same statement when
    ``notify``, so they go out exactly when it commits (the result hint's payload is
    ``result_hint``); the third value returned says whether such work is left without a
    hint sent (the caller publishes it otherwise).

    ``joined`` (journal entries the group recorded): its INSERT becomes one more part of
    the statement, joined on ``f`` like every other part, and learns the positions it
    returned once the statement committed.
    """
    lease_sets = RELEASE_SETS if release else RENEW_SETS
    if claim_next:  # the lease is kept only if a due message follows the group
        lease_sets = KEEP_SETS_POSTGRESQL
    sets, params = _sets(
        dialect,
        state=state,
        state_version=state_version,
        state_revision=state_revision,
        lease_sets=lease_sets,
        lease_seconds=lease_seconds,
    )
    params.update(_completion_rows(completions))
    params.update(
        fence_params(lease),
        claimed_message_id=claimed_message_id,
        followers=[c.message_id for c in completions if not c.claimed],
        channel=CHANNEL,
        result_hint=result_hint,
        waited_hint=waited_hint,
    )
    fragments = {"sets": sets, "joined": "", "joined_column": NOTHING_JOINED}
    if joined is not None:
        statement, joined_params = joined.statement("f")
        fragments.update(
            joined=render(dialect, JOINED_CTE_POSTGRESQL, statement=statement),
            joined_column=JOINED_POSITIONS_POSTGRESQL,
        )
        params.update(joined_params)
    if not claim_next:
        left = NO_DUE_LEFT_POSTGRESQL
        if hand_off:
            left = render(
                dialect, DUE_LEFT_HINTED_POSTGRESQL if notify else DUE_LEFT_UNHINTED_POSTGRESQL
            )
        cursor.execute(render(dialect, COMMIT_GROUP_POSTGRESQL, left=left, **fragments), params)
        fenced, unclaimed, _done, _dropped, left_over, positions, _hinted = cursor.fetchone()
        if joined is not None and fenced == 1:
            joined.returned(positions or [])
        return bool(fenced == 1 and unclaimed == 1), None, bool(left_over)
    cursor.execute(render(dialect, COMMIT_GROUP_AND_CLAIM_POSTGRESQL, **fragments), params)
    row = cursor.fetchone()
    fenced, unclaimed = row[0], row[1]
    if joined is not None and fenced == 1:
        joined.returned(row[4] or [])
    if not (fenced == 1 and unclaimed == 1):
        return False, None, False
    next_message = None if row[6] is None else message_from_row(row[6:])
    return True, next_message, False


def insert_effects(
    dialect: Dialect,
    cursor: Any,
    *,
    instance_id: int,
    message_id: int,
    effects: Sequence[StagedEffectRow],
    max_attempts: int | Callable[[str], int],
) -> None:
    params: dict[str, Any] = {"message_id": message_id, "instance_id": instance_id}
    for index, effect in enumerate(effects):
        params[f"effect_id_{index}"] = effect.effect_id
        params[f"name_{index}"] = effect.name
        params[f"arguments_{index}"] = effect.arguments
        params[f"success_{index}"] = effect.success_operation
        params[f"failure_{index}"] = effect.failure_operation
        params[f"max_attempts_{index}"] = (
            max_attempts(effect.name) if callable(max_attempts) else max_attempts
        )
    rows = each(dialect, EFFECT_ROW, len(effects))
    cursor.execute(render(dialect, INSERT_EFFECTS, rows=rows), params)


def cancel_reminder(dialect: Dialect, cursor: Any, instance_id: int, name: str) -> None:
    cursor.execute(render(dialect, CANCEL_REMINDER), {"instance_id": instance_id, "name": name})


def upsert_reminder(
    dialect: Dialect,
    cursor: Any,
    lease: LeaseRow,
    *,
    name: str,
    operation: str,
    arguments: str,
    at: datetime | None,
    delay: float,
    interval: Any,
    missed_policy: str,
    cron: str | None = None,
    time_zone: str | None = None,
) -> bool:
    """Move the named reminder, or create it; ``True`` when an existing one was moved."""
    params: dict[str, Any] = {
        "instance_id": lease.instance_id,
        "actor_type": lease.actor_type,
        "actor_id": lease.actor_id,
        "name": name,
        "operation": operation,
        "arguments": arguments,
        "interval": None
        if interval is None
        else dialect.ops.adapt_decimalfield_value(interval, 20, 6),
        "missed_policy": missed_policy,
        "cron": cron,
        "time_zone": time_zone,
    }
    if at is not None:
        next_run_at = render(dialect, RUN_AT)
        params["at"] = dialect.adapt_datetime(at)
    else:
        next_run_at = render(dialect, RUN_AFTER_DELAY)
        params["delay"] = dialect.interval(delay)
    cursor.execute(render(dialect, MOVE_REMINDER, next_run_at=next_run_at), params)
    if cursor.rowcount:
        return True
    cursor.execute(render(dialect, INSERT_REMINDER, next_run_at=next_run_at), params)
    return False


def insert_broadcasts(
    dialect: Dialect,
    cursor: Any,
    lease: LeaseRow,
    *,
    message_id: int,
    state_version: int,
    rows: Sequence[tuple[str, str, str]],
) -> None:
    if not rows:
        return
    params: dict[str, Any] = {
        "message_id": message_id,
        "instance_id": lease.instance_id,
        "state_version": state_version,
        "generation": lease.generation,
    }
    for index, (broadcast_id, observable, value) in enumerate(rows):
        params[f"broadcast_id_{index}"] = broadcast_id
        params[f"observable_{index}"] = observable
        params[f"value_{index}"] = value
    values = each(dialect, BROADCAST_ROW, len(rows))
    cursor.execute(render(dialect, INSERT_BROADCASTS, rows=values), params)
