//! Index directories and a small Python project, built with the shared test kit's `git`.

pub use airlock_testkit::Repo;
pub use airlock_testkit::git::tree_bytes;

/// A fresh index directory.
pub fn index_dir() -> tempfile::TempDir {
    tempfile::tempdir().unwrap()
}

/// A small Python project with a clear answer for several kinds of query.
pub fn python_project() -> Repo {
    let repo = Repo::new();
    repo.write(
        "shop/cart.py",
        r#""""Shopping cart."""
from shop.pricing import apply_discount


class ShoppingCart:
    """A cart holding line items."""

    def __init__(self):
        self.items = []

    def add_item(self, sku, quantity):
        """Add quantity units of sku."""
        self.items.append((sku, quantity))

    def total(self):
        return apply_discount(sum(q for _, q in self.items))
"#,
    );
    repo.write(
        "shop/pricing.py",
        r#""""Prices and discounts."""


def apply_discount(amount):
    """Apply the seasonal discount to an amount."""
    return amount * 0.9


def currency_symbol(code):
    return {"EUR": "€", "USD": "$"}.get(code, "?")
"#,
    );
    repo.write(
        "shop/inventory.py",
        r#"from shop.cart import ShoppingCart


def restock(warehouse, sku):
    """Order more units of a product for the warehouse."""
    cart = ShoppingCart()
    cart.add_item(sku, 10)
    return warehouse.receive(cart)
"#,
    );
    repo.write(
        "tests/test_cart.py",
        r#"from shop.cart import ShoppingCart


def test_add_item():
    cart = ShoppingCart()
    cart.add_item("apple", 2)
    assert cart.total() == 1.8
"#,
    );
    repo.write(
        "README.md",
        "# shop\n\nA toy shop. The warehouse restock flow orders products.\n",
    );
    repo.write("assets/logo.bin", [0u8, 1, 2, 3, 0, 0, 7]);
    repo.commit("initial");
    repo
}
