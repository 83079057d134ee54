//! Each channel finds what it should, hits carry their flags and windows, output is stable.

use crate::fixture::{Repo, index_dir, python_project};
use airlock_codegraph::{Engine, Hit};

fn search(repo: &Repo, query: &str) -> Vec<Hit> {
    let dir = index_dir();
    let mut engine = Engine::open(repo.path(), dir.path()).unwrap();
    engine.search("HEAD", query, 10).unwrap()
}

fn hit<'a>(hits: &'a [Hit], path: &str) -> &'a Hit {
    hits.iter()
        .find(|h| h.path == path)
        .unwrap_or_else(|| panic!("{path} not in {hits:#?}"))
}

#[test]
fn lexical_channel_finds_words_of_the_body() {
    let repo = python_project();
    let hits = search(&repo, "the toy shop");
    let readme = hit(&hits, "README.md");
    assert_eq!(readme.lexical_rank, Some(1));
    // README has no structure: the structural channel never ranks it.
    assert_eq!(readme.structural_rank, None);
    assert_eq!(readme.language, None);
}

#[test]
fn structural_channel_finds_docstrings_and_signatures() {
    let repo = python_project();
    let hits = search(&repo, "seasonal discount");
    assert_eq!(hits[0].path, "shop/pricing.py");
    assert_eq!(hits[0].structural_rank, Some(1));
}

#[test]
fn symbol_channel_finds_the_file_defining_a_named_class() {
    let repo = python_project();
    let hits = search(&repo, "Creating a `ShoppingCart` twice fails");
    let cart = hit(&hits, "shop/cart.py");
    assert_eq!(cart.symbol_rank, Some(1));
    assert_eq!(hits[0].path, "shop/cart.py");
}

#[test]
fn symbol_channel_finds_a_one_letter_class_the_issue_calls() {
    let repo = python_project();
    repo.write(
        "shop/filters.py",
        "class Q:\n    \"\"\"A filter condition; combine with | and &.\"\"\"\n\n    def __or__(self, other):\n        return self\n",
    );
    repo.write(
        "shop/catalog.py",
        "def search_operator(items, operator):\n    \"\"\"Apply a search operator to the catalog's items.\"\"\"\n    return [i for i in items if operator(i)]\n\n\ndef pickle_operator(operator):\n    return repr(operator)\n",
    );
    repo.commit("filters");
    let hits = search(
        &repo,
        "TypeError: cannot pickle when applying | operator to a filter\n>>> Q() | Q(sku__in={}.keys())",
    );
    assert_eq!(hit(&hits, "shop/filters.py").symbol_rank, Some(1));
    assert_eq!(hits[0].path, "shop/filters.py");
}

#[test]
fn a_title_opening_with_a_class_name_does_not_name_that_class() {
    let repo = python_project();
    repo.write(
        "shop/errors.py",
        "class Error(Exception):\n    \"\"\"Base class of the shop's errors.\"\"\"\n\n\nclass Warning(Error):\n    \"\"\"A problem that does not stop a sale.\"\"\"\n",
    );
    repo.write(
        "shop/checks.py",
        "def check_prices(cart):\n    \"\"\"System checks of the cart: negative quantities, missing prices.\"\"\"\n    problems = []\n    for sku, quantity in cart.items:\n        if quantity < 0:\n            problems.append(dict(id=\"shop.E108\", msg=sku))\n    return problems\n",
    );
    repo.commit("checks");
    let hits = search(&repo, "Error E108 does not cover negative quantities");
    assert_eq!(hits[0].path, "shop/checks.py", "{hits:#?}");
    assert_eq!(hit(&hits, "shop/errors.py").symbol_rank, None);
    // Inside a sentence the same word is a mention.
    let hits = search(&repo, "Selling raises Error for E108 negative quantities");
    assert_eq!(hit(&hits, "shop/errors.py").symbol_rank, Some(1));
}

#[test]
fn symbol_channel_reads_traceback_paths() {
    let repo = python_project();
    let query = "Traceback (most recent call last):\n  File \"/usr/lib/python3/site-packages/shop/inventory.py\", line 7, in restock\nAttributeError: boom";
    let hits = search(&repo, query);
    assert_eq!(hits[0].path, "shop/inventory.py");
    assert_eq!(hits[0].symbol_rank, Some(1));
}

