"""A pytest plugin for projects that test their actors with pytest-django.

Enable it in your ``conftest.py``::

    pytest_plugins = ["solid_objects.pytest_plugin"]

It forgets this process's warm activations and caller registrations around every test (the
rows they point at are rolled back or flushed by then), and offers the ``solid_drain``
fixture: :func:`solid_objects.testing.drain` for a test that has database access::

    def test_checkout(solid_drain):
        cart = Cart.ref("a")
        cart.enqueue().add_item("hat")
        report = solid_drain()
        assert [turn[3] for turn in report.turns] == ["completed"]

Sync calls work without it too: inside the test's transaction they run the actor in the
same connection (see ``docs/testing.md``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest


@pytest.fixture(autouse=True)
def _solid_objects_fresh_runtime_state() -> Iterator[None]:
    from django.conf import settings

    if not settings.configured:  # a test run without Django: nothing to forget
        yield
        return
    from solid_objects.testing import reset_runtime_state

    reset_runtime_state()
    yield
    reset_runtime_state()


@pytest.fixture
def solid_drain(db: None) -> Callable[..., Any]:
    """:func:`solid_objects.testing.drain` (needs the ``db`` fixture, which it requests)."""
    from solid_objects.testing import drain

    return drain
