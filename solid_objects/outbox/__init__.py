"""The effect outbox: effects emitted by committed turns and actor-to-actor messages.

See ``docs/effects.md``. Importing this package does not import models.
"""

from .effects import (
    EffectContext,
    EffectRole,
    UnknownEffect,
    retry_dead_effect,
    run_pending_effects,
)

__all__ = [
    "EffectContext",
    "EffectRole",
    "UnknownEffect",
    "retry_dead_effect",
    "run_pending_effects",
]
