"""``short_transaction``: the library's own transactions behave as ``atomic()`` does (on
MySQL/MariaDB it ends by turning autocommit back on, one round trip fewer)."""

from __future__ import annotations

import pytest
from django.db import IntegrityError, connection, transaction

from solid_objects.db.transactions import short_transaction
from solid_objects.models import Instance
from tests.factories import InstanceFactory

pytestmark = pytest.mark.django_db(transaction=True)


def _count(actor_id: str) -> int:
    return Instance.objects.filter(actor_id=actor_id).count()


def test_commits_and_then_runs_on_commit_callbacks():
    ran: list[str] = []
    with short_transaction(connection.alias):
        InstanceFactory(actor_id="kept")
        transaction.on_commit(lambda: ran.append("hook"))
        assert ran == []
    assert ran == ["hook"]
    assert _count("kept") == 1
    assert connection.get_autocommit() and not connection.in_atomic_block


def test_an_exception_rolls_everything_back_and_drops_the_callbacks():
    ran: list[str] = []
    with pytest.raises(RuntimeError), short_transaction(connection.alias):
        InstanceFactory(actor_id="gone")
        transaction.on_commit(lambda: ran.append("hook"))
        raise RuntimeError("boom")
    assert ran == []
    assert _count("gone") == 0
    assert connection.get_autocommit() and not connection.in_atomic_block


def test_a_nested_atomic_block_is_a_savepoint():
    with short_transaction(connection.alias):
        InstanceFactory(actor_id="outer")
        with pytest.raises(RuntimeError), transaction.atomic():
            InstanceFactory(actor_id="inner")
            raise RuntimeError("inner only")
    assert (_count("outer"), _count("inner")) == (1, 0)


def test_a_caught_error_in_a_block_without_savepoint_rolls_back_like_atomic():
    InstanceFactory(actor_id="taken", actor_type="tests.counter")
    with short_transaction(connection.alias):
        InstanceFactory(actor_id="before")
        try:
            with transaction.atomic(savepoint=False):
                InstanceFactory(actor_id="taken", actor_type="tests.counter")
        except IntegrityError:
            pass
        assert connection.needs_rollback
    assert _count("before") == 0
    assert connection.get_autocommit() and not connection.needs_rollback


def test_inside_the_callers_transaction_it_is_a_savepoint():
    with pytest.raises(RuntimeError), transaction.atomic():
        InstanceFactory(actor_id="caller")
        with short_transaction(connection.alias):
            InstanceFactory(actor_id="nested")
        raise RuntimeError("the caller rolls back")
    assert (_count("caller"), _count("nested")) == (0, 0)


def test_begin_and_commit_go_through_djangos_transaction_logging(monkeypatch):
    """Statement counters wrap ``django.db.backends.base.base.debug_transaction`` (the
    benchmark's does): the COMMIT must be seen there like the BEGIN."""
    from django.db.backends.base import base

    seen: list[str] = []
    original = base.debug_transaction  # type: ignore[attr-defined]

    def recording(connection: object, sql: str) -> object:
        seen.append(sql)
        return original(connection, sql)

    monkeypatch.setattr(base, "debug_transaction", recording)
    with short_transaction(connection.alias):
        InstanceFactory(actor_id="logged")
    # (SQLite's BEGIN is a statement of its own, counted by the cursor wrappers.)
    assert seen == (["COMMIT"] if connection.vendor == "sqlite" else ["BEGIN", "COMMIT"])
