"""Pages of the example shop.

Cart changes are synchronous actor calls (caller-assisted: no worker is needed for them);
each step is recorded in the activity journal with an idempotency key taken from the form,
so a resubmitted form records once. Views are not atomic (the default), which sync calls
need: see docs/actors.md.
"""

from __future__ import annotations

import uuid
from typing import Any

from django.contrib import messages
from django.db.models import Max
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import render
from django.urls import reverse
from django.views.decorators.http import require_POST

import solid_objects
from tilttek_activity import entries, record_activity
from tilttek_activity.models import Entry

from .actors import ShoppingCart
from .catalog import PRODUCTS, PRODUCTS_BY_ID
from .models import MemberCounter


def _cart_id(request: HttpRequest) -> str:
    if not request.session.session_key:
        request.session.save()
    return str(request.session.session_key)


def _member(request: HttpRequest) -> Any:
    user = getattr(request, "user", None)
    if user is not None and user.is_authenticated:
        return user  # a model instance becomes "auth.user:<pk>"
    return f"visitor:{_cart_id(request)}"


def _key(request: HttpRequest, step: str) -> str:
    return f"{request.POST.get('form_token') or uuid.uuid4()}:{step}"


def home_context(request: HttpRequest) -> dict[str, Any]:
    cart = ShoppingCart.ref(_cart_id(request)).snapshot()
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
    member_ref = member if isinstance(member, str) else f"auth.user:{member.pk}"
    return {
        "products": PRODUCTS,
        "cart": cart,
        "lines": lines,
        "total": sum(line["subtotal"] for line in lines),
        "item_count": sum(line["quantity"] for line in lines),
        "form_token": uuid.uuid4().hex,
        "counters": MemberCounter.objects.filter(member=member_ref).order_by("verb"),
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
        # The same key on the actor call and on the journal: a resubmitted form neither adds
        # the item twice nor records it twice.
        count = cart.sync(idempotency_key=key).add_item(product_id)
    except solid_objects.Rejected as rejection:
        messages.error(request, rejection.message or rejection.code)
        return _back(request)
    record_activity(
        _member(request),
        "cart.item_added",
        object=f"product:{product_id}",
        context={"items_in_cart": count},
        idempotency_key=key,
    )
    return _back(request)


@require_POST
def remove(request: HttpRequest, product_id: str) -> HttpResponse:
    key = _key(request, "remove")
    ShoppingCart.ref(_cart_id(request)).sync(idempotency_key=key).remove_item(product_id)
    record_activity(
        _member(request),
        "cart.item_removed",
        object=f"product:{product_id}",
        idempotency_key=key,
    )
    return _back(request)


@require_POST
def checkout(request: HttpRequest) -> HttpResponse:
    cart = ShoppingCart.ref(_cart_id(request))
    key = _key(request, "checkout")
    try:
        order = cart.sync(idempotency_key=key).checkout()
    except solid_objects.Rejected as rejection:
        messages.error(request, rejection.message or rejection.code)
        return _back(request)
    record_activity(
        _member(request),
        "order.placed",
        object=f"payment:{order['payment_id']}",
        context={"total": order["total"]},
        idempotency_key=key,
    )
    messages.info(request, "Payment sent to the (fake) provider: refresh in a moment.")
    return _back(request)


def feed(request: HttpRequest) -> HttpResponse:
    """The whole shop's recent activity, newest first."""
    return render(request, "shop/feed.html", {"feed": _recent(count=50)})


def _recent(*, count: int, member: Any = None, window: int = 2000) -> list[Any]:
    """The newest entries, newest first: read forward (keyset by position) from a little
    below the journal's last position."""
    top = Entry.objects.aggregate(top=Max("position"))["top"] or 0
    page = entries(member=member, kind=None, after_position=max(top - window, 0), limit=window)
    return list(reversed(page))[:count]
