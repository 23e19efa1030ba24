"""Which roles a command runs (kept apart so commands stay thin)."""

from __future__ import annotations

from ..conf import get_settings
from .roles import ActorRole, Role
from .supervisor import Supervisor


def build_supervisor(
    *, actor_threads: int = 1, all_roles: bool = False, alias: str | None = None
) -> Supervisor:
    roles: list[tuple[type[Role], int]] = []
    if actor_threads > 0:
        roles.append((ActorRole, actor_threads))
    if all_roles:
        roles.extend(extra_roles())
    return Supervisor(roles=roles, alias=alias or get_settings().DATABASE)


def extra_roles() -> list[tuple[type[Role], int]]:
    """The effect, reminder and broadcast roles (registered by the outbox modules)."""
    return list(_extra)


_extra: list[tuple[type[Role], int]] = []


def add_role(role: type[Role], count: int = 1) -> None:
    _extra.append((role, count))
