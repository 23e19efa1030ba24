"""Which actors a worker takes (``run_actor_worker --actor-types / --exclude-actor-types /
--queues``), as a condition on the instance row ``i`` of the candidate scans."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

#: The escape character of the ``LIKE`` patterns of :func:`like_prefix`.
LIKE_ESCAPE = "!"

#: What a worker takes, ORed (``{choices}``: :data:`TYPES_IN` and :data:`SELECTION`). The
#: whole condition is this and :data:`EXCLUDED_TYPES`, ANDed, or :data:`EVERY_ACTOR`; the
#: fragments are filled with ``str.format`` (none depends on the database).
INCLUDED = "({choices})"

#: Every actor (a filter that names none).
EVERY_ACTOR = "1 = 1"

#: No actor (a selection that names no id).
NO_ACTOR = "1 = 0"

#: The actor types taken (``{marks}``: their parameters).
TYPES_IN = "{alias}.actor_type IN ({marks})"

#: Actors of one type (``{actor_type}``: its parameter), chosen by id (``{ids}``: the
#: :data:`IDS_IN` and :data:`ID_PREFIXED` conditions, ORed, or :data:`NO_ACTOR`).
SELECTION = "({alias}.actor_type = {actor_type} AND ({ids}))"

#: Exact ids of a :data:`SELECTION`.
IDS_IN = "{alias}.actor_id IN ({marks})"

#: Ids starting with a prefix (``{mark}``: the parameter holding :func:`like_prefix`).
ID_PREFIXED = "{alias}.actor_id LIKE {mark} ESCAPE '" + LIKE_ESCAPE + "'"

#: The actor types never taken.
EXCLUDED_TYPES = "{alias}.actor_type NOT IN ({marks})"

#: One parameter of a condition (``work_N``).
MARK = "%({name})s"


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
                names.append(MARK.format(name=name))
            return ", ".join(names)

        include: list[str] = []
        if self.actor_types:
            include.append(TYPES_IN.format(alias=alias, marks=marks(self.actor_types)))
        for selection in self.actors:
            actor_type = marks([selection.actor_type])
            ids = [IDS_IN.format(alias=alias, marks=marks(selection.ids))] if selection.ids else []
            ids += [
                ID_PREFIXED.format(alias=alias, mark=marks([like_prefix(prefix)]))
                for prefix in selection.prefixes
            ]
            include.append(
                SELECTION.format(
                    alias=alias, actor_type=actor_type, ids=" OR ".join(ids) or NO_ACTOR
                )
            )
        parts = [INCLUDED.format(choices=" OR ".join(include))] if include else []
        if self.exclude_actor_types:
            parts.append(EXCLUDED_TYPES.format(alias=alias, marks=marks(self.exclude_actor_types)))
        return " AND ".join(parts) or EVERY_ACTOR, params
