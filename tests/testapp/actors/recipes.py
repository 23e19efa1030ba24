"""The actors of the docs' test recipes (docs/testing.md, docs/reminders.md), as written."""

from __future__ import annotations

from datetime import timedelta

from solid_objects import Actor, attribute, query


class ShoppingCart(Actor):
    actor_type = "tests.recipes.cart"

    items = attribute(default=list)
    status = attribute(default="open")

    def add_item(self, product_id: str, quantity: int = 1) -> int:
        if self.status != "open":
            self.reject("cart_closed", "This cart is closed", details={"status": self.status})
        self.items = [*self.items, {"product_id": product_id, "quantity": quantity}]
        # (Re)arm the abandonment alarm: each new item moves it two days ahead.
        self.schedule(delay=timedelta(days=2)).expire(reason="abandoned")
        return len(self.items)

    def checkout(self) -> None:
        self.emit("tests.async.echo", on_success="paid", value=len(self.items))

    def paid(self, effect_id: str, arguments: dict[str, object], result: object) -> None:
        self.status = "paid"

    def expire(self, reason: str) -> None:
        self.status = "expired"

    @query
    def total_quantity(self) -> int:
        return sum(item["quantity"] for item in self.items)
