"""Without ``pgbouncer`` the PgBouncer tests fail (never skip) and say how to install it."""

from __future__ import annotations

import pytest

from tests.support import pgbouncer


def test_a_missing_pgbouncer_fails_with_the_command_that_installs_it(monkeypatch, tmp_path):
    monkeypatch.setattr(pgbouncer, "SEARCH_PATH", str(tmp_path))
    with pytest.raises(pgbouncer.PgBouncerMissing, match="`make sysdeps` installs it"):
        pgbouncer.pgbouncer_binary()
    assert issubclass(pgbouncer.PgBouncerMissing, AssertionError)  # a failure, not a skip