#[test]
fn proximity_stage_prefers_the_file_whose_terms_meet_in_one_place() {
    // Two files with the same lines in a different order: the BM25 channels cannot tell them
    // apart (the first stage ties them, broken by path: `apart.txt` first), but only in
    // `dense.txt` do the three query words meet within one window.
    let repo = Repo::new();
    let filler: Vec<String> = (0..120).map(|i| format!("filler line {i}")).collect();
    let mut apart = filler.clone();
    apart.insert(0, "alpha".to_string());
    apart.insert(60, "beta".to_string());
    apart.insert(120, "gamma".to_string());
    let mut dense = filler;
    for (i, word) in ["alpha", "beta", "gamma"].iter().enumerate() {
        dense.insert(i, word.to_string());
    }
    repo.write("apart.txt", &(apart.join("\n") + "\n"));
    repo.write("dense.txt", &(dense.join("\n") + "\n"));
    repo.commit("two orders");
    let hits = search(&repo, "alpha beta gamma");
    let dense = hit(&hits, "dense.txt");
    let apart = hit(&hits, "apart.txt");
    assert_eq!(
        dense.lexical_rank,
        Some(2),
        "the first stage ties them by path"
    );
    assert_eq!(apart.lexical_rank, Some(1));
    assert_eq!(dense.proximity_rank, Some(1));
    assert_eq!(apart.proximity_rank, Some(2));
    assert_eq!(hits[0].path, "dense.txt");
    assert!(dense.score > apart.score);
    // A query none of whose words are in a file leaves it out of the proximity stage.
    let hits = search(&repo, "filler alpha");
    assert!(hits.iter().all(|h| h.proximity_rank.is_some()));
    let hits = search(&repo, "apart.txt");
    assert_eq!(hit(&hits, "apart.txt").symbol_rank, Some(1));
    assert_eq!(hit(&hits, "apart.txt").proximity_rank, None);
}

#[test]
fn the_proximity_stage_reads_many_files_on_two_threads_and_keeps_each_files_own_result() {
    // 18 files with the same lines in three orders (the BM25 channels tie them all): in
    // class 0 the three query words meet within one window, in class 1 two of them do, in
    // class 2 none do. The stage reads these files on two threads (alternating); a result
    // given to the wrong file would break the class order below.
    let repo = Repo::new();
    let filler: Vec<String> = (0..150).map(|i| format!("filler line {i}")).collect();
    for i in 0..18 {
        let mut lines = filler.clone();
        let at: [usize; 3] = match i % 3 {
            0 => [0, 1, 2],
            1 => [0, 1, 100],
            _ => [0, 75, 150],
        };
        for (word, line) in ["alpha", "beta", "gamma"].iter().zip(at) {
            lines.insert(line, word.to_string());
        }
        repo.write(&format!("f{i:02}.txt"), &(lines.join("\n") + "\n"));
    }
    repo.commit("three orders");
    let dir = index_dir();
    let mut engine = Engine::open(repo.path(), dir.path()).unwrap();
    let hits = engine.search("HEAD", "alpha beta gamma", 18).unwrap();
    assert_eq!(hits.len(), 18);
    let mut by_proximity: Vec<(u32, &str)> = hits
        .iter()
        .map(|h| (h.proximity_rank.unwrap(), h.path.as_str()))
        .collect();
    by_proximity.sort();
    let order: Vec<&str> = by_proximity.iter().map(|&(_, p)| p).collect();
    let expected: Vec<String> = (0..3)
        .flat_map(|class| (0..18).filter(move |i| i % 3 == class))
        .map(|i| format!("f{i:02}.txt"))
        .collect();
    assert_eq!(order, expected);
    // The same engine answers the same again (the second repository handle is reused).
    let again = engine.search("HEAD", "alpha beta gamma", 18).unwrap();
    assert_eq!(again, hits);
}

#[test]
fn module_paths_map_to_files() {
    let repo = python_project();
    let hits = search(&repo, "importing shop.pricing breaks");
    assert_eq!(hit(&hits, "shop/pricing.py").symbol_rank, Some(1));
}

#[test]
fn test_files_are_flagged_and_ranked_below_source() {
    let repo = python_project();
    let hits = search(&repo, "add_item ShoppingCart");
    let test = hit(&hits, "tests/test_cart.py");
    assert!(test.is_test);
    assert!(!test.is_vendored);
    assert!(!hit(&hits, "shop/cart.py").is_test);
    let pos = |p: &str| hits.iter().position(|h| h.path == p).unwrap();
    assert!(pos("shop/cart.py") < pos("tests/test_cart.py"));
}

