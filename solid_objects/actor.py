"""Declaring actors: the :class:`Actor` base class and its decorators.

A subclass's public methods are its messages; :func:`attribute` declares persisted state;
:func:`query` marks read-only operations; :func:`observable` marks values pushed to live
pages; :func:`migrate_state` upgrades stored state one version at a time.
"""

from __future__ import annotations

import copy
import inspect
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta
from typing import TYPE_CHECKING, Any, ClassVar

from .errors import InvalidRejectionCode, Rejected, UnknownOperation

if TYPE_CHECKING:
    from .references import ActorReference
    from .turn import TurnContext

REJECTION_CODE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*\Z")
_MISSING = object()

# Names a reference proxy uses itself; an operation may not shadow them.
RESERVED_OPERATION_NAMES = frozenset(
    {"sync", "enqueue", "snapshot", "destroy", "find_message", "ref", "actor_type", "actor_id"}
)


class attribute:
    """A persisted field of the actor's JSON state."""

    def __init__(self, default: Any = None) -> None:
        self.default = default
        self.name = ""

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    def initial(self) -> Any:
        value = self.default() if callable(self.default) else self.default
        return copy.deepcopy(value)

    def __get__(self, instance: Actor | None, owner: type | None = None) -> Any:
        if instance is None:
            return self
        state = instance._state
        if self.name not in state:
            state[self.name] = self.initial()
        return state[self.name]

    def __set__(self, instance: Actor, value: Any) -> None:
        instance._state[self.name] = value


@dataclass(frozen=True)
class Operation:
    name: str
    function: Callable[..., Any]
    is_query: bool = False
    signature: inspect.Signature | None = None

    def bind(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
        """Positional and keyword arguments as the stored keyword dict (validated)."""
        signature = self.signature or inspect.signature(self.function)
        try:
            bound = signature.bind(None, *args, **kwargs)
        except TypeError as exc:
            raise TypeError(f"{self.name}(): {exc}") from None
        arguments = dict(bound.arguments)
        arguments.pop(next(iter(signature.parameters)), None)  # self
        for name, param in signature.parameters.items():
            if param.kind is inspect.Parameter.VAR_KEYWORD and name in arguments:
                arguments.update(arguments.pop(name))
            elif param.kind is inspect.Parameter.VAR_POSITIONAL and name in arguments:
                if arguments[name]:
                    raise TypeError(f"{self.name}(): *{name} cannot be stored as keywords")
                arguments.pop(name)
        return arguments


def query(function: Callable[..., Any]) -> Callable[..., Any]:
    """Mark a read-only operation: ordered through the mailbox, state never written."""
    function.__solid_query__ = True  # type: ignore[attr-defined]
    return function


@dataclass
class ObservableSpec:
    name: str
    function: Callable[..., Any]
    broadcast: str = "invalidate"


class observable:
    """``@observable`` or ``@observable(broadcast="value")``: a value live pages follow."""

    def __init__(
        self, function: Callable[..., Any] | None = None, *, broadcast: str = "invalidate"
    ) -> None:
        if broadcast not in ("invalidate", "value"):
            raise ValueError('observable broadcast must be "invalidate" or "value"')
        self.broadcast = broadcast
        self.function = function
        self.name = getattr(function, "__name__", "")

    def __call__(self, function: Callable[..., Any]) -> observable:
        self.function = function
        self.name = function.__name__
        return self

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    def __get__(self, instance: Actor | None, owner: type | None = None) -> Any:
        if instance is None:
            return self
        assert self.function is not None
        return self.function.__get__(instance, owner)

    def spec(self) -> ObservableSpec:
        assert self.function is not None
        return ObservableSpec(self.name, self.function, self.broadcast)


class migrate_state:
    """``@migrate_state(1, 2)`` on a function ``state -> state`` (no ``self``)."""

    def __init__(self, from_version: int, to_version: int) -> None:
        if to_version != from_version + 1 or from_version < 1:
            raise ValueError("migrate_state upgrades one version at a time: (n, n + 1)")
        self.from_version = from_version
        self.to_version = to_version
        self.function: Callable[[dict[str, Any]], dict[str, Any]] | None = None

    def __call__(self, function: Callable[[dict[str, Any]], dict[str, Any]]) -> migrate_state:
        self.function = function
        return self


@dataclass
class ActorSpec:
    """What the runtime needs to know about one actor class, computed once."""

    actor_type: str
    cls: type[Actor]
    operations: dict[str, Operation] = field(default_factory=dict)
    attributes: dict[str, attribute] = field(default_factory=dict)
    observables: dict[str, ObservableSpec] = field(default_factory=dict)
    migrations: dict[int, Callable[[dict[str, Any]], dict[str, Any]]] = field(default_factory=dict)

    def operation(self, name: str) -> Operation:
        try:
            return self.operations[name]
        except KeyError:
            raise UnknownOperation(
                f"{self.actor_type!r} has no operation {name!r}", name=name
            ) from None


class Actor:
    """Base class of durable actors. See ``docs/actors.md``."""

    actor_type: ClassVar[str] = ""
    state_version: ClassVar[int] = 1
    instance_retention: ClassVar[timedelta | None] = None
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
    def ref(cls, actor_id: str) -> ActorReference:
        from .references import ActorReference

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
        self, ref: ActorReference, available_at: Any = None, idempotency_key: str | None = None
    ) -> Any:
        return self._require_context().send_to(ref, available_at, idempotency_key)

    def schedule(
        self,
        at: Any = None,
        delay: Any = None,
        every: Any = None,
        missed: str = "latest",
        key: str | None = None,
    ) -> Any:
        return self._require_context().schedule(at, delay, every, missed, key)

    def unschedule(self, op: str | Callable[..., Any], key: str | None = None) -> None:
        self._require_context().unschedule(op, key)

    def commit_action(self, name: str, /, **arguments: Any) -> None:
        self._require_context().commit_action(name, arguments)

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
                spec.attributes[name] = value
            elif isinstance(value, observable):
                spec.observables[name] = value.spec()
                spec.operations[name] = Operation(
                    name,
                    value.function,
                    True,
                    inspect.signature(value.function),  # type: ignore[arg-type]
                )
            elif isinstance(value, migrate_state):
                assert value.function is not None
                spec.migrations[value.from_version] = value.function
            elif not name.startswith("_") and name not in _BASE_NAMES and inspect.isfunction(value):
                if name in RESERVED_OPERATION_NAMES:
                    raise TypeError(f"{cls.__name__}.{name}: {name!r} is reserved")
                spec.operations[name] = Operation(
                    name, value, getattr(value, "__solid_query__", False), inspect.signature(value)
                )
    clash = set(spec.attributes) & set(spec.operations)
    if clash:
        raise TypeError(f"{cls.__name__}: attributes clash with methods: {sorted(clash)}")
    for version in range(1, cls.state_version):
        if version not in spec.migrations:
            raise TypeError(
                f"{cls.__name__}: state_version is {cls.state_version} but there is no "
                f"@migrate_state({version}, {version + 1})"
            )
    return spec
