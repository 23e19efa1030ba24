"""Fixtures of the PgBouncer tests: a private PgBouncer in transaction-pooling mode (one per
module), and database aliases of this process that reach the test database through it.

The aliases are added to ``settings.DATABASES`` before the tests' databases are read (a
module fixture), as Django ``TEST["MIRROR"]``s of ``default``: the test runner creates no
database for them and flushes nothing through them (``default`` is flushed). A test that
uses them lists them in its ``django_db(databases=...)`` marker (:data:`ALIASES`).
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any

import pytest
from django.conf import settings
from django.db import connections

from tests.support.pgbouncer import PgBouncer

#: The test database through PgBouncer, configured as docs/scaling.md says.
POOLED = "pooled"
#: The same with server-side cursors left on (Django's default).
WITH_CURSORS = "pooled_cursors"
#: The same with server-side binding and prepared statements (every statement prepared).
PREPARED = "pooled_prepared"
ALIASES = ["default", POOLED, WITH_CURSORS, PREPARED]


def pooled_settings(bouncer: PgBouncer, **overrides: Any) -> dict[str, Any]:
    """The ``default`` alias's settings (the test database) pointed at PgBouncer, with what
    transaction pooling needs: no server-side cursors, client-side binding (Django's default:
    no prepared statements); persistent connections. ``overrides`` replace keys."""
    settings_dict = copy.deepcopy(connections["default"].settings_dict)
    options = dict(settings_dict.get("OPTIONS") or {})
    for key in ("server_side_binding", "prepare_threshold", "pool"):
        options.pop(key, None)
    settings_dict.update(
        HOST="127.0.0.1",
        PORT=bouncer.port,
        PASSWORD="",
        OPTIONS=options,
        DISABLE_SERVER_SIDE_CURSORS=True,
        CONN_MAX_AGE=60,
        CONN_HEALTH_CHECKS=True,
        TEST={**settings_dict.get("TEST", {}), "MIRROR": "default"},
    )
    settings_dict.update(overrides)
    return settings_dict


@pytest.fixture(scope="module")
def pgbouncer(
    django_db_setup: None, django_db_blocker: Any, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[PgBouncer]:
    """A running PgBouncer (``pool_mode = transaction``) in front of the test database's
    server, and the aliases of :data:`ALIASES` through it; all removed after the module."""
    with django_db_blocker.unblock():
        bouncer = PgBouncer(
            tmp_path_factory.mktemp("pgbouncer"), dict(connections["default"].settings_dict)
        )
        aliases = {
            POOLED: pooled_settings(bouncer),
            WITH_CURSORS: pooled_settings(bouncer, DISABLE_SERVER_SIDE_CURSORS=False),
            PREPARED: pooled_settings(
                bouncer,
                OPTIONS={"server_side_binding": True, "prepare_threshold": 0},
            ),
        }
        try:
            bouncer.start()
            settings.DATABASES.update(aliases)
            yield bouncer
        finally:
            for alias in aliases:
                if alias in settings.DATABASES:
                    connections[alias].close()
                    del connections[alias]
                    del settings.DATABASES[alias]
            bouncer.stop()


@pytest.fixture
def pooled(pgbouncer: PgBouncer) -> Iterator[str]:
    """The alias :data:`POOLED`; this thread's connections through PgBouncer are closed at
    the end of the test."""
    try:
        yield POOLED
    finally:
        for alias in (POOLED, WITH_CURSORS, PREPARED):
            connections[alias].close()
