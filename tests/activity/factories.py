"""factory-boy factories for the activity journal.

``ActivityFactory`` builds the keyword arguments of ``record_activity`` (a dict), so the same
data feeds the single and the bulk writer::

    record_activity(**ActivityFactory())
    record_activities(ActivityFactory.build_batch(20, verb="order.paid"))

``EntryFactory`` writes ``tilttek_activity_entry`` rows directly through the ORM, bypassing
the writer (hand-made rows, holes, corrupt data set up with raw SQL afterwards).
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

import factory
from django.contrib.auth import get_user_model
from factory.django import DjangoModelFactory

from tilttek_activity.models import Entry


def _now() -> datetime:
    return datetime.now(UTC).replace(microsecond=0)


class ActivityFactory(factory.DictFactory):
    member = factory.Sequence(lambda n: f"auth.user:{n}")
    verb = "order.placed"
    object = factory.Sequence(lambda n: f"shop.order:{n}")
    quantity = 1
    context = factory.Dict({"total": "19.90"})
    idempotency_key = factory.LazyFunction(lambda: f"test:{uuid.uuid4()}")


class EntryFactory(DjangoModelFactory):
    class Meta:
        model = Entry

    kind = "recorded"
    idempotency_key = factory.LazyFunction(lambda: f"row:{uuid.uuid4()}")
    member = factory.Sequence(lambda n: f"auth.user:{n}")
    verb = "order.placed"
    object = None
    quantity = 1
    context = factory.Dict({})
    occurred_at = factory.LazyFunction(_now)
    recorded_at = factory.LazyFunction(_now)


class UserFactory(DjangoModelFactory):
    class Meta:
        model = get_user_model()
        django_get_or_create = ("username",)

    username = factory.Sequence(lambda n: f"member{n}")
