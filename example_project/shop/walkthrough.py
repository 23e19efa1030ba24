"""A scripted visit of the example shop, used by the test suite (``tests/test_example_project``):
add to the cart, check out twice (one payment declined, one accepted), let the cart be
abandoned, log in, and check the cart, the page, the journal and the projection after each
step.

Run as ``python example_project/manage.py shell -c "from shop.walkthrough import main; main()"``.
"""

from __future__ import annotations

import re
from datetime import timedelta

from django.contrib.auth import get_user_model
from django.test import Client
from django.utils import timezone

from solid_objects.models import Effect
from solid_objects.status import report
from solid_objects.testing import run_due_reminders, run_pending_effects
from tilttek_activity import catch_up, entries

from .actors import ShoppingCart
from .models import MemberCounter
from .visitors import CART_KEY, VISITOR_KEY


def _check(condition: bool, what: str) -> None:
    if not condition:
        raise SystemExit(f"walkthrough failed: {what}")
    print(f"ok: {what}")


def _cart_heading(page: bytes) -> tuple[str, str]:
    """The server-rendered item count (the live element's text) and its unit."""
    html = page.decode()
    count = re.search(
        r'id="cart-count"><span [^>]*data-solid-objects-state="rendered">([^<]*)</span>', html
    )
    unit = re.search(r'id="cart-count-unit">([^<]*)<', html)
    return (count.group(1) if count else "?", unit.group(1) if unit else "?")


def _buttons(page: bytes) -> tuple[bool, bool]:
    """Whether the page offers Remove buttons and the Check out form."""
    return b">Remove</button>" in page, b'action="/cart/checkout/"' in page


def main() -> None:
    client = Client(HTTP_HOST="127.0.0.1")
    page = client.get("/")
    _check(page.status_code == 200 and b"Products" in page.content, "the home page renders")
    cart_id = client.session[CART_KEY]
    member = f"visitor:{client.session[VISITOR_KEY]}"
    _check(
        client.session.session_key not in (cart_id, member.partition(":")[2]),
        "the cart and the journal member are random ids, not the session key",
    )

    for product, times in (("shirt", 2), ("hat", 1)):
        for n in range(times):
            client.post(f"/cart/add/{product}/", {"form_token": f"t-{product}-{n}"})
    client.post("/cart/add/shirt/", {"form_token": "t-shirt-1"})  # a resubmitted form
    cart = ShoppingCart.ref(cart_id).snapshot()
    _check(
        cart.items
        == [{"product_id": "shirt", "quantity": 2}, {"product_id": "hat", "quantity": 1}],
        "sync calls changed the cart; a resubmitted form added nothing",
    )
    client.post("/cart/add/no-such-product/", {"form_token": "t-unknown"})  # rejected
    recorded = [e.verb for e in entries(member=member)]
    _check(
        recorded == ["cart.item_added"] * 3,
        "the cart's turns recorded each add once per form token, and the rejected one not",
    )

    page = client.get("/").content
    _check(
        _cart_heading(page) == ("3", "items") and _buttons(page) == (True, True),
        "the page says 3 items and offers Remove and Check out",
    )

    client.post("/cart/checkout/", {"form_token": "t-checkout-1"})
    _check(ShoppingCart.ref(cart_id).snapshot().status == "paying", "checkout emits a payment")
    page = client.get("/").content
    _check(
        _buttons(page) == (False, False) and b"waiting for the payment provider" in page,
        "while the payment is out, the page offers neither Remove nor Check out",
    )
    run_pending_effects()
    ShoppingCart.ref(cart_id).summary()  # runs the callback the effect enqueued
    cart = ShoppingCart.ref(cart_id).snapshot()
    _check(
        cart.status == "paid" and cart.order["confirmation"].startswith("PAY-"),
        "the payment succeeded and its callback reached the cart",
    )

    for n in range(7):
        client.post("/cart/add/shirt/", {"form_token": f"t-big-{n}"})
    client.post("/cart/checkout/", {"form_token": "t-checkout-2"})
    run_pending_effects()
    ShoppingCart.ref(cart_id).summary()
    cart = ShoppingCart.ref(cart_id).snapshot()
    _check(
        cart.status == "payment_failed" and "declined" in cart.order["error"],
        "a declined payment reaches the cart's failure callback; the items stay",
    )
    declined = Effect.objects.get(effect_id=cart.order["payment_id"])
    _check(
        declined.name == "shop.charge_card"
        and declined.status == Effect.Status.HANDLED
        and report()["outbox"]["effects"]["dead"] == 0,
        "the declined charge is a handled effect (the cart got it), not a dead one",
    )

    run_due_reminders(at=timezone.now() + timedelta(days=1))
    ShoppingCart.ref(cart_id).summary()
    cart = ShoppingCart.ref(cart_id).snapshot()
    _check(cart.status == "expired" and cart.items == [], "the abandoned cart expired by reminder")

    catch_up()
    counters = dict(MemberCounter.objects.filter(member=member).values_list("verb", "count"))
    _check(
        counters
        == {
            "cart.item_added": 10,
            "order.placed": 2,
            "order.paid": 1,
            "order.payment_failed": 1,
            "cart.expired": 1,
        },
        "the projection counted every step exactly once, callbacks and reminder included",
    )
    latest = [e.verb for e in entries(member=member, newest_first=True, limit=2)]
    _check(latest == ["cart.expired", "order.payment_failed"], "the feed reads newest first")
    feed = client.get("/feed/")
    _check(
        feed.status_code == 200
        and b"order.placed" in feed.content
        and cart_id.encode() not in feed.content
        and member.encode() not in feed.content
        and client.session.session_key.encode() not in feed.content,
        "the feed page lists it, by display name only",
    )

    client.post("/cart/add/sock/", {"form_token": "t-one-sock"})
    _check(_cart_heading(client.get("/").content) == ("1", "item"), "the page says 1 item")

    # Django's login() gives the session a new key but keeps its data: the cart id with it.
    before = client.session.session_key
    user, _ = get_user_model().objects.get_or_create(username="walkthrough")
    client.force_login(user)
    page = client.get("/").content
    _check(
        client.session.session_key != before
        and client.session[CART_KEY] == cart_id
        and _cart_heading(page) == ("1", "item"),
        "the cart survives logging in (same cart id, its count on the page)",
    )
