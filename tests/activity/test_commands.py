"""The three management commands."""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.db import connection

from tests.support.processes import Commands
from tests.testapp.projections import Ledger, OrderCounts
from tilttek_activity import record_activities, record_activity, wait_until_projected
from tilttek_activity.models import Checkpoint

from .factories import ActivityFactory

pytestmark = pytest.mark.django_db(transaction=True)


def run(*args: str) -> tuple[str, str]:
    out, err = StringIO(), StringIO()
    call_command(*args, stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


def test_catch_up_command(ledger: Ledger) -> None:
    made = record_activities(ActivityFactory.build_batch(3))
    out, _ = run("activity_catch_up", "--projection", Ledger.name, "--batch-size", "2")
    last = made[-1].entry.position
    assert f"{Ledger.name}: position {last}, 3 applied" in out
    assert Ledger.store.applied == [r.entry.position for r in made]
    with pytest.raises(CommandError, match="no projection named"):
        run("activity_catch_up", "--projection", "tests.activity.unknown")
    with pytest.raises(CommandError):
        run("activity_catch_up", "--batch-size", "0")


def test_rebuild_command_shows_progress(orders: OrderCounts) -> None:
    record_activities(ActivityFactory.build_batch(4, verb="order.placed"))
    call_command("activity_catch_up", projection=OrderCounts.name, stdout=StringIO())
    out, err = run(
        "activity_rebuild",
        OrderCounts.name,
        "--since",
        "2000-01-01",
        "--until",
        "2999-01-01T00:00:00Z",
    )
    assert f"{OrderCounts.name}: rebuilt from 4 entries" in out
    assert "\r" not in err  # not a terminal: no bar (tests/operations/test_progress_bars.py)
    with pytest.raises(CommandError, match="append-only"):
        run("activity_rebuild", Ledger.name)


def test_status_command(ledger: Ledger) -> None:
    _, b, c = (record_activity(**ActivityFactory()).entry for _ in range(3))
    with connection.cursor() as cursor:
        cursor.execute("DELETE FROM tilttek_activity_entry WHERE position = %s", [b.position])
    Checkpoint.objects.create(
        projection="tests.activity.gone", position=0, updated_at="2024-01-01T00:00Z"
    )
    out, _ = run("activity_status")
    assert f"journal head: {c.position}" in out
    start = Checkpoint.objects.get(projection=Ledger.name).position
    assert (
        f"{Ledger.name}: checkpoint {start}, lag {c.position - start}, open holes {b.position}"
        in out
    )
    assert "tests.activity.gone: checkpoint 0" in out and "not registered" in out
    assert f"{OrderCounts.name}: " in out


def test_follow_stops_gracefully_on_sigterm(ledger: Ledger, commands: Commands) -> None:
    process = commands.start(
        "activity_catch_up", "--follow", "--projection", Ledger.name, log_level="WARNING"
    )
    position = record_activity(**ActivityFactory()).entry.position
    assert wait_until_projected(Ledger.name, position, timeout=60), commands.log(process)
    assert commands.terminate(process) == 0, commands.log(process)
    out = commands.log(process)
    assert f"{Ledger.name}: position {position}, 1 applied" in out
    assert out.rstrip().endswith("Stopped."), out
