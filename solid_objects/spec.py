"""What the runtime knows about an actor class: its spec, operations and declared state.

:class:`ActorSpec` is computed once per :class:`~solid_objects.actor.Actor` subclass from the
descriptors declared here (:class:`attribute`, :func:`query`, :class:`observable`,
:class:`migrate_state`). Everything below the user's base class (the mailbox, turns,
activations, the fenced commit) depends on this module, never on ``actor.py``.
"""

from __future__ import annotations

import copy
import inspect
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, ClassVar, Generic, Protocol, TypeVar, overload

from .conf import get_settings
from .errors import StateMigrationError, UnknownOperation
from .retry_policy import RetryPolicy

REJECTION_CODE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*\Z")

#: Names a reference (``ref.<name>``, ``ref.aio.<name>``) answers itself; an operation
#: may not take them (refused when the class is defined).
RESERVED_OPERATION_NAMES = frozenset(
    {
        "actor_id",
        "actor_type",
        "aio",
        "destroy",
        "enqueue",
        "find_message",
        "ref",
        "reference",
        "snapshot",
        "spec",
        "sync",
    }
)
#: Names a snapshot (``snap.<name>``) answers itself; a state attribute may not take them.
RESERVED_ATTRIBUTE_NAMES = frozenset(
    {"actor_id", "exists", "instance_id", "revision", "state", "state_version"}
)

T = TypeVar("T")
F = TypeVar("F", bound=Callable[..., Any])


class ActorInstance(Protocol):
    """An actor object as the runtime sees it (an :class:`~solid_objects.actor.Actor`)."""

    state_version: ClassVar[int]
    actor_id: str
    _state: dict[str, Any]
    #: The running turn's ``TurnContext`` (``None`` between turns); ``turn.py`` sets it and is
    #: above this layer, hence ``Any`` here.
    _context: Any

    def __init__(
        self, actor_id: str, state: dict[str, Any] | None = None, context: Any = None
    ) -> None: ...

    def on_activate(self) -> None: ...

    def on_deactivate(self) -> None: ...


class ActorAddress:
    """One actor of one type. :class:`~solid_objects.references.ActorReference` is one; the
    layers below the references (turns staging a message) recognise it by this base."""

    __slots__ = ()
    spec: ActorSpec
    actor_id: str

    @property
    def actor_type(self) -> str:
        return self.spec.actor_type


class attribute(Generic[T]):
    """A persisted field of the actor's JSON state.

    Typed from its default (``attribute(default=0)`` is an ``int``), or explicitly:
    ``attribute[list[str]](default=list)``; a callable default (``list``) or ``None`` gives
    ``Any`` unless the type is written.
    """

    @overload
    def __init__(self: attribute[Any], default: Callable[[], Any]) -> None: ...

    @overload
    def __init__(self, default: T) -> None: ...

    @overload
    def __init__(self: attribute[Any], default: None = None) -> None: ...

    def __init__(self, default: Any = None) -> None:
        self.default = default
        self.name = ""

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    def initial(self) -> Any:
        value = self.default() if callable(self.default) else self.default
        return copy.deepcopy(value)

    @overload
    def __get__(self, instance: None, owner: type | None = None) -> attribute[T]: ...

    @overload
    def __get__(self, instance: object, owner: type | None = None) -> T: ...

    def __get__(self, instance: Any, owner: type | None = None) -> Any:
        if instance is None:
            return self
        state = instance._state
        if self.name not in state:
            state[self.name] = self.initial()
        return state[self.name]

    def __set__(self, instance: Any, value: T) -> None:
        instance._state[self.name] = value


