//! The index persists per (repository, commit) and moves between commits by blob id.

use crate::fixture::{index_dir, python_project, tree_bytes};
use airlock_codegraph::Engine;

#[test]
fn moving_between_commits_extracts_only_changed_blobs() {
    let repo = python_project();
    let a = repo.git(&["rev-parse", "HEAD"]);
    repo.write(
        "shop/pricing.py",
        "def apply_discount(amount):\n    return amount * 0.8\n",
    );
    repo.write(
        "shop/shipping.py",
        "def shipping_cost(weight):\n    return weight * 2\n",
    );
    repo.git(&["mv", "shop/inventory.py", "shop/stock.py"]);
    let b = repo.commit("B");

    let dir = index_dir();
    let mut engine = Engine::open(repo.path(), dir.path()).unwrap();
    let first = engine.index(&a).unwrap();
    // Six files; the `.bin` one is skipped by its extension without being read.
    assert_eq!(first.blobs_new, 5);
    let again = engine.index(&a).unwrap();
    assert_eq!(again.blobs_new, 0);
    let moved = engine.index(&b).unwrap();
    // The changed and the added file; the renamed one keeps its blob.
    assert_eq!(moved.blobs_new, 2, "{moved:?}");
    // Everything else is reused, except the `.bin` file, which is never read at all.
    assert_eq!(moved.blobs_reused, moved.files - 3);

    // A second engine (a later process) reuses what the first stored.
    let mut later = Engine::open(repo.path(), dir.path()).unwrap();
    assert_eq!(later.index(&b).unwrap().blobs_new, 0);
}

#[test]
fn incremental_index_equals_a_full_index_of_the_same_commit() {
    let repo = python_project();
    let a = repo.git(&["rev-parse", "HEAD"]);
    repo.write(
        "shop/pricing.py",
        "def apply_discount(amount):\n    return amount * 0.8\n",
    );
    repo.write(
        "shop/shipping.py",
        "def shipping_cost(weight):\n    \"\"\"Cost to ship.\"\"\"\n    return weight * 2\n",
    );
    repo.remove("README.md");
    let b = repo.commit("B");

    let incremental_dir = index_dir();
    let mut incremental = Engine::open(repo.path(), incremental_dir.path()).unwrap();
    incremental.index(&a).unwrap();
    incremental.index(&b).unwrap();

    let full_dir = index_dir();
    let mut full = Engine::open(repo.path(), full_dir.path()).unwrap();
    full.index(&b).unwrap();

    // Every file of the full index exists, byte for byte, in the incremental one (which also
    // holds commit A's manifest and the blobs only A had).
    let incremental_files = tree_bytes(incremental_dir.path());
    let full_files = tree_bytes(full_dir.path());
    assert!(!full_files.is_empty());
    for file in &full_files {
        assert!(incremental_files.contains(file), "{:?} differs", file.0);
    }

    let query = "shipping cost and discount";
    let hits_inc = serde_json::to_string(&incremental.search(&b, query, 10).unwrap()).unwrap();
    let hits_full = serde_json::to_string(&full.search(&b, query, 10).unwrap()).unwrap();
    assert_eq!(hits_inc, hits_full);
    // Every channel's full ranking too: the tantivy index built from reused records ranks
    // exactly as the one built from freshly extracted records.
    for query in [
        query,
        "apply_discount amount weight",
        "Cost to ship shop/shipping.py",
    ] {
        assert_eq!(
            incremental.channel_rankings(&b, query, 100).unwrap(),
            full.channel_rankings(&b, query, 100).unwrap(),
            "{query}"
        );
    }
    assert_eq!(
        incremental.repo_map(&b, query, 300).unwrap(),
        full.repo_map(&b, query, 300).unwrap()
    );
    // Commit A is still searchable and still sees its own files.
    let hits_a = incremental.search(&a, "toy shop", 10).unwrap();
    assert!(hits_a.iter().any(|h| h.path == "README.md"));
    let hits_b = incremental.search(&b, "toy shop", 10).unwrap();
    assert!(hits_b.iter().all(|h| h.path != "README.md"));
}

