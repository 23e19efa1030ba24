"""Declaring actors: the :class:`Actor` base class and its decorators.

A subclass's public methods are its messages; :func:`attribute` declares persisted state;
:func:`query` marks read-only operations; :func:`observable` marks values pushed to live
pages; :func:`migrate_state` upgrades stored state one version at a time.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, ClassVar, Self

from django.utils.module_loading import autodiscover_modules

from . import retry_policy
from .errors import ActorDefinitionError, InvalidRejectionCode, Rejected
from .references import ActorReference
from .registry import register
from .spec import (
    REJECTION_CODE,
    RESERVED_ATTRIBUTE_NAMES,
    RESERVED_OPERATION_NAMES,
    ActorSpec,
    ObservableSpec,
    Operation,
    attribute,
    migrate_state,
    observable,
    query,
)

if TYPE_CHECKING:
    from .turn import TurnContext

__all__ = [
    "REJECTION_CODE",
    "RESERVED_ATTRIBUTE_NAMES",
    "RESERVED_OPERATION_NAMES",
    "Actor",
    "ActorSpec",
    "ObservableSpec",
    "Operation",
    "attribute",
    "migrate_state",
    "observable",
    "query",
]


class Actor:
    """Base class of durable actors. See ``docs/actors.md``."""

    actor_type: ClassVar[str] = ""
    state_version: ClassVar[int] = 1
    instance_retention: ClassVar[timedelta | None] = None
    #: A worker may run this actor's turn in a batch with other cold actors' turns, one
    #: after another in one thread, and commit them together (``MAX_ACTORS_PER_COMMIT``).
    #: ``False`` for handlers that may block (the ``django.tasks`` backend's task actor):
    #: each such turn is leased on its own, so worker threads run them side by side.
    commit_with_other_actors: ClassVar[bool] = True
    _spec: ClassVar[ActorSpec]

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if not cls.__dict__.get("actor_type"):
            cls.actor_type = cls.__name__
        cls._spec = _build_spec(cls)

    def __init__(
        self, actor_id: str, state: dict[str, Any] | None = None, context: TurnContext | None = None
    ) -> None:
        self.actor_id = actor_id
        self._state: dict[str, Any] = state if state is not None else {}
        self._context = context

    # -- identity and message context ---------------------------------------------------
    @property
    def message(self) -> Any:
        return self._require_context().message

    @classmethod
    def ref(cls, actor_id: str) -> ActorReference[Self]:
        """A reference to the instance ``actor_id`` (no database access). Typed: with the
        mypy plugin ``solid_objects.mypy_plugin`` calls through it are checked against this
        class's operations."""
        return ActorReference(cls._spec, actor_id)

    # -- inside a turn --------------------------------------------------------------------
    def reject(self, code: str, message: str = "", details: Any = None) -> None:
        if not isinstance(code, str) or not REJECTION_CODE.match(code):
            raise InvalidRejectionCode(f"invalid rejection code {code!r}")
        raise Rejected(code, message, details)

    def emit(
        self,
        name: str,
        /,
        on_success: str | None = None,
        on_failure: str | None = None,
        **arguments: Any,
    ) -> Any:
        return self._require_context().emit(name, on_success, on_failure, arguments)

    def send_to(
        self,
        ref: ActorReference[Any],
        available_at: Any = None,
        idempotency_key: str | None = None,
    ) -> Any:
        return self._require_context().send_to(ref, available_at, idempotency_key)

    def schedule(
        self,
        at: Any = None,
        delay: Any = None,
        every: Any = None,
        missed: str = "latest",
        key: str | None = None,
        cron: str | None = None,
        tz: str | None = None,
    ) -> Any:
        return self._require_context().schedule(at, delay, every, missed, key, cron, tz)

    def unschedule(self, op: str | Callable[..., Any], key: str | None = None) -> None:
        self._require_context().unschedule(op, key)

    def commit_action(self, name: str, /, **arguments: Any) -> None:
        self._require_context().commit_action(name, arguments)

    def record_activity(
        self,
        member: Any,
        verb: str,
        object: Any = None,
        quantity: int = 1,
        context: dict[str, Any] | None = None,
        occurred_at: datetime | None = None,
        idempotency_key: str | None = None,
    ) -> str:
        """A ``tilttek_activity`` journal entry written in this turn's fenced commit (so
        never for a turn that fails or rejects, and once however often the turn runs);
        validated now. Returns its idempotency key (for ``cancel_activity`` later)."""
        return self._require_context().record_activity(
            member,
            verb,
            object=object,
            quantity=quantity,
            context=context,
            occurred_at=occurred_at,
            idempotency_key=idempotency_key,
        )

    # -- lifecycle hooks (deterministic, no I/O) -------------------------------------------
    def on_activate(self) -> None:
        return None

    def on_deactivate(self) -> None:
        return None

    def _require_context(self) -> TurnContext:
        if self._context is None:
            raise RuntimeError("this can only be called from inside a turn")
        return self._context


