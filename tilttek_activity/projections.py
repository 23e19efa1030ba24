"""Projections: read models kept up to date from the journal, and their registry.

A projection is a subclass of :class:`Projection` with a ``name``. Subclasses register
themselves when they are defined; :meth:`AppConfig.ready` imports the ``projections`` module
of every installed app so that they are (``autodiscover``).
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from datetime import datetime
from typing import Any, ClassVar

from django.core.exceptions import ImproperlyConfigured
from django.utils.module_loading import autodiscover_modules

from .errors import InvalidActivity, UnknownProjection
from .limits import PROJECTION_NAME_LENGTH
from .text import problem_with_identifier
from .validation import validate_verb
from .values import ActivityEntry

__all__ = ["Projection", "autodiscover", "registry", "validate_projection_name"]


class Projection:
    """Base class of projections.

    ``apply(entry)`` (or ``apply_batch(entries)``) runs inside the transaction that advances
    the projection's checkpoint, on the journal's database: write your read model there and
    the two commit together, so each entry is applied exactly once. Entries of both kinds
    arrive, in position order: a ``cancelled`` entry (``entry.is_cancellation``) undoes its
    ``recorded`` twin, which has the same ``idempotency_key``.
    """

    #: Checkpoint key, at most 64 characters. Stable: renaming it starts from zero.
    name: ClassVar[str] = ""
    #: Verb prefixes this projection wants (``("order.",)``); empty: every entry.
    verbs: ClassVar[Sequence[str]] = ()
    #: Set on intermediate base classes so they do not register.
    abstract: ClassVar[bool] = False

    def __init_subclass__(cls, **kwargs: object) -> None:
        super().__init_subclass__(**kwargs)
        if not cls.__dict__.get("abstract", False):
            registry.register(cls)

    def wants(self, verb: str) -> bool:
        """Whether an entry with this verb is passed to :meth:`apply`."""
        verbs = self.verbs
        return not verbs or verb.startswith(verbs if isinstance(verbs, tuple) else tuple(verbs))

    def apply(self, entry: ActivityEntry) -> None:
        raise NotImplementedError(f"{type(self).__name__} must define apply(entry)")

    def apply_batch(self, entries: Sequence[ActivityEntry]) -> None:
        """Apply a batch of entries (position order); override to write in bulk."""
        for entry in entries:
            self.apply(entry)

    def reset(self, since: datetime | None = None, until: datetime | None = None) -> None:
        """Forget what a rebuild of ``since <= occurred_at < until`` will recompute."""
        raise NotImplementedError(
            f"{type(self).__name__} cannot be rebuilt: define reset(since, until)"
        )


class ProjectionRegistry:
    """Projection classes by name, and one instance of each."""

    def __init__(self) -> None:
        self._classes: dict[str, type[Projection]] = {}
        self._instances: dict[str, Projection] = {}
        #: Classes whose configuration is wrong: reported by the checks, never run.
        self._invalid: list[type[Projection]] = []
        self._lock = threading.Lock()

    def register(self, cls: type[Projection]) -> type[Projection]:
        name = cls.name
        with self._lock:
            self._invalid = [c for c in self._invalid if _path(c) != _path(cls)]
            if _problems(cls):
                self._invalid.append(cls)
                return cls
            current = self._classes.get(name)
            if current is not None and _path(current) != _path(cls):  # (a reload is fine)
                raise ImproperlyConfigured(
                    f"Two projections are named {name!r}: {_path(current)} and {_path(cls)}"
                )
            self._classes[name] = cls
            self._instances.pop(name, None)
        return cls

    def unregister(self, name: str) -> None:
        with self._lock:
            self._classes.pop(name, None)
            self._instances.pop(name, None)
            self._invalid = [c for c in self._invalid if c.name != name]

    def get(self, name: str) -> Projection:
        """The projection instance registered under ``name``: ``InvalidActivity("name")``
        when ``name`` cannot be a projection name, ``UnknownProjection`` when none has it."""
        validate_projection_name(name)
        with self._lock:
            instance = self._instances.get(name)
            if instance is None:
                cls = self._classes.get(name)
                if cls is None:
                    raise UnknownProjection(name)
                instance = self._instances[name] = cls()
            return instance

    def names(self) -> list[str]:
        with self._lock:
            return sorted(self._classes)

    def __contains__(self, name: object) -> bool:
        return name in self._classes

    def problems(self) -> list[tuple[type[Projection], str]]:
        """Configuration errors, for the system checks."""
        with self._lock:
            invalid = list(self._invalid)
        return [(cls, message) for cls in invalid for message in _problems(cls)]


def validate_projection_name(name: Any, field: str = "name") -> str:
    """A string that can name a projection (the checkpoint key): non-empty, at most 64
    characters, no control characters or lone surrogates."""
    if not isinstance(name, str):
        raise InvalidActivity(field, f"must be a projection name (a string), got {_type(name)}")
    if not name or len(name) > PROJECTION_NAME_LENGTH:
        raise InvalidActivity(field, f"must have between 1 and {PROJECTION_NAME_LENGTH} characters")
    problem = problem_with_identifier(name)
    if problem:
        raise InvalidActivity(field, problem)
    return name


def _type(value: Any) -> str:
    return type(value).__name__


def _problems(cls: type[Projection]) -> list[str]:
    found = []
    name = cls.name
    if not isinstance(name, str) or not name:
        found.append(f"{_path(cls)} must set a non-empty string `name`")
    elif len(name) > PROJECTION_NAME_LENGTH or problem_with_identifier(name):
        found.append(
            f"{_path(cls)}.name {name!r} must have at most {PROJECTION_NAME_LENGTH} "
            "characters and no control characters"
        )
    if isinstance(cls.verbs, str) or not isinstance(cls.verbs, Sequence):
        found.append(f"{_path(cls)}.verbs must be a tuple of verb prefixes")
        return found
    for prefix in cls.verbs:
        try:
            validate_verb(prefix, "verbs")
        except InvalidActivity as exc:
            found.append(f"{_path(cls)}.verbs: {prefix!r}: {exc.message}")
    return found


def _path(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


registry = ProjectionRegistry()


def autodiscover() -> None:
    """Import the ``projections`` module of every installed app."""
    autodiscover_modules("projections")