/// The saved full-text indexes (one per commit) under an index directory.
fn bundles(root: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut found: Vec<_> = tree_bytes(root)
        .into_iter()
        .map(|(path, _)| path)
        .filter(|p| {
            std::path::Path::new(p)
                .components()
                .any(|c| c.as_os_str() == "fulltext")
        })
        .map(|p| root.join(p))
        .collect();
    found.sort();
    found
}

#[test]
fn a_later_process_opens_the_saved_full_text_index_and_a_damaged_one_is_rebuilt() {
    let repo = python_project();
    let head = repo.git(&["rev-parse", "HEAD"]);
    let dir = index_dir();
    let queries = [
        "shipping cost and discount",
        "apply_discount amount weight",
        "toy shop inventory",
    ];
    let mut first = Engine::open(repo.path(), dir.path()).unwrap();
    let expected: Vec<_> = queries
        .iter()
        .map(|q| first.channel_rankings(&head, q, 100).unwrap())
        .collect();
    let saved = bundles(dir.path());
    assert_eq!(saved.len(), 1, "one bundle for the one commit: {saved:?}");
    let name = saved[0].file_name().unwrap().to_string_lossy().into_owned();
    assert!(name.starts_with(&format!("{head}-")), "{name}");
    let bytes = std::fs::read(&saved[0]).unwrap();

    // A later engine opens the bundle instead of rebuilding: same rankings, bundle untouched.
    let mut later = Engine::open(repo.path(), dir.path()).unwrap();
    for (query, want) in queries.iter().zip(&expected) {
        assert_eq!(&later.channel_rankings(&head, query, 100).unwrap(), want);
    }
    assert_eq!(
        std::fs::read(&saved[0]).unwrap(),
        bytes,
        "reused, not rewritten"
    );

    // A damaged bundle (here: cut in half) is not trusted: the index is rebuilt, answers the
    // same, and a sound bundle replaces the damaged one.
    std::fs::write(&saved[0], &bytes[..bytes.len() / 2]).unwrap();
    let mut after_damage = Engine::open(repo.path(), dir.path()).unwrap();
    for (query, want) in queries.iter().zip(&expected) {
        assert_eq!(
            &after_damage.channel_rankings(&head, query, 100).unwrap(),
            want
        );
    }
    let rewritten = std::fs::read(&saved[0]).unwrap();
    assert!(rewritten.len() > bytes.len() / 2);
    assert!(airlock_codegraph::fulltext::FullText::from_bundle(&rewritten).is_ok());
}

#[test]
fn saved_full_text_indexes_are_bounded_and_replaced_per_commit() {
    use airlock_codegraph::store::{MAX_FULLTEXT_BUNDLES, Store};
    let repo = python_project();
    let dir = index_dir();
    let store = Store::new(dir.path(), repo.path());
    let commit = |i: usize| format!("{i:040x}");
    for i in 0..MAX_FULLTEXT_BUNDLES + 3 {
        store
            .save_fulltext(&commit(i), &"ab".repeat(32), b"bundle")
            .unwrap();
        // Distinct modification times, oldest first.
        std::thread::sleep(std::time::Duration::from_millis(2));
    }
    let kept = bundles(dir.path());
    assert_eq!(kept.len(), MAX_FULLTEXT_BUNDLES);
    let names: Vec<String> = kept
        .iter()
        .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    for i in 0..3 {
        assert!(
            !names.iter().any(|n| n.starts_with(&commit(i))),
            "the oldest bundles go first: {i}"
        );
    }
    assert!(store.load_fulltext(&commit(3), &"ab".repeat(32)).is_some());
    // Another document set for the same commit replaces that commit's bundle.
    let last = commit(MAX_FULLTEXT_BUNDLES + 2);
    store
        .save_fulltext(&last, &"cd".repeat(32), b"other")
        .unwrap();
    assert!(store.load_fulltext(&last, &"ab".repeat(32)).is_none());
    assert_eq!(
        store.load_fulltext(&last, &"cd".repeat(32)).as_deref(),
        Some(&b"other"[..])
    );
    assert_eq!(bundles(dir.path()).len(), MAX_FULLTEXT_BUNDLES);
}

