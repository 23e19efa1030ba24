"""``activity_rebuild`` draws its bar in place on a real terminal (a pseudo-terminal)."""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import call_command

from tests.support.terminal import RED, run_on_terminal
from tests.testapp.projections import OrderCounts
from tilttek_activity import record_activities

from .factories import ActivityFactory

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]


def test_rebuild_draws_a_bar_on_a_terminal(orders: OrderCounts):
    record_activities(ActivityFactory.build_batch(6, verb="order.placed"))
    call_command("activity_catch_up", projection=OrderCounts.name, stdout=StringIO())
    code, output = run_on_terminal(
        "activity_rebuild", OrderCounts.name, "--since", "2000-01-01", "--until", "2999-01-01"
    )
    assert code == 0, output
    assert RED not in output
    assert "6/6" in output and "\r" in output
    assert f"{OrderCounts.name}: rebuilt from 6 entries" in output


def test_catch_up_draws_a_bar_per_projection_on_a_terminal(orders: OrderCounts):
    record_activities(ActivityFactory.build_batch(5, verb="order.placed"))
    code, output = run_on_terminal("activity_catch_up", "--projection", OrderCounts.name)
    assert code == 0, output
    assert RED not in output
    assert "5/5" in output and "\r" in output
    assert f"{OrderCounts.name}: position" in output


def test_catch_up_reports_positions_from_the_checkpoint_to_the_head(orders: OrderCounts):
    from tilttek_activity import catch_up

    record_activities(ActivityFactory.build_batch(3, verb="order.placed"))
    catch_up(OrderCounts.name)
    record_activities(ActivityFactory.build_batch(4, verb="order.placed"))
    seen: list[tuple[str, int, int]] = []
    catch_up(OrderCounts.name, batch_size=2, progress=lambda *report: seen.append(report))
    assert seen[0] == (OrderCounts.name, 0, 4)
    assert seen[-1] == (OrderCounts.name, 4, 4)
    assert [done for _, done, _ in seen] == sorted(done for _, done, _ in seen)
