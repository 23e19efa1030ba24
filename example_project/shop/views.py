"""Pages of the example shop."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from .catalog import PRODUCTS


def home_context(request: HttpRequest) -> dict[str, Any]:
    """What ``shop/home.html`` shows.

    ``cart`` is the visitor's cart: anything with ``items``, a list of ``{"product_id",
    "quantity"}`` (the cart actor's snapshot from ``shop/actors.py`` fits); ``None`` or no items
    renders the empty-cart message. ``feed`` is the recent activity, newest first, from the
    journal.
    """
    return {"products": PRODUCTS, "cart": None, "feed": []}


def home(request: HttpRequest) -> HttpResponse:
    return render(request, "shop/home.html", home_context(request))
