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
            format!("from util import shared_helper\n\ndef only_{name}():\n    return shared_helper(1)\n"),
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

/// A project whose core module is referenced by every other file, with one rule file that
/// nothing imports (rules are loaded by name) and an example script that uses the core.
fn rules_project() -> Repo {
    let repo = Repo::new();
    let mut core = String::from("class Segment:\n    def name(self):\n        return 'x'\n\n");
    for i in 0..12 {
        core.push_str(&format!(
            "def helper_{i:02}(segment):\n    return segment.name()\n\n"
        ));
    }
    repo.write("lint/core.py", &core);
    for i in 0..8 {
        let calls: String = (0..12)
            .map(|j| format!("    helper_{j:02}(segment)\n"))
            .collect();
        repo.write(
            &format!("lint/step_{i}.py"),
            format!(
                "from lint.core import *\n\ndef run_step_{i}(segment: Segment):\n    \"\"\"Walk a join.\"\"\"\n{calls}"
            ),
        );
    }
    repo.write(
        "lint/rules/aliases.py",
        "\"\"\"Avoid aliases in join conditions.\"\"\"\n\n\
         class AliasInJoinRule:\n    \"\"\"Reports an alias used in a join condition.\"\"\"\n\n\
         \x20   def evaluate(self, alias, join):\n        return alias in join\n",
    );
    repo.write(
        "examples/walkthrough.py",
        "from lint.core import *\n\ndef walkthrough():\n    helper_00(Segment())\n",
    );
    repo.commit("rules");
    repo
}

#[test]
fn a_file_the_query_points_at_is_in_the_map_even_when_nothing_references_it() {
    let repo = rules_project();
    let dir = index_dir();
    let mut engine = Engine::open(repo.path(), dir.path()).unwrap();
    let query = "The alias rule wrongly reports an alias in a join condition when there is no join";
    let hits = engine.search("HEAD", query, 1).unwrap();
    assert_eq!(hits[0].path, "lint/rules/aliases.py");
    // A budget that holds about half of the definitions: the core module alone fills it
    // when a definition's score is only the rank flowing into it along references.
    let files = engine.repo_map_files("HEAD", query, 100).unwrap();
    assert!(
        files.contains(&"lint/rules/aliases.py".to_string()),
        "{files:?}"
    );
    let map = engine.repo_map("HEAD", query, 100).unwrap();
    assert!(map.contains("class AliasInJoinRule"), "{map}");
    assert_eq!(
        files,
        map.lines()
            .filter(|l| !l.starts_with(' '))
            .map(|l| l.trim_end_matches(':').to_string())
            .collect::<Vec<_>>()
    );
}

#[test]
fn examples_give_way_to_the_products_code() {
    let repo = rules_project();
    let dir = index_dir();
    let mut engine = Engine::open(repo.path(), dir.path()).unwrap();
    let files = engine.repo_map_files("HEAD", "", 4096).unwrap();
    let pos = |p: &str| files.iter().position(|f| f == p).unwrap();
    assert_eq!(
        files.last().map(String::as_str),
        Some("examples/walkthrough.py"),
        "{files:?}"
    );
    assert!(pos("lint/core.py") < pos("examples/walkthrough.py"));
}

#[test]
fn a_large_file_shows_the_definitions_whose_names_the_query_uses() {
    let repo = Repo::new();
    let mut printer = String::from("class LatexPrinter:\n");
    for name in [
        "Add", "Mul", "Pow", "Integral", "Limit", "Matrix", "Sum", "Product",
    ] {
        printer.push_str(&format!(
            "    def _print_{name}(self, expr):\n        return self.wrap(expr)\n\n"
        ));
    }
    printer.push_str("    def _print_Subs(self, expr):\n        return self.wrap(expr)\n");
    repo.write("printing/latex.py", &printer);
    repo.write(
        "core/function.py",
        "class Subs:\n    \"\"\"Substitution.\"\"\"\n",
    );
    repo.commit("printer");
    let dir = index_dir();
    let mut engine = Engine::open(repo.path(), dir.path()).unwrap();
    let query = "latex printing of Subs is missing parentheses";
    // Room for a handful of lines: the printer's nine methods cannot all be shown.
    let map = engine.repo_map("HEAD", query, 30).unwrap();
    assert!(map.contains("def _print_Subs(self, expr)"), "{map}");
    assert!(!map.contains("_print_Add"), "{map}");
}
