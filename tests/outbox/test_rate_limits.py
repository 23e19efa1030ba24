"""``@effect(name, rate="2/s")``: the attempts of one effect name are paced across every
worker by slots held in the database; an effect whose slot is far off is handed back
without an attempt counted."""

from __future__ import annotations

import itertools
from datetime import timedelta

import pytest
from django.db import connection, transaction
from django.utils import timezone

import solid_objects
from solid_objects import payloads
from solid_objects.db.rate_limits import create, take_slot
from solid_objects.db.vendors import dialect_for
from solid_objects.models import Effect
from solid_objects.outbox.effects import run_pending_effects
from tests.runtime.helpers import start_thread
from tests.support.waiting import wait_until
from tests.testapp.actors import rate_limited
from tests.testapp.actors.policies import Hanger

pytestmark = pytest.mark.django_db(transaction=True)

#: Workers that poll often, so the paced effects are claimed as soon as they are due.
FAST = {"POLLING_INTERVAL": 0.05, "IDLE_POLLING_INTERVAL": 0.1}


def test_slots_are_taken_in_turn_and_a_far_one_is_not_taken():
    dialect = dialect_for(connection)
    results = []
    with transaction.atomic(), connection.cursor() as cursor:
        assert take_slot(cursor, dialect, "tests.slots", 0.6, 1.0) is None  # no row yet
        create(cursor, dialect, "tests.slots")
    for _ in range(3):
        with transaction.atomic(), connection.cursor() as cursor:
            results.append(take_slot(cursor, dialect, "tests.slots", 0.6, 1.0))
    (first, wait1, slot1), (second, wait2, slot2), (third, wait3, _) = results
    assert first and wait1 == 0
    assert second and 0.3 < wait2 <= 0.6
    assert slot2 - slot1 == timedelta(seconds=0.6)
    assert not third and wait3 > 1.0  # two slots ahead: not taken


def test_workers_share_one_rate(solid_settings):
    rate_limited.starts.clear()
    for n in range(6):
        Hanger.ref(f"paced-{n}").start("tests.rate.paced")

    def done() -> bool:
        return Effect.objects.filter(name="tests.rate.paced", status="completed").count() == 6

    def work() -> None:
        wait_until(lambda: run_pending_effects() >= 0 and done(), what="the paced effects")

    threads = [start_thread(work, name=f"effects-{n}") for n in range(3)]
    for thread in threads:
        thread.outcome()
    starts = sorted(rate_limited.starts)
    assert len(starts) == 6
    gaps = [b - a for a, b in itertools.pairwise(starts)]
    assert min(gaps) >= 0.4, gaps  # 2/s for the three workers together
    # Handing an effect back never counted an attempt.
    assert set(Effect.objects.values_list("attempt_count", flat=True)) == {1}


def test_worker_processes_share_one_rate(commands):
    """Two real effect workers (two threads each) pace one effect name together."""
    for n in range(6):
        Hanger.ref(f"clocked-{n}").start("tests.rate.paced_clock")
    for _ in range(2):
        commands.start("run_effect_worker", "--threads", "2", settings=FAST)
    wait_until(
        lambda: (
            Effect.objects.filter(name="tests.rate.paced_clock", status="completed").count() == 6
        ),
        what="the paced effects run by the workers",
    )
    starts = sorted(
        float(payloads.decode(result)) if isinstance(result, str) else float(result)
        for result in Effect.objects.filter(name="tests.rate.paced_clock").values_list(
            "result", flat=True
        )
    )
    gaps = [b - a for a, b in itertools.pairwise(starts)]
    assert min(gaps) >= 0.4, gaps  # 2/s for the four threads of both processes together
    assert set(
        Effect.objects.filter(name="tests.rate.paced_clock").values_list("attempt_count", flat=True)
    ) == {1}


def test_an_effect_without_a_near_slot_is_handed_back_uncounted():
    Hanger.ref("hourly-1").start("tests.rate.hourly")
    Hanger.ref("hourly-2").start("tests.rate.hourly")
    assert run_pending_effects() == 2  # one attempt ran, one was handed back
    rows = list(Effect.objects.filter(name="tests.rate.hourly").order_by("id"))
    assert [(row.status, row.attempt_count) for row in rows] == [
        ("completed", 1),
        ("pending", 0),
    ]
    assert rows[1].claimed_by_id is None
    assert rows[1].available_at > timezone.now() + timedelta(minutes=50)


@pytest.mark.parametrize(
    ("rate", "error"),
    [("10/x", ValueError), ("0/s", ValueError), ("fast", ValueError), (5, TypeError)],
)
def test_bad_rates_are_refused_when_declared(rate, error):
    with pytest.raises(error):
        solid_objects.effect("tests.rate.never", rate=rate)
