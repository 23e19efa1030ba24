"""Registries: actor types, effect handlers and commit actions.

Actor types resolve only through this registry, never by importing a name supplied from
outside. ``AppConfig.ready`` autodiscovers an ``actors`` module in every installed app.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from django.core.exceptions import ImproperlyConfigured
from django.utils.module_loading import autodiscover_modules

from .actor import Actor, ActorSpec
from .errors import UnknownActorType

A = TypeVar("A", bound=type[Actor])
F = TypeVar("F", bound=Callable[..., Any])

_actors: dict[str, ActorSpec] = {}
_effects: dict[str, Callable[..., Any]] = {}
_commit_actions: dict[str, Callable[..., Any]] = {}


def register(cls: A) -> A:
    """Register an actor class (also usable as a class decorator). Idempotent per class."""
    if not (isinstance(cls, type) and issubclass(cls, Actor)) or cls is Actor:
        raise TypeError(f"{cls!r} is not an Actor subclass")
    spec = cls._spec
    existing = _actors.get(spec.actor_type)
    # Re-importing a module (autoreload, tests) re-creates the class: same qualified name.
    if existing is not None and _qualname(existing.cls) != _qualname(cls):
        raise ImproperlyConfigured(
            f"duplicate actor type {spec.actor_type!r}: {_qualname(existing.cls)} and "
            f"{_qualname(cls)}"
        )
    _actors[spec.actor_type] = spec
    return cls


def unregister(actor_type: str) -> None:
    _actors.pop(actor_type, None)


def get_spec(actor_type: str) -> ActorSpec:
    try:
        return _actors[actor_type]
    except (KeyError, TypeError):
        raise UnknownActorType(f"no actor type {actor_type!r} is registered") from None


def actor_types() -> dict[str, ActorSpec]:
    return dict(_actors)


def effect(name: str) -> Callable[[F], F]:
    """``@solid_objects.effect("payments.charge")`` registers ``handler(arguments, context)``."""

    def decorator(function: F) -> F:
        _effects[name] = function
        return function

    return decorator


def get_effect(name: str) -> Callable[..., Any] | None:
    return _effects.get(name)


def commit_action(name: str) -> Callable[[F], F]:
    """``@solid_objects.commit_action(name)``: ``fn(arguments, context)`` runs in the commit."""

    def decorator(function: F) -> F:
        _commit_actions[name] = function
        return function

    return decorator


def get_commit_action(name: str) -> Callable[..., Any] | None:
    return _commit_actions.get(name)


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


def _qualname(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"
