"""The shop's products: a fixed list, so the example needs no product tables."""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal


@dataclass(frozen=True)
class Product:
    id: str
    name: str
    price: Decimal


PRODUCTS: tuple[Product, ...] = (
    Product("shirt", "T-shirt", Decimal("19.90")),
    Product("hat", "Hat", Decimal("14.50")),
    Product("sock", "Pair of socks", Decimal("4.90")),
)
PRODUCTS_BY_ID = {product.id: product for product in PRODUCTS}