@dataclass(frozen=True)
class Operation:
    name: str
    function: Callable[..., Any]
    is_query: bool = False
    signature: inspect.Signature | None = None
    #: ``@retry(...)`` on the method: its own ``max_attempts`` / ``retry_delay``.
    retry: RetryPolicy | None = None

    def bind(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
        """Positional and keyword arguments as the stored keyword dict (validated)."""
        keywords = self._keywords
        if keywords is not None:
            # Plain parameters (no *args, **kwargs or positional-only ones): what
            # Signature.bind gives, without building a BoundArguments per call; anything
            # else (a missing, unknown or repeated argument, too many positional ones)
            # takes the full path for its error.
            names, known, required, positional = keywords
            filled = names[: len(args)]  # the parameters the positional arguments fill
            if not args:
                given = kwargs
            elif len(args) <= positional and kwargs.keys().isdisjoint(filled):
                given = {**dict(zip(filled, args, strict=True)), **kwargs}
            else:
                given = None
            if given is not None and given.keys() <= known and required <= given.keys():
                return {name: given[name] for name in names if name in given}
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

    @cached_property
    def _keywords(self) -> tuple[tuple[str, ...], frozenset[str], frozenset[str], int] | None:
        """The parameters after ``self`` in order, all of them, the required ones and how
        many may be given by position, when every one of them can be passed by keyword (no
        ``*args``, ``**kwargs`` or positional-only parameter); ``None`` otherwise."""
        signature = self.signature or inspect.signature(self.function)
        parameters = list(signature.parameters.values())[1:]
        plain = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
        if not signature.parameters or any(p.kind not in plain for p in parameters):
            return None
        names = tuple(p.name for p in parameters)
        required = frozenset(p.name for p in parameters if p.default is inspect.Parameter.empty)
        positional = sum(1 for p in parameters if p.kind is inspect.Parameter.POSITIONAL_OR_KEYWORD)
        return names, frozenset(names), required, positional


def query(function: F) -> F:
    """Mark a read-only operation: ordered through the mailbox, state never written."""
    # A marker on the user's function, which its Callable type does not declare.
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

    def __get__(self, instance: ActorInstance | None, owner: type | None = None) -> Any:
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
    cls: type[ActorInstance]
    operations: dict[str, Operation] = field(default_factory=dict)
    attributes: dict[str, attribute[Any]] = field(default_factory=dict)
    observables: dict[str, ObservableSpec] = field(default_factory=dict)
    migrations: dict[int, Callable[[dict[str, Any]], dict[str, Any]]] = field(default_factory=dict)

    def operation(self, name: str) -> Operation:
        try:
            return self.operations[name]
        except KeyError:
            raise UnknownOperation(
                f"{self.actor_type!r} has no operation {name!r}", name=name
            ) from None

    def max_attempts(self, operation: str) -> int:
        """Attempts a message of ``operation`` gets (its ``@retry``, or ``MAX_ATTEMPTS``)."""
        found = self.operations.get(operation)
        if found is not None and found.retry is not None:
            return found.retry.attempts()
        return get_settings().MAX_ATTEMPTS

    def retry_delay(self, operation: str, attempt: int) -> float:
        """Seconds before the next attempt of a failed ``operation`` message."""
        found = self.operations.get(operation)
        if found is not None and found.retry is not None:
            return found.retry.delay(attempt)
        return get_settings().retry_delay(attempt)

    def migrate(self, state: dict[str, Any], version: int, actor_id: str) -> dict[str, Any]:
        """``state`` stored at ``version``, upgraded to the code's ``state_version`` one
        ``@migrate_state`` step at a time (activation and snapshots alike).

        :class:`StateMigrationError` when the stored version is newer than the code's, a
        step is missing, or a step raises.
        """
        target = self.cls.state_version
        what = f"{self.actor_type}/{actor_id}"
        if version > target:
            raise StateMigrationError(
                f"{what} has state version {version}, newer than the code's state_version {target}"
            )
        while version < target:
            step = self.migrations.get(version)
            if step is None:
                raise StateMigrationError(
                    f"{what}: no @migrate_state({version}, {version + 1}) to upgrade its state"
                )
            try:
                state = step(state)
            except Exception as exc:
                raise StateMigrationError(
                    f"migrating {what} state from version {version} failed: {exc}"
                ) from exc
            version += 1
        return state
