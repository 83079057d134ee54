//! The repository map fits its budget, is personalised by the query and is stable.

use crate::fixture::{Repo, index_dir, python_project};
use airlock_codegraph::{Engine, estimate_tokens};

#[test]
fn every_budget_is_respected_and_more_budget_shows_more() {
    let repo = python_project();
    let dir = index_dir();
    let mut engine = Engine::open(repo.path(), dir.path()).unwrap();
    let mut previous = 0;
    for budget in [0, 8, 16, 32, 64, 128, 4096] {
        let map = engine.repo_map("HEAD", "", budget).unwrap();
        assert!(estimate_tokens(&map) <= budget, "budget {budget}: {map}");
        assert!(map.len() >= previous);
        previous = map.len();
    }
    let full = engine.repo_map("HEAD", "", 4096).unwrap();
    for signature in [
        "class ShoppingCart",
        "def add_item(self, sku, quantity)",
        "def apply_discount(amount)",
        "def restock(warehouse, sku)",
    ] {
        assert!(full.contains(signature), "{signature} missing from\n{full}");
    }
    assert_eq!(engine.repo_map("HEAD", "", 0).unwrap(), "");
}

#[test]
fn methods_are_shown_inside_their_class_with_line_numbers() {
    let repo = python_project();
    let dir = index_dir();
    let mut engine = Engine::open(repo.path(), dir.path()).unwrap();
    let map = engine.repo_map("HEAD", "", 4096).unwrap();
    let cart: Vec<&str> = map
        .lines()
        .skip_while(|l| *l != "shop/cart.py:")
        .take(5)
        .collect();
    assert_eq!(
        cart,
        [
            "shop/cart.py:",
            "    5: class ShoppingCart",
            "    8:   def __init__(self)",
            "   11:   def add_item(self, sku, quantity)",
            "   15:   def total(self)",
        ]
    );
}

#[test]
fn the_most_referenced_definition_leads_without_a_query() {
    let repo = Repo::new();
    repo.write("util.py", "def shared_helper(x):\n    return x\n");
    for name in ["a", "b", "c"] {
        repo.write(
            &format!("{name}.py"),
            &format!("from util import shared_helper\n\ndef only_{name}():\n    return shared_helper(1)\n"),
        );
    }
    repo.commit("graph");
    let dir = index_dir();
    let mut engine = Engine::open(repo.path(), dir.path()).unwrap();
    let map = engine.repo_map("HEAD", "", 4096).unwrap();
    assert!(
        map.starts_with("util.py:\n    1: def shared_helper(x)\n"),
        "{map}"
    );
}

#[test]
fn the_query_personalises_the_map() {
    let repo = python_project();
    let dir = index_dir();
    let mut engine = Engine::open(repo.path(), dir.path()).unwrap();
    let map = engine
        .repo_map("HEAD", "currency_symbol returns ? for GBP", 20)
        .unwrap();
    assert!(map.starts_with("shop/pricing.py:\n"), "{map}");
    assert!(map.contains("def currency_symbol(code)"), "{map}");
}
