"""Pages of the example shop.

Cart changes are synchronous actor calls (caller-assisted: no worker is needed for them)
with an idempotency key taken from the form, so a resubmitted form is one message. The cart
records each step in the activity journal from its own turns (see ``actors.py``): the views
only say who the member is. Views are not atomic (the default), which sync calls need: see
docs/actors.md.
"""

from __future__ import annotations

import uuid
from typing import Any

from django.contrib import messages
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import render
from django.urls import reverse
from django.views.decorators.http import require_POST

import solid_objects
from tilttek_activity import entries

from . import visitors
from .actors import ShoppingCart
from .catalog import PRODUCTS, PRODUCTS_BY_ID
from .models import MemberCounter

# Random ids kept in the session, never the session key (see visitors.py).
_cart_id = visitors.cart_id
_member = visitors.member


def _key(request: HttpRequest, step: str) -> str:
    return f"{request.POST.get('form_token') or uuid.uuid4()}:{step}"


def home_context(request: HttpRequest) -> dict[str, Any]:
    cart_ref = ShoppingCart.ref(_cart_id(request))
    cart = cart_ref.snapshot()
    member = _member(request)
    lines = [
        {
            "product": PRODUCTS_BY_ID[item["product_id"]],
            "quantity": item["quantity"],
            "subtotal": PRODUCTS_BY_ID[item["product_id"]].price * item["quantity"],
        }
        for item in cart.items
        if item["product_id"] in PRODUCTS_BY_ID
    ]
    return {
        "products": PRODUCTS,
        "cart": cart,
        "cart_ref": cart_ref,
        "lines": lines,
        "total": sum(line["subtotal"] for line in lines),
        "item_count": sum(line["quantity"] for line in lines),
        "form_token": uuid.uuid4().hex,
        "counters": MemberCounter.objects.filter(member=member).order_by("verb"),
        "feed": _recent(member=member, count=10),
    }


def home(request: HttpRequest) -> HttpResponse:
    return render(request, "shop/home.html", home_context(request))


def _back(request: HttpRequest) -> HttpResponseRedirect:
    return HttpResponseRedirect(reverse("shop:home"))


@require_POST
def add(request: HttpRequest, product_id: str) -> HttpResponse:
    cart = ShoppingCart.ref(_cart_id(request))
    key = _key(request, "add")
    try:
        # A resubmitted form is the same message (same key): its turn, and the journal
        # entry it records, happen once.
        cart.sync(idempotency_key=key).add_item(product_id, member=_member(request))
    except solid_objects.Rejected as rejection:
        messages.error(request, rejection.message or rejection.code)
    return _back(request)


@require_POST
def remove(request: HttpRequest, product_id: str) -> HttpResponse:
    key = _key(request, "remove")
    cart = ShoppingCart.ref(_cart_id(request))
    try:
        cart.sync(idempotency_key=key).remove_item(product_id, member=_member(request))
    except solid_objects.Rejected as rejection:
        messages.error(request, rejection.message or rejection.code)
    return _back(request)


@require_POST
def checkout(request: HttpRequest) -> HttpResponse:
    cart = ShoppingCart.ref(_cart_id(request))
    key = _key(request, "checkout")
    try:
        cart.sync(idempotency_key=key).checkout(member=_member(request))
    except solid_objects.Rejected as rejection:
        messages.error(request, rejection.message or rejection.code)
        return _back(request)
    messages.info(request, "Payment sent to the (fake) provider: its answer shows up below.")
    return _back(request)


def feed(request: HttpRequest) -> HttpResponse:
    """The whole shop's recent activity, newest first."""
    return render(request, "shop/feed.html", {"feed": _recent(count=50)})


def _recent(*, count: int, member: str | None = None) -> list[Any]:
    """The newest entries, newest first, read backwards from the member's index (keyset:
    a next page would pass ``before_position=`` the last position shown)."""
    return entries(member=member, kind=None, newest_first=True, limit=count)
