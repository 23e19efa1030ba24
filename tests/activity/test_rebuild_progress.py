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