_BASE_NAMES = frozenset(dir(Actor))


def _build_spec(cls: type[Actor]) -> ActorSpec:
    spec = ActorSpec(actor_type=cls.actor_type, cls=cls)
    chain = [
        klass for klass in reversed(cls.__mro__) if issubclass(klass, Actor) and klass is not Actor
    ]
    for klass in chain:
        for name, value in vars(klass).items():
            if isinstance(value, attribute):
                if name in RESERVED_ATTRIBUTE_NAMES:
                    raise ActorDefinitionError(
                        f"{cls.__name__}.{name}: a state attribute cannot be named {name!r}, "
                        f"snapshots answer it themselves (reserved: "
                        f"{', '.join(sorted(RESERVED_ATTRIBUTE_NAMES))})"
                    )
                spec.attributes[name] = value
            elif isinstance(value, observable):
                function = value.function
                assert function is not None
                _check_operation_name(cls, name, function)
                spec.observables[name] = value.spec()
                spec.operations[name] = Operation(name, function, True, inspect.signature(function))
            elif isinstance(value, migrate_state):
                assert value.function is not None
                spec.migrations[value.from_version] = value.function
            elif not name.startswith("_") and name not in _BASE_NAMES and inspect.isfunction(value):
                _check_operation_name(cls, name, value)
                spec.operations[name] = Operation(
                    name,
                    value,
                    getattr(value, "__solid_query__", False),
                    inspect.signature(value),
                    retry_policy.of(value),
                )
    clash = set(spec.attributes) & set(spec.operations)
    if clash:
        raise ActorDefinitionError(
            f"{cls.__name__}: attributes clash with methods: {sorted(clash)}"
        )
    for version in range(1, cls.state_version):
        if version not in spec.migrations:
            raise ActorDefinitionError(
                f"{cls.__name__}: state_version is {cls.state_version} but there is no "
                f"@migrate_state({version}, {version + 1})"
            )
    return spec


def _check_operation_name(cls: type[Actor], name: str, function: Any = None) -> None:
    if inspect.iscoroutinefunction(function) or inspect.isasyncgenfunction(function):
        raise ActorDefinitionError(
            f"{cls.__name__}.{name}: operations run inside the turn's transaction and cannot "
            "be async; await I/O in an async effect handler (self.emit) instead"
        )
    if name in RESERVED_OPERATION_NAMES:
        raise ActorDefinitionError(
            f"{cls.__name__}.{name}: an operation cannot be named {name!r}, references "
            f"answer it themselves (reserved: {', '.join(sorted(RESERVED_OPERATION_NAMES))})"
        )


def autodiscover() -> None:
    """Import ``<app>.actors`` for every installed app and register its actors."""
    autodiscover_modules("actors")
    _register_defined_subclasses(Actor)


def _register_defined_subclasses(base: type[Actor]) -> None:
    """Register the concrete actors defined in ``actors`` modules or packages (a class that
    sets ``abstract = True`` in its own body opts out)."""
    for cls in base.__subclasses__():
        in_actors_module = "actors" in cls.__module__.split(".")
        if in_actors_module and not cls.__dict__.get("abstract", False):
            register(cls)
        _register_defined_subclasses(cls)