#[test]
fn an_index_in_an_older_format_is_removed_when_the_repository_is_indexed_again() {
    let repo = python_project();
    let dir = index_dir();
    let mut engine = Engine::open(repo.path(), dir.path()).unwrap();
    let store = engine.store_dir().to_path_buf();
    let key = store.file_name().unwrap().to_owned();
    let format = airlock_codegraph::store::FORMAT_VERSION;
    assert!(format >= 2, "the test needs an older format to plant");
    // This repository's index in format 1, and another repository's (which must stay).
    let old = dir.path().join("v1").join(&key);
    std::fs::create_dir_all(old.join("blobs/ab")).unwrap();
    std::fs::write(old.join("blobs/ab/abc.python.json"), "{}").unwrap();
    let other = dir.path().join("v1").join("other-0123456789ab");
    std::fs::create_dir_all(&other).unwrap();

    engine.index("HEAD").unwrap();
    assert!(!old.exists(), "{old:?} still there");
    assert!(other.exists(), "another repository's index was removed");
    assert!(store.join("commits").is_dir());

    // Once no repository is left in the old format, its directory goes too.
    std::fs::remove_dir_all(&other).unwrap();
    std::fs::create_dir_all(&old).unwrap();
    repo.write("shop/new.py", "def fresh():\n    return 1\n");
    repo.commit("new");
    engine.index("HEAD").unwrap();
    assert!(!dir.path().join("v1").exists());
}

#[test]
fn checkouts_opened_under_one_key_share_one_index() {
    let repo = python_project();
    let clone = tempfile::tempdir().unwrap();
    let clone_path = clone.path().join("c");
    airlock_testkit::git(
        clone.path(),
        &["clone", "-q", repo.path().to_str().unwrap(), "c"],
    );
    let dir = index_dir();

    let mut first = Engine::open_keyed(repo.path(), dir.path(), "pkg-0123abcd").unwrap();
    assert_eq!(first.index("HEAD").unwrap().blobs_new, 5);
    // Another checkout of the same project under the same key: nothing to extract.
    let mut second = Engine::open_keyed(&clone_path, dir.path(), "pkg-0123abcd").unwrap();
    assert_eq!(second.index("HEAD").unwrap().blobs_new, 0);
    assert_eq!(second.store_dir(), first.store_dir());
    let hits = second.search("HEAD", "apply discount", 3).unwrap();
    assert!(!hits.is_empty());
    // Opened by its own path, the clone has an index of its own.
    let mut own = Engine::open(&clone_path, dir.path()).unwrap();
    assert_eq!(own.index("HEAD").unwrap().blobs_new, 5);

    for bad in ["", ".", "..", "../x", "a/b", "sp ace", &"k".repeat(201)] {
        let err = Engine::open_keyed(repo.path(), dir.path(), bad)
            .err()
            .unwrap_or_else(|| panic!("{bad:?} accepted"));
        assert!(err.to_string().contains("invalid index key"), "{err}");
    }
}

#[test]
fn concurrent_builders_of_one_index_extract_each_blob_once() {
    let repo = python_project();
    for i in 0..300 {
        repo.write(
            &format!("gen/module_{i}.py"),
            format!("def function_{i}(value):\n    \"\"\"Return value plus {i}.\"\"\"\n    return value + {i}\n"),
        );
    }
    let head = repo.commit("many files");
    let all = Engine::open(repo.path(), index_dir().path())
        .unwrap()
        .index(&head)
        .unwrap()
        .blobs_new;
    let dir = index_dir();
    let start = std::sync::Barrier::new(2);
    let built: Vec<usize> = std::thread::scope(|s| {
        let builders: Vec<_> = (0..2)
            .map(|_| {
                s.spawn(|| {
                    let mut engine = Engine::open(repo.path(), dir.path()).unwrap();
                    start.wait();
                    engine.index(&head).unwrap().blobs_new
                })
            })
            .collect();
        builders.into_iter().map(|b| b.join().unwrap()).collect()
    });
    // One built the index; the other waited for it and found every record written.
    assert_eq!(built.iter().sum::<usize>(), all, "{built:?}");
    assert!(built.contains(&0), "{built:?}");
}
