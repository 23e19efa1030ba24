"""Which actors a worker takes (``run_actor_worker --actor-types / --exclude-actor-types /
--queues``), as a condition on the instance row ``i`` of the candidate scans."""

from __future__ import annotations

from dataclasses import dataclass

LIKE_ESCAPE = "!"


def like_prefix(prefix: str) -> str:
    """A ``LIKE`` pattern matching strings that start with ``prefix`` (escaped with ``!``,
    which means the same on every database, unlike the backslash)."""
    escaped = (
        prefix.replace(LIKE_ESCAPE, LIKE_ESCAPE * 2)
        .replace("%", f"{LIKE_ESCAPE}%")
        .replace("_", f"{LIKE_ESCAPE}_")
    )
    return f"{escaped}%"


@dataclass(frozen=True, slots=True)
class ActorSelection:
    """Actors of one type chosen by id: exact ids, or ids starting with a prefix."""

    actor_type: str
    ids: tuple[str, ...] = ()
    prefixes: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class WorkFilter:
    """Take only actors of ``actor_types`` or matching one of ``actors`` (when either is
    given; otherwise every actor), never those of ``exclude_actor_types``."""

    actor_types: tuple[str, ...] = ()
    exclude_actor_types: tuple[str, ...] = ()
    actors: tuple[ActorSelection, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.actor_types or self.exclude_actor_types or self.actors)

    def condition(self, alias: str = "i") -> tuple[str, list[str]]:
        """SQL over the instance row named ``alias`` and its parameters."""
        include: list[str] = []
        params: list[str] = []
        if self.actor_types:
            include.append(f"{alias}.actor_type IN ({_marks(self.actor_types)})")
            params.extend(self.actor_types)
        for selection in self.actors:
            ids = [f"{alias}.actor_id IN ({_marks(selection.ids)})"] if selection.ids else []
            ids += [f"{alias}.actor_id LIKE %s ESCAPE '{LIKE_ESCAPE}'" for _ in selection.prefixes]
            include.append(f"({alias}.actor_type = %s AND ({' OR '.join(ids) or '1 = 0'}))")
            params.append(selection.actor_type)
            params.extend(selection.ids)
            params.extend(like_prefix(prefix) for prefix in selection.prefixes)
        parts = [f"({' OR '.join(include)})"] if include else []
        if self.exclude_actor_types:
            parts.append(f"{alias}.actor_type NOT IN ({_marks(self.exclude_actor_types)})")
            params.extend(self.exclude_actor_types)
        return " AND ".join(parts) or "1 = 1", params


def _marks(values: tuple[str, ...]) -> str:
    return ", ".join("%s" for _ in values)
