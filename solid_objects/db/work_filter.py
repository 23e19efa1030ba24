"""Which actors a worker takes (``run_actor_worker --actor-types / --exclude-actor-types /
--queues``), as a condition on the instance row ``i`` of the candidate scans."""

from __future__ import annotations

from collections.abc import Sequence
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

    def condition(self, alias: str = "i") -> tuple[str, dict[str, str]]:
        """SQL over the instance row named ``alias`` and its named parameters (``work_N``)."""
        params: dict[str, str] = {}

        def marks(values: Sequence[str]) -> str:
            names = []
            for value in values:
                name = f"work_{len(params)}"
                params[name] = value
                names.append(f"%({name})s")
            return ", ".join(names)

        include: list[str] = []
        if self.actor_types:
            include.append(f"{alias}.actor_type IN ({marks(self.actor_types)})")
        for selection in self.actors:
            actor_type = marks([selection.actor_type])
            ids = [f"{alias}.actor_id IN ({marks(selection.ids)})"] if selection.ids else []
            ids += [
                f"{alias}.actor_id LIKE {marks([like_prefix(prefix)])} ESCAPE '{LIKE_ESCAPE}'"
                for prefix in selection.prefixes
            ]
            include.append(
                f"({alias}.actor_type = {actor_type} AND ({' OR '.join(ids) or '1 = 0'}))"
            )
        parts = [f"({' OR '.join(include)})"] if include else []
        if self.exclude_actor_types:
            parts.append(f"{alias}.actor_type NOT IN ({marks(self.exclude_actor_types)})")
        return " AND ".join(parts) or "1 = 1", params
