"""The recipes of docs/testing.md and docs/reminders.md, run as a user's tests would run them:
pytest-django's plain ``db`` and django.test.TestCase, no ``transaction=True``."""

from __future__ import annotations

from datetime import timedelta

import pytest
from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.test import TestCase, override_settings
from django.utils import timezone

from solid_objects import Rejected
from solid_objects.channels_groups import group_name
from solid_objects.testing import SolidObjectsTestMixin, drain, run_due_reminders
from tests.testapp.actors.broadcasts import Board
from tests.testapp.actors.recipes import ShoppingCart
from tests.testing.layers import IN_MEMORY


@pytest.mark.django_db
def test_reminders_recipe():
    cart = ShoppingCart.ref("alice")
    cart.add_item("shirt")

    assert run_due_reminders() == 0  # nothing due yet
    assert run_due_reminders(at=timezone.now() + timedelta(days=3)) == 1
    assert cart.snapshot().status == "open"  # the expire message is enqueued, not yet run
    with pytest.raises(Rejected):  # a sync call runs the earlier expire turn first
        cart.add_item("hat")
    assert cart.snapshot().status == "expired"


def test_pytest_recipe(db):
    cart = ShoppingCart.ref("a")
    assert cart.add_item("shirt") == 1  # sync calls work inside the test's transaction
    cart.enqueue().add_item("hat", quantity=2)
    cart.enqueue().checkout()
    report = drain()  # the two turns, the effect, its on_success callback
    assert [turn[3] for turn in report.turns] == ["completed"] * 3
    assert report.effects == 1
    assert cart.total_quantity() == 3
    assert cart.snapshot().status == "paid"


def test_pytest_plugin_fixture(solid_drain):
    cart = ShoppingCart.ref("b")
    cart.enqueue().add_item("sock")
    assert len(solid_drain().turns) == 1


def test_test_clock_recipe(db):
    cart = ShoppingCart.ref("c")
    cart.add_item("shirt")
    drain(at=timezone.now() + timedelta(days=3))  # the abandonment reminder and its turn
    assert cart.snapshot().status == "expired"


@override_settings(CHANNEL_LAYERS=IN_MEMORY)
def test_broadcasts_recipe(db):
    layer = get_channel_layer()
    channel = async_to_sync(layer.new_channel)()
    async_to_sync(layer.group_add)(group_name("tests.board", "page"), channel)
    Board.ref("page").add("shirt")  # changes an @observable
    assert drain().broadcasts == 1  # one per changed observable
    message = async_to_sync(layer.receive)(channel)
    assert (message["observable"], message["value"]) == ("size", 1)


class CartTests(SolidObjectsTestMixin, TestCase):
    def test_checkout(self) -> None:
        cart = ShoppingCart.ref("d")
        self.assertEqual(cart.add_item("shirt"), 1)
        cart.checkout()
        self.drain()
        self.assertEqual(cart.snapshot().status, "paid")

    async def test_async_view_code(self) -> None:
        cart = ShoppingCart.ref("e")
        self.assertEqual(await cart.aio.add_item("shirt"), 1)
        self.assertEqual(await cart.aio.total_quantity(), 1)
