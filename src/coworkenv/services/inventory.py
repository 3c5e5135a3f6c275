"""Inventory: products (stock levels, suppliers) and restock orders. Claw-Eval compatible (routes
under ``/inventory``, audit collection ``orders``).

Claw-Eval tasks ship the product list as ``products.json`` or ``items.json`` (same records, keyed by
``product_id``); both load into the one ``products`` table. Claw-Eval exposes ``inventory_list_items``
and ``inventory_get_item`` as aliases on the product routes; our routes must be unique, so the
aliases answer on ``/inventory/items`` and ``/inventory/items/get`` with identical behaviour (a
Claw-Eval harness calling the product routes gets the same answer from the product tools).
A product's stock status is its ``status`` field, or derived from stock vs. threshold when absent.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, ClassVar

from pydantic import Field

from coworkenv.errors import invalid
from coworkenv.services.service import Record, Service, TableDef, tool


class Product(Record):
    product_id: str
    name: str = ""
    category: str = ""
    status: str = ""
    supplier: str = ""
    current_stock: int | None = None
    quantity: int | None = None
    min_stock_threshold: int | None = None
    min_stock: int | None = None
    reorder_level: int | None = None
    unit_price: float | None = None
    unit_cost: float | None = None
    notes: str = ""


def stock_status(p: Mapping[str, Any]) -> str:
    """The product's ``status``, else ``out_of_stock`` / ``low_stock`` / ``normal`` from its numbers."""
    if p.get("status"):
        return str(p["status"])
    stock = p.get("current_stock", p.get("quantity"))
    if not isinstance(stock, int | float):
        return ""
    if stock <= 0:
        return "out_of_stock"
    for key in ("min_stock_threshold", "min_stock", "reorder_level"):
        threshold = p.get(key)
        if isinstance(threshold, int | float):
            return "low_stock" if stock < threshold else "normal"
    return "normal"


_ID = Annotated[str, Field(description="Product ID")]
_CATEGORY = Annotated[str | None, Field(description="Filter by category")]
_STATUS = Annotated[str | None, Field(description="Filter by stock status (normal/low_stock/out_of_stock)")]


class Inventory(Service):
    name = "inventory"
    title = "Inventory"
    tables: ClassVar[Mapping[str, TableDef]] = {
        "products": TableDef(Product, "product_id", "products.json", aliases=("items.json",))
    }

    def _list(self, category: str | None, status: str | None) -> dict[str, Any]:
        out = []
        for p in self.table("products"):
            if category and str(p.get("category", "")).lower() != category.strip().lower():
                continue
            if status and stock_status(p).lower() != status.strip().lower():
                continue
            out.append(dict(p))
        return {"products": out, "total": len(out)}

    @tool("/inventory/products")
    def inventory_list_products(self, category: _CATEGORY = None, status: _STATUS = None) -> dict[str, Any]:
        """List products with stock levels, filtered by category and stock status."""
        return self._list(category, status)

    @tool("/inventory/items")
    def inventory_list_items(self, category: _CATEGORY = None, status: _STATUS = None) -> dict[str, Any]:
        """List inventory items (alias of inventory_list_products)."""
        return self._list(category, status)

    @tool("/inventory/products/get")
    def inventory_get_product(self, product_id: _ID) -> dict[str, Any]:
        """Get detailed inventory information for a single product."""
        return dict(self.table("products").require(product_id, "Product"))

    @tool("/inventory/items/get")
    def inventory_get_item(self, product_id: _ID) -> dict[str, Any]:
        """Get inventory item details (alias of inventory_get_product)."""
        return dict(self.table("products").require(product_id, "Product"))

    @tool("/inventory/orders/create", write=True, audit="orders")
    def inventory_create_order(
        self,
        product_id: _ID,
        quantity: Annotated[int, Field(description="Restock quantity", ge=1)],
        supplier: Annotated[str | None, Field(description="Supplier (default: the product's)")] = None,
    ) -> dict[str, Any]:
        """Create a restock order for a product."""
        product = self.table("products").require(product_id, "Product")
        if supplier is not None and not supplier.strip():
            raise invalid("supplier must not be blank")
        order = {
            "product_id": product_id,
            "quantity": quantity,
            "supplier": supplier if supplier is not None else (product.get("supplier") or None),
            "timestamp": self.clock.now().isoformat(),
        }
        self.emit("orders", order)
        return {"status": "created", "order": order}
