"""django.test.TestCase with SolidObjectsTestMixin: sync calls, awaited calls and drain()
inside the test's transaction; every test starts from scratch (nothing of a rolled-back test,
rows or warm activations, survives into the next)."""

from __future__ import annotations

from datetime import timedelta

from channels.layers import get_channel_layer
from django.test import TestCase, TransactionTestCase, override_settings
from django.utils import timezone

from solid_objects import Rejected
from solid_objects.models import Broadcast, Instance
from solid_objects.testing import SolidObjectsTestMixin
from tests.testapp.actors.broadcasts import Board
from tests.testapp.actors.core import Counter
from tests.testapp.actors.outbox import Alarm, Payer
from tests.testing.layers import IN_MEMORY, received, subscribe


class InsideTheTestTransaction(SolidObjectsTestMixin, TestCase):
    # Both tests add to the same actor: each must see a fresh one (SQLite reuses the rolled
    # back instance id, so a warm activation kept across tests would show the old state).
    def test_first(self) -> None:
        self.assertEqual(Counter.ref("same").add(1), 1)
        self.assertEqual(Counter.ref("same").add(1), 2)

    def test_second(self) -> None:
        self.assertEqual(Counter.ref("same").add(10), 10)

    def test_rejection(self) -> None:
        with self.assertRaises(Rejected):
            Counter.ref("r").refuse("closed")
        self.assertEqual(Counter.ref("r").total(), 0)

    def test_drain_with_effects_and_reminders(self) -> None:
        Payer.ref("p").pay("tests.async.echo", {"value": 3})
        Alarm.ref("a").set_alarm(delay=60, label="soon")
        report = self.drain(at=timezone.now() + timedelta(minutes=5))
        self.assertEqual((report.effects, report.reminders), (1, 1))
        self.assertEqual(Payer.ref("p").summary()["successes"][0]["result"]["echo"], 3)
        self.assertEqual([r["label"] for r in Alarm.ref("a").rang()], ["soon"])

    @override_settings(CHANNEL_LAYERS=IN_MEMORY)
    def test_drain_delivers_broadcasts(self) -> None:
        layer = get_channel_layer()
        channel = subscribe(layer, "tests.board", "tc")
        Board.ref("tc").add("shirt")
        queued = Board.ref("tc").enqueue().retitle("Shirts")
        report = self.drain()
        self.assertEqual(report.turns, [("tests.board", "tc", queued.id, "completed")])
        self.assertEqual(report.broadcasts, 2)
        messages = received(layer, channel, 2)
        self.assertEqual(
            [(m["observable"], m["value"], m["state_revision"]) for m in messages],
            [("size", 1, 1), ("title", {}, 2)],
        )
        self.assertFalse(Broadcast.objects.exclude(status="delivered").exists())

    async def test_async_method(self) -> None:
        cart = Counter.ref("async")
        self.assertEqual(await cart.aio.add(4), 4)
        message = await cart.aio.enqueue().add(1)
        self.assertEqual(await message.aresult(timeout=10), 5)
        self.assertEqual((await cart.aio.snapshot()).value, 5)


class OutsideATransaction(SolidObjectsTestMixin, TransactionTestCase):
    def test_commits_for_real(self) -> None:
        self.assertEqual(Counter.ref("tx").add(2), 2)
        Counter.ref("tx").enqueue().add(3)
        self.assertEqual(len(self.drain().turns), 1)
        self.assertEqual(Instance.objects.get(actor_id="tx").state, {"value": 5})
