"""This process's runtime state, forgotten between tests.

Tables are emptied after every test, so a cached caller registration or a warm activation
would point at deleted rows; a test actor's handler blocked on an event must not outlive its
test either. :func:`reset_runtime_state` runs before and after every test (the autouse
fixture of ``tests/conftest.py``).
"""

from __future__ import annotations

from django.db import connections


def reset_runtime_state() -> None:
    """Forget the cached caller registrations and warm activations of every database alias,
    and release any handler of the test actors still blocked on an event."""
    from solid_objects.runtime.processes import callers
    from solid_objects.sync import caller_cache
    from tests.testapp.actors import core

    caller_cache.clear()
    for alias in connections:
        callers.forget(alias)
    for event in core.holds.values():
        event.set()  # never leave a handler thread blocked
    core.holds.clear()
    core.entered.clear()