#[test]
fn vendored_files_are_flagged() {
    let repo = python_project();
    repo.write(
        "vendor/six.py",
        "def ensure_text(value):\n    return value\n",
    );
    repo.commit("vendor");
    let hits = search(&repo, "ensure_text");
    assert!(hit(&hits, "vendor/six.py").is_vendored);
}

#[test]
fn external_is_vendored_only_at_the_top_of_the_tree() {
    let repo = python_project();
    repo.write(
        "external/zlib/inflate.py",
        "def inflate_window(data):\n    return data\n",
    );
    repo.write(
        "shop/external/gateway.py",
        "def inflate_window(data):\n    return data\n",
    );
    repo.commit("externals");
    let hits = search(&repo, "inflate_window");
    assert!(hit(&hits, "external/zlib/inflate.py").is_vendored);
    assert!(!hit(&hits, "shop/external/gateway.py").is_vendored);
}

#[test]
fn binary_files_are_skipped() {
    let repo = python_project();
    let dir = index_dir();
    let mut engine = Engine::open(repo.path(), dir.path()).unwrap();
    let stats = engine.index("HEAD").unwrap();
    assert_eq!(stats.files, 6);
    assert_eq!(stats.skipped, 1);
    assert_eq!(stats.structural, 4);
    let hits = engine.search("HEAD", "logo assets bin", 10).unwrap();
    assert!(hits.iter().all(|h| h.path != "assets/logo.bin"));
}

#[test]
fn the_line_window_covers_the_matching_definition() {
    let repo = python_project();
    let mut body = String::new();
    for i in 0..80 {
        body.push_str(&format!("def filler_{i}():\n    return {i}\n\n"));
    }
    body.push_str(
        "def refund_payment(order):\n    \"\"\"Give the money back.\"\"\"\n    return order\n",
    );
    repo.write("shop/payments.py", &body);
    repo.commit("payments");
    let hits = search(&repo, "refund_payment is wrong");
    let h = hit(&hits, "shop/payments.py");
    let def_line = 80 * 3 + 1;
    assert!(h.line_start <= def_line && def_line <= h.line_end, "{h:?}");
    assert!(h.line_end - h.line_start < airlock_codegraph::WINDOW_LINES);
}

#[test]
fn results_are_sorted_and_bounded_by_k() {
    let repo = python_project();
    let dir = index_dir();
    let mut engine = Engine::open(repo.path(), dir.path()).unwrap();
    let hits = engine
        .search("HEAD", "cart discount warehouse item", 2)
        .unwrap();
    assert_eq!(hits.len(), 2);
    assert!(hits[0].score >= hits[1].score);
}

#[test]
fn two_runs_are_byte_identical() {
    let repo = python_project();
    let query = "ShoppingCart total ignores the discount in shop/pricing.py";
    let run = || {
        let dir = index_dir();
        let mut engine = Engine::open(repo.path(), dir.path()).unwrap();
        let hits = serde_json::to_string(&engine.search("HEAD", query, 10).unwrap()).unwrap();
        let map = engine.repo_map("HEAD", query, 200).unwrap();
        (hits, map)
    };
    assert_eq!(run(), run());
}

#[test]
fn any_revision_resolves_to_the_full_commit() {
    let repo = python_project();
    let head = repo.git(&["rev-parse", "HEAD"]);
    let dir = index_dir();
    let mut engine = Engine::open(repo.path(), dir.path()).unwrap();
    assert_eq!(engine.resolve("main").unwrap(), head);
    assert_eq!(engine.resolve(&head[..8]).unwrap(), head);
    assert_eq!(engine.index("main").unwrap().commit, head);
    assert!(engine.resolve("no-such-branch").is_err());
}

#[test]
fn bare_repositories_work() {
    let repo = python_project();
    let bare = tempfile::tempdir().unwrap();
    let target = bare.path().join("mirror.git");
    repo.git(&["clone", "-q", "--bare", ".", target.to_str().unwrap()]);
    let dir = index_dir();
    let mut engine = Engine::open(&target, dir.path()).unwrap();
    let hits = engine.search("HEAD", "seasonal discount", 3).unwrap();
    assert_eq!(hits[0].path, "shop/pricing.py");
}

