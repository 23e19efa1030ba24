"""Retry policies of one operation or one effect: ``max_attempts`` and ``retry_delay``
instead of the ``MAX_ATTEMPTS`` / ``RETRY_DELAY`` settings.

    class Payments(Actor):
        @retry(max_attempts=10, retry_delay=30)         # seconds, or a callable of the attempt
        def settle(self, batch: str) -> None: ...

    @solid_objects.effect("mail.send", max_attempts=3, retry_delay=lambda attempt: 5 * attempt)
    def send(arguments, context): ...

A message's or effect's ``max_attempts`` is fixed on its row when it is written (as the
setting is); the delay is asked when an attempt fails.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from .conf import get_settings

F = TypeVar("F", bound=Callable[..., Any])

#: The attribute :func:`retry` sets on an operation's function.
ATTRIBUTE = "__solid_retry__"


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """``None`` fields fall back to the settings."""

    max_attempts: int | None = None
    retry_delay: Callable[[int], float] | None = None

    def attempts(self) -> int:
        return self.max_attempts if self.max_attempts is not None else get_settings().MAX_ATTEMPTS

    def delay(self, attempt: int) -> float:
        if self.retry_delay is None:
            return get_settings().retry_delay(attempt)
        return float(self.retry_delay(attempt))


def policy(max_attempts: Any = None, retry_delay: Any = None) -> RetryPolicy | None:
    """A checked policy (``TypeError`` / ``ValueError`` naming the bad value), or ``None``
    when both are left to the settings. ``retry_delay`` is seconds (a non-negative number)
    or a callable ``attempt -> seconds``."""
    if max_attempts is not None and (
        isinstance(max_attempts, bool) or not isinstance(max_attempts, int) or max_attempts < 1
    ):
        raise ValueError(f"max_attempts must be a positive integer, got {max_attempts!r}")
    delay: Callable[[int], float] | None
    if retry_delay is None or callable(retry_delay):
        delay = retry_delay
    elif isinstance(retry_delay, int | float) and not isinstance(retry_delay, bool):
        seconds = float(retry_delay)
        if not 0 <= seconds < float("inf"):
            raise ValueError(f"retry_delay must be finite seconds >= 0, got {retry_delay!r}")
        delay = _Constant(seconds)
    else:
        raise TypeError(f"retry_delay must be seconds or a callable, got {retry_delay!r}")
    if max_attempts is None and delay is None:
        return None
    return RetryPolicy(max_attempts, delay)


@dataclass(frozen=True, slots=True)
class _Constant:
    seconds: float

    def __call__(self, attempt: int) -> float:
        return self.seconds


def retry(*, max_attempts: int | None = None, retry_delay: Any = None) -> Callable[[F], F]:
    """``@retry(max_attempts=..., retry_delay=...)`` on an actor operation."""
    checked = policy(max_attempts, retry_delay)

    def decorator(function: F) -> F:
        setattr(function, ATTRIBUTE, checked)
        return function

    return decorator


def of(function: Any) -> RetryPolicy | None:
    """The policy :func:`retry` put on ``function``, if any."""
    found = getattr(function, ATTRIBUTE, None)
    return found if isinstance(found, RetryPolicy) else None
