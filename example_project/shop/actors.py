"""The shop's cart actor and the fake payment provider it pays through.

One cart per visitor (the actor id is a random id kept in the session: see visitors.py).
Every change is a message; the cart's state is JSON in the ``solid_objects`` tables;
checkout goes out through the effect outbox and comes back as a success or failure
callback; a reminder expires a cart that was left alone.

Each step records its activity from the turn itself (``self.record_activity``): the entry
commits with the cart's change, in the same fenced commit, or not at all, so the feed and
the counters can never disagree with the cart. A rejected change records nothing, a retried
or resubmitted one records once, and the payment callbacks and the expiry reminder, which no
view ever sees, record their steps too.
"""

from __future__ import annotations

import os
import time
from datetime import timedelta
from decimal import Decimal
from typing import Any

import solid_objects
from solid_objects import Actor, attribute, observable, query

from .catalog import PRODUCTS_BY_ID

#: A cart nobody touched for this long is emptied (``SHOP_ABANDON_SECONDS`` for the demo).
ABANDON_AFTER = timedelta(seconds=float(os.environ.get("SHOP_ABANDON_SECONDS", 30 * 60)))
#: The fake provider declines payments above this amount, so failures are easy to try.
DECLINE_ABOVE = Decimal("100")
#: How pages name a cart's status.
STATUS_LABELS = {
    "open": "open",
    "paying": "waiting for the payment provider",
    "paid": "paid",
    "payment_failed": "payment failed",
    "expired": "expired (left alone too long)",
}


class ShoppingCart(Actor):
    actor_type = "shop.cart"
    instance_retention = timedelta(days=90)

    items = attribute(default=list)  # [{"product_id": ..., "quantity": ...}]
    status = attribute(default="open")  # open | paying | paid | payment_failed | expired
    order = attribute(default=None)  # the last checkout: total, payment id, outcome
    member = attribute(default=None)  # who last changed the cart ("auth.user:7", "visitor:...")

    def _visitor(self, member: str | None) -> str:
        """The journal's member for this turn: the one the view passed, else the last one."""
        if member is not None:
            self.member = member
        return str(self.member or f"visitor:{self.actor_id}")

    def add_item(self, product_id: str, quantity: int = 1, member: str | None = None) -> int:
        if self.status == "paying":
            self.reject("cart_closed", "This cart is being paid for.", {"status": self.status})
        if product_id not in PRODUCTS_BY_ID:
            self.reject("unknown_product", f"There is no product {product_id!r}.")
        if not 1 <= quantity <= 99:
            self.reject("bad_quantity", "Quantities go from 1 to 99.", {"quantity": quantity})
        items = [dict(item) for item in self.items]
        for item in items:
            if item["product_id"] == product_id:
                item["quantity"] = min(item["quantity"] + quantity, 99)
                break
        else:
            items.append({"product_id": product_id, "quantity": quantity})
        self.items = items
        self.status = "open"
        # One named reminder: every change moves it, so it fires only after real inactivity.
        self.schedule(delay=ABANDON_AFTER, key="abandoned").expire()
        count = self.item_count()
        self.record_activity(
            self._visitor(member),
            "cart.item_added",
            object=f"product:{product_id}",
            quantity=quantity,
            context={"items_in_cart": count},
        )
        return count

    def remove_item(self, product_id: str, member: str | None = None) -> int:
        if self.status == "paying":
            self.reject("cart_closed", "This cart is being paid for.", {"status": self.status})
        kept = [item for item in self.items if item["product_id"] != product_id]
        if len(kept) != len(self.items):
            self.items = kept
            self.record_activity(
                self._visitor(member), "cart.item_removed", object=f"product:{product_id}"
            )
        return self.item_count()

    def checkout(self, member: str | None = None) -> dict[str, Any]:
        if not self.items:
            self.reject("empty_cart", "Add something to your cart first.")
        if self.status == "paying":
            self.reject("already_paying", "This cart is already being paid for.")
        total = sum(
            PRODUCTS_BY_ID[item["product_id"]].price * item["quantity"] for item in self.items
        )
        payment = self.emit(
            "shop.charge_card",
            on_success="payment_succeeded",
            on_failure="payment_failed",
            amount=str(total),
            currency="EUR",
            cart=self.actor_id,
        )
        self.status = "paying"
        self.order = {"total": str(total), "payment_id": payment.effect_id, "outcome": None}
        self.unschedule("expire", key="abandoned")
        self.record_activity(
            self._visitor(member),
            "order.placed",
            object=f"payment:{payment.effect_id}",
            context={"total": str(total)},
        )
        return dict(self.order)

    def payment_succeeded(
        self, effect_id: str, arguments: dict[str, Any], result: dict[str, Any]
    ) -> None:
        self.status = "paid"
        self.items = []
        self.order = {
            **(self.order or {}),
            "outcome": "paid",
            "confirmation": result.get("confirmation"),
        }
        self.record_activity(
            self._visitor(None),
            "order.paid",
            object=f"payment:{effect_id}",
            context={"total": arguments.get("amount")},
        )

    def payment_failed(
        self, effect_id: str, arguments: dict[str, Any], error: dict[str, Any]
    ) -> None:
        self.status = "payment_failed"  # the items stay: the visitor may try again...
        self.schedule(delay=ABANDON_AFTER, key="abandoned").expire()  # ...or abandon them
        self.order = {
            **(self.order or {}),
            "outcome": "failed",
            "error": error.get("message", "payment failed"),
        }
        self.record_activity(
            self._visitor(None), "order.payment_failed", object=f"payment:{effect_id}"
        )

    def expire(self) -> None:
        if self.status in ("open", "payment_failed") and self.items:
            dropped = sum(item["quantity"] for item in self.items)
            self.items = []
            self.status = "expired"
            self.record_activity(self._visitor(None), "cart.expired", quantity=dropped)

    @query
    def summary(self) -> dict[str, Any]:
        return {"items": self.items, "status": self.status, "order": self.order}

    @observable(broadcast="value")
    def item_count(self) -> int:
        return sum(item["quantity"] for item in self.items)

    @observable(broadcast="value")
    def checkout_status(self) -> str:
        """The status as a page shows it (live in every open tab)."""
        return STATUS_LABELS.get(self.status, self.status)

    @observable  # invalidation-only: its broadcast rows carry {}, not the order
    def last_order(self) -> str:
        """The last checkout as the page words it ("" before the first one).

        Invalidation-only on purpose: the amount, the payment confirmation and the
        provider's error are not copied into broadcast rows (which the admin lists and
        Channels carries); a page told that it changed fetches it from ``observed_values``,
        which asks the subscription policy again."""
        order = self.order
        if not order:
            return ""
        if order.get("outcome") == "paid":
            outcome = f"paid ({order.get('confirmation')})"
        elif order.get("outcome") == "failed":
            outcome = f"payment failed: {order.get('error')}"
        else:
            outcome = "waiting for the payment provider…"
        return f"Last order: €{order.get('total')} — {outcome}"


class PaymentDeclined(Exception):
    """The fake provider said no; retrying would not change its mind."""

    retryable = False


@solid_objects.effect("shop.charge_card")
def charge_card(arguments: dict[str, Any], context: Any) -> dict[str, Any]:
    """A fake payment provider. A real one would get ``context.effect_id`` as its
    idempotency key, so a redelivered effect never charges twice."""
    time.sleep(0.3)  # the network
    if Decimal(arguments["amount"]) > DECLINE_ABOVE:
        raise PaymentDeclined(f"card declined: {arguments['amount']} EUR is over the demo limit")
    return {"confirmation": f"PAY-{context.effect_id[:8].upper()}"}
