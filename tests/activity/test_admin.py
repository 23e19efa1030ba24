"""The admin: a read-only journal, checkpoints with lag and a rebuild action."""

from __future__ import annotations

from typing import Any

import pytest
from django.urls import reverse

from tests.testapp.projections import OrderCounts
from tilttek_activity import catch_up, record_activities, record_activity
from tilttek_activity.models import Checkpoint

pytestmark = pytest.mark.django_db


def test_entry_changelist_filters_and_searches(admin_client: Any) -> None:
    record_activities(
        [
            {"member": "auth.user:1", "verb": "order.placed", "object": "shop.order:1"},
            {"member": "auth.user:2", "verb": "Order.placed", "object": "shop.order:2"},
            {"member": "auth.user:3", "verb": "page.viewed", "idempotency_key": "page:3"},
        ]
    )
    url = reverse("admin:tilttek_activity_entry_changelist")
    page = admin_client.get(url)
    assert page.status_code == 200
    assert page.context["cl"].result_count == 3
    assert list(page.context["cl"].queryset.values_list("position", flat=True)) == sorted(
        page.context["cl"].queryset.values_list("position", flat=True), reverse=True
    )

    def verbs(**params: str) -> list[str]:
        response = admin_client.get(url, params)
        assert response.status_code == 200
        return sorted(entry.verb for entry in response.context["cl"].result_list)

    assert verbs(verb_prefix="order.") == ["order.placed"]
    assert verbs(verb_prefix="Order.") == ["Order.placed"]
    assert verbs(verb_prefix="a_b.") == []
    assert verbs(q="auth.user:2") == ["Order.placed"]
    assert verbs(q="shop.order:1") == ["order.placed"]
    assert verbs(kind__exact="cancelled") == []
    assert verbs(occurred_at__gte="2000-01-01 00:00:00+00:00") == [
        "Order.placed",
        "order.placed",
        "page.viewed",
    ]


def test_entries_are_read_only(admin_client: Any) -> None:
    entry = record_activity("auth.user:1", "order.placed", context={"total": "1.00"}).entry
    assert admin_client.get(reverse("admin:tilttek_activity_entry_add")).status_code == 403
    change = admin_client.get(reverse("admin:tilttek_activity_entry_change", args=[entry.position]))
    assert change.status_code == 200
    assert b'name="_save"' not in change.content  # a view-only page
    assert b"&quot;total&quot;: &quot;1.00&quot;" in change.content
    delete = reverse("admin:tilttek_activity_entry_delete", args=[entry.position])
    assert admin_client.post(delete, {"post": "yes"}).status_code == 403


@pytest.mark.django_db(transaction=True)
def test_checkpoints_show_lag_and_rebuild(admin_client: Any, orders: OrderCounts) -> None:
    record_activities([{"member": "auth.user:1", "verb": "order.placed"}] * 1)
    catch_up(OrderCounts.name)
    record_activity("auth.user:1", "order.paid")
    url = reverse("admin:tilttek_activity_checkpoint_changelist")
    page = admin_client.get(url)
    assert page.status_code == 200
    row = next(c for c in page.context["cl"].result_list if c.projection == OrderCounts.name)
    assert row.lag_positions == 1
    assert b"lag (positions)" in page.content.lower()
    response = admin_client.post(
        url,
        {"action": "rebuild_projections", "_selected_action": [OrderCounts.name]},
        follow=True,
    )
    assert response.status_code == 200
    messages = [str(m) for m in response.context["messages"]]
    assert f"{OrderCounts.name}: rebuilt from 1 entries" in messages
    assert admin_client.get(reverse("admin:tilttek_activity_checkpoint_add")).status_code == 403
    assert Checkpoint.objects.filter(projection=OrderCounts.name).exists()
