"""Registries: actor types, effect handlers and commit actions.

Actor types resolve only through this registry, never by importing a name supplied from
outside. Discovery of ``actors`` modules lives with the base class
(:func:`solid_objects.actor.autodiscover`); this module knows only specs, so every layer may
look a type up.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any, TypeVar

from django.core.exceptions import ImproperlyConfigured

from .errors import ActorDefinitionError, UnknownActorType
from .retry_policy import RetryPolicy, policy
from .spec import ActorSpec

A = TypeVar("A", bound=type)
F = TypeVar("F", bound=Callable[..., Any])

_actors: dict[str, ActorSpec] = {}
_effects: dict[str, Callable[..., Any]] = {}
_effect_policies: dict[str, RetryPolicy] = {}
_effect_timeouts: dict[str, float] = {}
_effect_rates: dict[str, float] = {}
_commit_actions: dict[str, Callable[..., Any]] = {}


def register(cls: A) -> A:
    """Register an actor class (also usable as a class decorator). Idempotent per class."""
    # Every Actor subclass (never the base class itself) carries the spec built for it.
    spec = getattr(cls, "_spec", None) if isinstance(cls, type) else None
    if not isinstance(spec, ActorSpec) or spec.cls is not cls:
        raise TypeError(f"{cls!r} is not an Actor subclass")
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


def effect(
    name: str,
    *,
    max_attempts: int | None = None,
    retry_delay: Any = None,
    timeout: float | None = None,
    rate: str | None = None,
) -> Callable[[F], F]:
    """``@solid_objects.effect("payments.charge")`` registers ``handler(arguments, context)``;
    ``max_attempts`` and ``retry_delay`` (seconds or ``attempt -> seconds``) replace the
    ``MAX_ATTEMPTS`` / ``RETRY_DELAY`` settings for this effect; ``timeout`` (seconds)
    abandons an attempt that runs longer (it fails with ``EffectTimeout`` and is retried);
    ``rate`` (``"10/s"``, ``"100/m"``, ``"500/h"``) caps the attempts of this effect across
    every worker and host (the slots are held in the database)."""
    checked = policy(max_attempts, retry_delay)
    seconds = _timeout(timeout)
    interval = rate_interval(rate)

    def decorator(function: F) -> F:
        _effects[name] = function
        if checked is None:
            _effect_policies.pop(name, None)
        else:
            _effect_policies[name] = checked
        if seconds is None:
            _effect_timeouts.pop(name, None)
        else:
            _effect_timeouts[name] = seconds
        if interval is None:
            _effect_rates.pop(name, None)
        else:
            _effect_rates[name] = interval
        return function

    return decorator


def _timeout(value: Any) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(f"timeout must be seconds, got {value!r}")
    if not 0 < float(value) < float("inf"):
        raise ValueError(f"timeout must be positive finite seconds, got {value!r}")
    return float(value)


_PERIODS = {"s": 1.0, "m": 60.0, "h": 3600.0}


def rate_interval(rate: Any) -> float | None:
    """``"10/s"`` → 0.1 (seconds between two attempts); ``None`` for no limit."""
    if rate is None:
        return None
    if not isinstance(rate, str):
        raise TypeError(f'rate must be a string such as "10/s", got {rate!r}')
    count, _, period = rate.strip().partition("/")
    try:
        number = float(count)
    except ValueError:
        number = float("nan")
    if period not in _PERIODS or not 0 < number < float("inf"):
        raise ValueError(f'rate must look like "10/s", "100/m" or "500/h", got {rate!r}')
    return _PERIODS[period] / number


def effect_rate_interval(name: str) -> float | None:
    """Seconds between two attempts of the effect ``name`` (its ``rate``), or ``None``."""
    return _effect_rates.get(name)


def effect_timeout(name: str) -> float | None:
    """The ``timeout`` of the effect named ``name`` (``None``: none)."""
    return _effect_timeouts.get(name)


def effect_max_attempts(name: str) -> int:
    """Attempts an effect named ``name`` gets (its own policy, or ``MAX_ATTEMPTS``)."""
    return _effect_policies.get(name, RetryPolicy()).attempts()


def effect_retry_delay(name: str, attempt: int) -> float:
    """Seconds before the next attempt of a failed effect named ``name``."""
    return _effect_policies.get(name, RetryPolicy()).delay(attempt)


def get_effect(name: str) -> Callable[..., Any] | None:
    return _effects.get(name)


def commit_action(name: str) -> Callable[[F], F]:
    """``@solid_objects.commit_action(name)``: ``fn(arguments, context)`` runs in the commit."""

    def decorator(function: F) -> F:
        if inspect.iscoroutinefunction(function):
            raise ActorDefinitionError(
                f"commit action {name!r}: it runs inside the fenced commit and cannot be "
                "async (an async effect handler can be)"
            )
        _commit_actions[name] = function
        return function

    return decorator


def get_commit_action(name: str) -> Callable[..., Any] | None:
    return _commit_actions.get(name)


def _qualname(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"