#[test]
fn one_binary_blob_under_two_names_indexes_on_the_first_try() {
    // Two paths of one blob are extracted by parallel workers, which write the same skip
    // marker at once; each must rename its own complete copy.
    let repo = Repo::new();
    let mut binary = b"header\0".to_vec();
    binary.extend(std::iter::repeat_n(b'x', 64 * 1024));
    for name in ["a.py", "a.txt", "b.py", "b.txt", "c.js", "c.md"] {
        repo.write(name, &binary);
    }
    repo.write("src/ok.py", "def fine():\n    return 1\n");
    repo.commit("one blob, six names");
    for _ in 0..10 {
        let dir = index_dir();
        let mut engine = Engine::open(repo.path(), dir.path()).unwrap();
        let stats = engine.index("HEAD").unwrap();
        assert_eq!((stats.files, stats.skipped), (7, 6));
    }
}

#[test]
fn a_file_whose_name_is_not_utf8_is_listed_as_skipped() {
    use std::os::unix::ffi::OsStrExt;
    let repo = Repo::new();
    repo.write("ok.py", "def fine():\n    return 1\n");
    let odd = repo.path().join(std::ffi::OsStr::from_bytes(b"caf\xe9.py"));
    std::fs::write(&odd, "def latin_named():\n    return 2\n").unwrap();
    std::fs::create_dir(repo.path().join(std::ffi::OsStr::from_bytes(b"d\xff"))).unwrap();
    std::fs::write(
        repo.path()
            .join(std::ffi::OsStr::from_bytes(b"d\xff"))
            .join("inner.py"),
        "x = 1\n",
    )
    .unwrap();
    repo.commit("odd names");
    let dir = index_dir();
    let mut engine = Engine::open(repo.path(), dir.path()).unwrap();
    let stats = engine.index("HEAD").unwrap();
    assert_eq!((stats.files, stats.skipped), (3, 2), "{stats:?}");
    let hits = engine.search("HEAD", "fine latin_named", 10).unwrap();
    assert_eq!(hits.len(), 1);
    assert_eq!(hits[0].path, "ok.py");
}

#[test]
fn searching_an_indexed_commit_leaves_its_manifest_untouched() {
    use std::os::unix::fs::MetadataExt;
    let repo = python_project();
    let dir = index_dir();
    let sha = repo.git(&["rev-parse", "HEAD"]);
    Engine::open(repo.path(), dir.path())
        .unwrap()
        .index("HEAD")
        .unwrap();
    let manifests: Vec<_> = walk(dir.path())
        .into_iter()
        .filter(|p| {
            p.to_string_lossy().contains(&sha) && p.extension().is_some_and(|e| e == "json")
        })
        .collect();
    assert!(!manifests.is_empty(), "no manifest named after {sha}");
    let inodes: Vec<u64> = manifests
        .iter()
        .map(|p| std::fs::metadata(p).unwrap().ino())
        .collect();
    let mut engine = Engine::open(repo.path(), dir.path()).unwrap();
    engine.index("HEAD").unwrap();
    engine.search("HEAD", "parse config", 5).unwrap();
    let after: Vec<u64> = manifests
        .iter()
        .map(|p| std::fs::metadata(p).unwrap().ino())
        .collect();
    assert_eq!(inodes, after, "the manifest was rewritten");
}

fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            out.extend(walk(&path));
        } else {
            out.push(path);
        }
    }
    out
}

#[test]
fn damaged_or_missing_blob_records_are_rebuilt_on_search() {
    let repo = python_project();
    let dir = index_dir();
    let before = Engine::open(repo.path(), dir.path())
        .unwrap()
        .search("HEAD", "parse config", 5)
        .unwrap();
    let records: Vec<_> = walk(dir.path())
        .into_iter()
        .filter(|p| {
            p.components().any(|c| c.as_os_str() == "blobs")
                && p.extension().is_some_and(|e| e == "json")
        })
        .collect();
    assert!(records.len() >= 2, "{records:?}");
    std::fs::write(&records[0], b"{ not json").unwrap();
    std::fs::remove_file(&records[1]).unwrap();
    // A new process (no records in memory): the damaged record is rebuilt, not an error.
    let after = Engine::open(repo.path(), dir.path())
        .unwrap()
        .search("HEAD", "parse config", 5)
        .unwrap();
    assert_eq!(before, after);
    assert!(records.iter().all(|p| p.exists()));
    assert_ne!(std::fs::read(&records[0]).unwrap(), b"{ not json");
}
