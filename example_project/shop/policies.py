"""Who may watch what live (``SOLID_OBJECTS["AUTHORIZE_SUBSCRIPTION"]``).

Asked when ``{% observe %}`` renders and again when the browser subscribes. A visitor may
follow only their own cart: the one whose id is kept in their session (logged in or not).
Anything else is refused.
"""

from __future__ import annotations

from typing import Any

from .visitors import CART_KEY

#: The cart observables pages may follow (``last_order`` is invalidation-only: pages fetch
#: it from ``observed_values``, which asks this policy too).
CART_OBSERVABLES = frozenset({"item_count", "checkout_status", "last_order"})


def can_watch(
    user: Any, actor_type: str, actor_id: str, observable: str, *, session: Any = None
) -> bool:
    if actor_type != "shop.cart" or observable not in CART_OBSERVABLES or session is None:
        return False
    own = session.get(CART_KEY)
    return isinstance(own, str) and own == actor_id
