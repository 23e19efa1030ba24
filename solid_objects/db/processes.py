"""The process registry, statement by statement: registering a worker, its heartbeat,
stopping it, finding silent ones, and giving back what a dead (or stopping) process held.

Cleanup releases one instance at a time under its row lock (:func:`release_instance_held_by`):
stale-claim recovery, the fenced commit and the claim of a turn hold the same lock, so they
have either committed (and cleanup's reads see their rows) or wait for it (and then find
the lease gone). Only the claimed rows cleanup deletes go back to ready.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .dialect import Dialect
from .sql import in_list, render
from .work_filter import WorkFilter

#: Register a running process; its heartbeat starts now.
INSERT_PROCESS = (
    "INSERT INTO {t_processes} (id, kind, hostname, pid, started_at, last_heartbeat_at, "
    "metadata, shutdown_state, created_at, updated_at) VALUES (%(id)s, %(kind)s, "
    "%(hostname)s, %(pid)s, {now}, {now}, %(metadata)s{json_cast}, 'running', {now}, {now})"
)

#: A heartbeat (``{sets}``: also the shutdown state, and when a drain was requested).
HEARTBEAT = (
    "UPDATE {t_processes} SET last_heartbeat_at = {now}, updated_at = {now}{sets} "
    "WHERE id = %(id)s AND shutdown_state <> 'stopped'"
)

#: The shutdown state a heartbeat sets.
SHUTDOWN_STATE_SETS = ", shutdown_state = %(state)s"

#: A drain requested now.
DRAIN_REQUESTED_SETS = ", shutdown_requested_at = {now}"

#: The heartbeat of several processes of one supervisor.
HEARTBEAT_MANY = (
    "UPDATE {t_processes} SET last_heartbeat_at = {now}, updated_at = {now} "
    "WHERE id IN ({ids}) AND shutdown_state <> 'stopped'"
)

#: Which of them are still running.
STILL_RUNNING = "SELECT id FROM {t_processes} WHERE id IN ({ids}) AND shutdown_state <> 'stopped'"

#: A process stopped (``{silent}``: only if its heartbeat is old enough, or nothing).
MARK_STOPPED = (
    "UPDATE {t_processes} SET shutdown_state = 'stopped', stopped_at = {now}, "
    "updated_at = {now} WHERE id = %(id)s AND shutdown_state <> 'stopped'{silent}"
)

#: The heartbeat is older than ``%(silence)s`` (a negative interval).
SILENT = " AND last_heartbeat_at < {later:silence}"

#: Processes not stopped whose heartbeat is older than ``%(silence)s``.
SILENT_PROCESSES = "SELECT id FROM {t_processes} WHERE shutdown_state <> 'stopped'" + SILENT

#: Instances whose claimed turn belongs to no live lease, among those ``{work}`` takes.
CLAIMS_WITHOUT_LEASE = (
    "SELECT c.instance_id FROM {t_claimed} c JOIN {t_instances} i ON i.id = c.instance_id "
    "WHERE (i.activation_token IS NULL OR i.activation_expires_at <= {now} "
    "OR i.activation_token <> c.activation_token) AND {work} LIMIT 100"
)

#: Instances some processes lease or hold a claimed turn on (a plain read).
INSTANCES_HELD_BY = (
    "SELECT id FROM {t_instances} WHERE activation_owner_id IN ({processes}) "
    "UNION SELECT instance_id FROM {t_claimed} WHERE process_id IN ({processes})"
)

#: The instance row lock, taken with a write (on SQLite: the write transaction at once).
LOCK_INSTANCE_BY_WRITING = "UPDATE {t_instances} SET updated_at = {now} WHERE id = %(instance_id)s"

#: The processes' claimed rows of the instance, locked.
CLAIMS_HELD_BY = (
    "SELECT message_id FROM {t_claimed} WHERE instance_id = %(instance_id)s "
    "AND process_id IN ({processes}){for_update}"
)

#: Those claimed rows deleted...
DELETE_CLAIMS = (
    "DELETE FROM {t_claimed} WHERE instance_id = %(instance_id)s AND message_id IN ({messages})"
)

#: ...and their messages ready again, due now.
REQUEUE_NOW = (
    "INSERT INTO {t_ready} (message_id, instance_id, sequence, available_at, created_at) "
    "SELECT id, instance_id, sequence, {now}, {now} FROM {t_messages} WHERE id IN ({messages})"
)

#: The lease the processes held, released.
RELEASE_HELD_LEASE = (
    "UPDATE {t_instances} SET activation_owner_id = NULL, activation_token = NULL, "
    "activation_expires_at = NULL, updated_at = {now} WHERE id = %(instance_id)s "
    "AND activation_owner_id IN ({processes})"
)

#: Effects and broadcasts in flight go back to pending (``{outbox}``: either table).
RELEASE_OUTBOX_CLAIMS = (
    "UPDATE {outbox} SET status = 'pending', claimed_by = NULL, claimed_at = NULL, "
    "updated_at = {now} WHERE claimed_by IN ({processes}) AND status = 'processing'"
)

#: Reminder claims cleared.
RELEASE_REMINDER_CLAIMS = (
    "UPDATE {t_reminders} SET claimed_by = NULL, claimed_at = NULL "
    "WHERE claimed_by IN ({processes})"
)


def insert_process(
    dialect: Dialect,
    cursor: Any,
    process_id: str,
    kind: str,
    hostname: str,
    pid: int,
    metadata_json: str,
) -> None:
    cursor.execute(
        render(dialect, INSERT_PROCESS),
        {
            "id": process_id,
            "kind": kind,
            "hostname": hostname,
            "pid": pid,
            "metadata": metadata_json,
        },
    )


def heartbeat_process(dialect: Dialect, cursor: Any, process_id: str, state: str | None) -> bool:
    sets = ""
    if state is not None:
        sets = SHUTDOWN_STATE_SETS
        if state == "draining":
            sets += render(dialect, DRAIN_REQUESTED_SETS)
    cursor.execute(render(dialect, HEARTBEAT, sets=sets), {"id": process_id, "state": state})
    return bool(cursor.rowcount == 1)


def heartbeat_processes(dialect: Dialect, cursor: Any, process_ids: Sequence[str]) -> set[str]:
    ids, params = in_list("id", process_ids)
    cursor.execute(render(dialect, HEARTBEAT_MANY, ids=ids), params)
    if cursor.rowcount == len(process_ids):
        return set(process_ids)
    cursor.execute(render(dialect, STILL_RUNNING, ids=ids), params)
    return {row[0] for row in cursor.fetchall()}


def mark_process_stopped(
    dialect: Dialect, cursor: Any, process_id: str, silent_for: float | None = None
) -> bool:
    params: dict[str, Any] = {"id": process_id}
    silent = ""
    if silent_for is not None:
        silent = render(dialect, SILENT)
        params["silence"] = dialect.interval(-silent_for)
    cursor.execute(render(dialect, MARK_STOPPED, silent=silent), params)
    return bool(cursor.rowcount == 1)


def silent_processes(dialect: Dialect, cursor: Any, silent_for: float) -> list[str]:
    cursor.execute(render(dialect, SILENT_PROCESSES), {"silence": dialect.interval(-silent_for)})
    return [row[0] for row in cursor.fetchall()]


def claims_without_lease(
    dialect: Dialect, cursor: Any, work: WorkFilter | None = None
) -> list[int]:
    condition, params = work.condition("i") if work else ("1 = 1", {})
    cursor.execute(render(dialect, CLAIMS_WITHOUT_LEASE, work=condition), params)
    return [int(row[0]) for row in cursor.fetchall()]


def instances_held_by(dialect: Dialect, cursor: Any, process_ids: Sequence[str]) -> list[int]:
    processes, params = in_list("process", process_ids)
    cursor.execute(render(dialect, INSTANCES_HELD_BY, processes=processes), params)
    return sorted({int(row[0]) for row in cursor.fetchall()})


def release_instance_held_by(
    dialect: Dialect, cursor: Any, instance_id: int, process_ids: Sequence[str]
) -> int:
    """The instance row lock comes first; the turns requeued are returned."""
    cursor.execute(render(dialect, LOCK_INSTANCE_BY_WRITING), {"instance_id": instance_id})
    if cursor.rowcount != 1:
        return 0  # destroyed meanwhile: its rows went with it
    processes, params = in_list("process", process_ids)
    params["instance_id"] = instance_id
    cursor.execute(render(dialect, CLAIMS_HELD_BY, processes=processes), params)
    message_ids = [int(row[0]) for row in cursor.fetchall()]
    if message_ids:
        messages, message_params = in_list("message", message_ids)
        message_params["instance_id"] = instance_id
        cursor.execute(render(dialect, DELETE_CLAIMS, messages=messages), message_params)
        cursor.execute(render(dialect, REQUEUE_NOW, messages=messages), message_params)
    cursor.execute(render(dialect, RELEASE_HELD_LEASE, processes=processes), params)
    return len(message_ids)


def release_outbox_claims(dialect: Dialect, cursor: Any, process_ids: Sequence[str]) -> None:
    processes, params = in_list("process", process_ids)
    for outbox in (dialect.t_effects, dialect.t_broadcasts):
        cursor.execute(
            render(dialect, RELEASE_OUTBOX_CLAIMS, outbox=outbox, processes=processes), params
        )
    cursor.execute(render(dialect, RELEASE_REMINDER_CLAIMS, processes=processes), params)
