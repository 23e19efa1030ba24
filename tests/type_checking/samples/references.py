# A user's code, checked by mypy --strict with solid_objects.mypy_plugin. A line that must be
# flagged ends with "# error: <code>"; every other line must pass.
from __future__ import annotations

from solid_objects import Actor, MessageReference, Snapshot, attribute, observable, query, ref


class Cart(Actor):
    actor_type = "typing.cart"

    items = attribute[list[str]](default=list)
    status = attribute(default="open")
    count = attribute(default=0)
    anything = attribute(default=dict)

    def add_item(self, product_id: str, quantity: int = 1) -> int:
        self.items = [*self.items, product_id]
        self.count = self.count + quantity
        return len(self.items)

    def close(self) -> None:
        self.status = "closed"

    @query
    def total(self) -> int:
        return self.count

    @observable(broadcast="value")
    def item_count(self) -> int:
        return len(self.items)

    def _private(self) -> None: ...


async def clean(cart_id: str) -> None:
    cart = Cart.ref(cart_id)
    n: int = cart.add_item("shirt")
    n = cart.add_item("shirt", quantity=2)
    n = cart.sync(timeout=2.0, idempotency_key="r1").add_item(product_id="hat")
    n = cart.total()
    n = cart.item_count()
    cart.close()
    message: MessageReference[int] = cart.enqueue().add_item("sock")
    n = message.result(timeout=5)
    n = await message.aresult(timeout=5)
    n = await cart.aio.add_item("shirt")
    n = await cart.aio.sync(timeout=1.0).total()
    later: MessageReference[int] = await cart.aio.enqueue().add_item("sock")
    snap: Snapshot[Cart] = cart.snapshot()
    names: list[str] = snap.items
    status: str = snap.status
    n = snap.count + snap.revision
    exists: bool = snap.exists
    snap = await cart.aio.snapshot()
    untyped = ref("typing.cart", cart_id)  # resolved at run time: anything goes
    untyped.whatever(1, 2, 3)
    print(n, later, names, status, exists, snap.anything["x"])


async def wrong(cart_id: str) -> None:
    cart = Cart.ref(cart_id)
    cart.ad_item("shirt")  # error: attr-defined
    cart.add_item(3)  # error: arg-type
    cart.add_item("shirt", quantity="2")  # error: arg-type
    cart.add_item("shirt", colour="red")  # error: call-arg
    s: str = cart.add_item("shirt")  # error: assignment
    cart.items()  # error: attr-defined
    cart._private()  # error: attr-defined
    cart.reject("code")  # error: attr-defined
    cart.sync().ad_item("x")  # error: attr-defined
    cart.sync().add_item(1)  # error: arg-type
    cart.enqueue().ad_item("x")  # error: attr-defined
    cart.enqueue().add_item(1)  # error: arg-type
    m: MessageReference[str] = cart.enqueue().add_item("x")  # error: assignment
    t: str = cart.enqueue().add_item("x").result()  # error: assignment
    u: str = await cart.aio.add_item("x")  # error: assignment
    await cart.aio.add_item(1)  # error: arg-type
    await cart.aio.ad_item("x")  # error: attr-defined
    cart.aio.add_item("x")  # error: unused-coroutine
    await cart.aio.enqueue().add_item(1)  # error: arg-type
    snap = cart.snapshot()
    print(snap.valeu)  # error: attr-defined
    v: str = snap.count  # error: assignment
    print(snap.add_item)  # error: attr-defined
    print(s, m, t, u, v)


class Typed(Actor):
    count = attribute[int](default="zero")  # error: call-overload
