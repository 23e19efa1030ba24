"""Which roles a command runs (kept apart so commands stay thin)."""

from __future__ import annotations

from collections.abc import Callable

from ..conf import get_settings
from ..db.work_filter import WorkFilter
from .roles import ActorRole, Role
from .shard_group import SupervisorGroup, served_aliases
from .supervisor import RETENTION_INTERVAL, Periodic, Supervisor

#: What a worker command runs: the supervisor of its one database, or a group of them.
Workers = Supervisor | SupervisorGroup

#: Under ``--all-roles`` the first retention run comes this long after start (seconds), then
#: every ``RETENTION_INTERVAL``: frequent restarts (deploys) still prune.
RETENTION_FIRST_DELAY = 300.0


def build_supervisor(
    *,
    actor_threads: int = 1,
    all_roles: bool = False,
    alias: str | None = None,
    broadcasts: bool = True,
    work_filter: WorkFilter | None = None,
) -> Supervisor:
    """``broadcasts=False`` leaves the broadcast role out of ``all_roles`` (a worker whose
    channel layer is process-local: the web process delivers them, see live/embedded.py)."""
    roles: list[tuple[type[Role], int]] = []
    if actor_threads > 0:
        roles.append((ActorRole, actor_threads))
    if all_roles:
        roles.extend(extra_roles(broadcasts=broadcasts))
    supervisor = Supervisor(
        roles=roles, alias=alias or get_settings().DATABASE, work_filter=work_filter or None
    )
    if all_roles:
        supervisor.periodic.append(retention_task(supervisor))
    return supervisor


def build_workers(
    *,
    database: str | None = None,
    actor_threads: int = 1,
    all_roles: bool = False,
    broadcasts: bool = True,
    work_filter: WorkFilter | None = None,
) -> Workers:
    """``run_actor_worker``: :func:`build_supervisor` for every shard (``--threads`` actor
    threads each), or for the one ``database`` names (it must be a shard:
    :class:`~.shard_group.NotAShard` otherwise)."""
    return _grouped(
        lambda alias: build_supervisor(
            actor_threads=actor_threads,
            all_roles=all_roles,
            alias=alias,
            broadcasts=broadcasts,
            work_filter=work_filter,
        ),
        served_aliases(database),
    )


def role_workers(role: type[Role], threads: int = 1, database: str | None = None) -> Workers:
    """``run_effect_worker`` and the like: ``threads`` threads of one role on every shard
    (or on ``database``)."""
    return _grouped(
        lambda alias: Supervisor(roles=[(role, max(1, threads))], alias=alias),
        served_aliases(database),
    )


def _grouped(build: Callable[[str], Supervisor], aliases: tuple[str, ...]) -> Workers:
    if len(aliases) == 1:
        return build(aliases[0])  # one database: the supervisor alone, as unsharded
    return SupervisorGroup([build(alias) for alias in aliases])


def retention_task(supervisor: Supervisor) -> Periodic:
    """Hourly retention (``prune`` of every kind), ending early when the worker stops."""

    def run() -> None:
        from ..retention import prune

        prune(supervisor.alias, should_stop=supervisor.stopping.is_set)

    return Periodic(RETENTION_INTERVAL, run, name="retention", first_delay=RETENTION_FIRST_DELAY)


def extra_roles(*, broadcasts: bool = True) -> list[tuple[type[Role], int]]:
    """The effect, reminder and broadcast roles (registered by the outbox modules)."""
    from ..outbox.broadcasts import BroadcastRole
    from ..outbox.effects import EffectRole
    from ..reminders import ReminderRole

    builtin: list[tuple[type[Role], int]] = [(EffectRole, 1), (ReminderRole, 1)]
    if broadcasts:
        builtin.append((BroadcastRole, 1))
    known = {EffectRole, ReminderRole, BroadcastRole}
    return [*builtin, *(entry for entry in _extra if entry[0] not in known)]


_extra: list[tuple[type[Role], int]] = []


def add_role(role: type[Role], count: int = 1) -> None:
    _extra.append((role, count))
