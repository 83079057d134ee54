//! Git repositories built on the fly with the `git` command.

use std::path::{Path, PathBuf};
use std::process::Command;

pub struct Repo {
    dir: tempfile::TempDir,
}

impl Repo {
    pub fn new() -> Repo {
        let dir = tempfile::tempdir().unwrap();
        let repo = Repo { dir };
        repo.git(&["init", "-q", "-b", "main"]);
        repo
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    pub fn git(&self, args: &[&str]) -> String {
        let out = Command::new("git")
            .args([
                "-c",
                "user.name=t",
                "-c",
                "user.email=t@example.invalid",
                "-c",
                "commit.gpgsign=false",
            ])
            .args(args)
            .current_dir(self.dir.path())
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_AUTHOR_DATE", "2020-01-01T00:00:00Z")
            .env("GIT_COMMITTER_DATE", "2020-01-01T00:00:00Z")
            .output()
            .expect("the git command is needed by these tests");
        assert!(
            out.status.success(),
            "git {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap().trim().to_string()
    }

    pub fn write(&self, path: &str, content: &str) {
        let full = self.dir.path().join(path);
        std::fs::create_dir_all(full.parent().unwrap()).unwrap();
        std::fs::write(full, content).unwrap();
    }

    pub fn write_bytes(&self, path: &str, content: &[u8]) {
        let full = self.dir.path().join(path);
        std::fs::create_dir_all(full.parent().unwrap()).unwrap();
        std::fs::write(full, content).unwrap();
    }

    pub fn remove(&self, path: &str) {
        std::fs::remove_file(self.dir.path().join(path)).unwrap();
    }

    /// Commit everything; returns the commit id.
    pub fn commit(&self, message: &str) -> String {
        self.git(&["add", "-A"]);
        self.git(&["commit", "-q", "--allow-empty", "-m", message]);
        self.git(&["rev-parse", "HEAD"])
    }
}

/// A fresh index directory.
pub fn index_dir() -> tempfile::TempDir {
    tempfile::tempdir().unwrap()
}

/// All files under a directory, relative paths sorted, with their bytes.
pub fn tree_bytes(root: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut out = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else {
                let bytes = std::fs::read(&path).unwrap();
                out.push((path.strip_prefix(root).unwrap().to_path_buf(), bytes));
            }
        }
    }
    out.sort();
    out
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
    repo.write_bytes("assets/logo.bin", &[0u8, 1, 2, 3, 0, 0, 7]);
    repo.commit("initial");
    repo
}
