"""Fixtures of the activity journal tests."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from django.db import connections

from tests.support.statements import without_transaction_control as statements
from tests.testapp.projections import Ledger, OrderCounts
from tilttek_activity import hole_skipped
from tilttek_activity.gaps import tracker
from tilttek_activity.models import Checkpoint

__all__ = ["in_thread", "statements"]


@pytest.fixture
def activity_settings(settings: Any) -> Callable[..., dict[str, Any]]:
    """Override some ``TILTTEK_ACTIVITY`` keys for one test."""

    def override(**values: Any) -> dict[str, Any]:
        settings.TILTTEK_ACTIVITY = {**(getattr(settings, "TILTTEK_ACTIVITY", {}) or {}), **values}
        return settings.TILTTEK_ACTIVITY

    return override


def start_at_head(name: str) -> int:
    """Put projection ``name``'s checkpoint at the journal's head, so the test only sees its
    own entries. The head is a fresh marker entry: the journal may be empty while positions
    go on from where earlier tests left them."""
    from tilttek_activity import record_activity

    position = record_activity("tests:fixture", "tests.start").entry.position
    Checkpoint.objects.update_or_create(
        projection=name, defaults={"position": position, "updated_at": "2000-01-01T00:00Z"}
    )
    return position


@pytest.fixture
def ledger(transactional_db: None) -> Iterator[Ledger]:
    """The ledger projection, starting at the journal's head with an empty store."""
    from tilttek_activity.projections import registry

    projection = registry.get(Ledger.name)
    assert isinstance(projection, Ledger)
    Ledger.store.clear()
    start_at_head(Ledger.name)
    yield projection
    Ledger.store.clear()


@pytest.fixture
def orders(transactional_db: None) -> Iterator[OrderCounts]:
    from tilttek_activity.projections import registry

    projection = registry.get(OrderCounts.name)
    assert isinstance(projection, OrderCounts)
    OrderCounts.store.clear()
    start_at_head(OrderCounts.name)
    yield projection
    OrderCounts.store.clear()


@pytest.fixture
def skipped_holes() -> Iterator[list[dict[str, Any]]]:
    """Every ``hole_skipped`` signal sent during the test."""
    received: list[dict[str, Any]] = []
    lock = threading.Lock()

    def receiver(sender: Any, **kwargs: Any) -> None:
        with lock:
            received.append(kwargs)

    hole_skipped.connect(receiver, weak=False)
    yield received
    hole_skipped.disconnect(receiver)


@pytest.fixture(autouse=True)
def _fresh_gap_observations() -> Iterator[None]:
    tracker.clear()
    yield
    tracker.clear()


def in_thread(target: Callable[[], Any]) -> tuple[threading.Thread, list[BaseException]]:
    """Run ``target`` in a thread with its own database connection (closed at the end);
    exceptions are collected in the returned list."""
    errors: list[BaseException] = []

    def run() -> None:
        try:
            target()
        except BaseException as exc:  # reported by the test
            errors.append(exc)
        finally:
            connections.close_all()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, errors
