//! The repository digest: untracked files count, ignored files do not, output is
//! deterministic, and the base commit must be a full id.

use airlock_policies::{
    Error, MoveKind, Policy, compute_digest, digest_from_unified_diff, parse_unified_diff,
};

use crate::digest_corpus::Fixture;

const TEST_FILE: &str = "def test_a():\n    assert f() == 1\n    assert g() == 2\n";

#[test]
fn untracked_files_count_and_ignored_files_do_not() {
    let fx = Fixture::new(&[
        (".gitignore", "build/\n*.log\n"),
        ("src/a.py", "def f():\n    return 1\n"),
        ("tests/test_a.py", TEST_FILE),
    ]);
    fx.write("src/a.py", "def f():\n    return 2\n");
    fx.write("src/new_module.py", "X = 1\nY = 2\n");
    fx.write("tests/test_new.py", "def test_new():\n    assert True\n");
    fx.write("build/out.py", "generated = True\n");
    fx.write("debug.log", "noise\n");
    let d = fx.digest();
    assert_eq!(
        d.files_changed,
        ["src/a.py", "src/new_module.py", "tests/test_new.py"]
    );
    assert_eq!(d.insertions, 1 + 2 + 2);
    assert_eq!(d.deletions, 1);
    assert_eq!(d.test_files_added, ["tests/test_new.py"]);
    assert!(d.test_files_modified.is_empty());
    assert_eq!((d.assertions_removed, d.skip_markers_added), (0, 0));
    assert!(d.findings.is_empty(), "{:#?}", d.findings);
    assert!(!d.diff.contains("build/out.py") && !d.diff.contains("debug.log"));
    // The digest converts to the open_pr claim the broker compares.
    let claim = d.to_diff_digest();
    assert_eq!(claim.files_changed, d.files_changed);
    assert!(claim.mismatched_fields(&d.to_diff_digest()).is_empty());
}

#[test]
fn deterministic_across_runs_and_sorted() {
    let fx = Fixture::new(&[
        ("z.py", "a\n"),
        ("a.py", "a\n"),
        ("m/tests/test_x.py", TEST_FILE),
    ]);
    fx.write("z.py", "b\n");
    fx.write("a.py", "b\n");
    fx.write("m/tests/test_x.py", "def test_a():\n    pass\n");
    fx.write("b_new.py", "x\n");
    let one = fx.digest();
    let two = fx.digest();
    assert_eq!(one, two);
    let mut sorted = one.files_changed.clone();
    sorted.sort();
    assert_eq!(one.files_changed, sorted);
    assert_eq!(one.assertions_removed, 2);
    let lines: Vec<usize> = one.findings.iter().map(|f| f.line).collect();
    assert_eq!(lines, [2, 3]);
    assert!(
        one.findings
            .iter()
            .all(|f| f.kind == MoveKind::AssertionRemoved)
    );
    assert_eq!(one.test_files_modified, ["m/tests/test_x.py"]);
}

#[test]
fn deleted_test_file_removes_its_assertions_and_renames_do_not() {
    let test_b = "def test_b():\n    assert h() == 3\n";
    let fx = Fixture::new(&[("tests/test_a.py", TEST_FILE), ("tests/test_b.py", test_b)]);
    fx.remove("tests/test_a.py");
    // test_b is renamed: same content under a new name.
    fx.remove("tests/test_b.py");
    fx.write("tests/test_b_renamed.py", test_b);
    let d = fx.digest();
    assert_eq!(
        d.files_changed,
        [
            "tests/test_a.py",
            "tests/test_b.py",
            "tests/test_b_renamed.py"
        ]
    );
    assert_eq!(d.test_files_added, ["tests/test_b_renamed.py"]);
    assert_eq!(
        d.test_files_modified,
        ["tests/test_a.py", "tests/test_b.py"]
    );
    // test_a's two assertions are gone; test_b's moved with the file. test_a's test function
    // is gone too, which counts as a disabled test.
    assert_eq!(d.assertions_removed, 2, "{:#?}", d.findings);
    assert_eq!(d.skip_markers_added, 1, "{:#?}", d.findings);
    assert!(d.findings.iter().all(|f| f.file == "tests/test_a.py"));
    assert_eq!((d.insertions, d.deletions), (2, 5));
}

#[test]
fn new_skipped_test_file_counts_its_skip_markers() {
    let fx = Fixture::new(&[("src/a.py", "x = 1\n")]);
    fx.write(
        "tests/test_new.py",
        "import pytest\n\n@pytest.mark.skip\ndef test_new():\n    assert True\n",
    );
    let d = fx.digest();
    assert_eq!(d.test_files_added, ["tests/test_new.py"]);
    assert_eq!(d.skip_markers_added, 1);
}

#[test]
fn rust_source_with_new_test_module_is_a_test_file_added() {
    let fx = Fixture::new(&[("src/lib.rs", "pub fn a() {}\n")]);
    fx.write("src/util.rs", "pub fn b() -> u8 { 1 }\n\n#[cfg(test)]\nmod tests {\n    #[test]\n    fn b_is_one() {\n        assert_eq!(super::b(), 1);\n    }\n}\n");
    fx.write("src/plain.rs", "pub fn c() {}\n");
    let d = fx.digest();
    assert_eq!(d.test_files_added, ["src/util.rs"]);
    assert!(d.findings.is_empty());
}

#[test]
fn binary_and_mode_changes_count_as_files_without_lines() {
    let fx = Fixture::new(&[("data/blob.bin", "\0\x01\x02"), ("src/a.py", "x = 1\n")]);
    fx.write("data/blob.bin", "\0\x01\x03\x04");
    let d = fx.digest();
    assert_eq!(d.files_changed, ["data/blob.bin"]);
    assert_eq!((d.insertions, d.deletions), (0, 0));
}

#[test]
fn base_commit_must_be_a_full_lowercase_sha() {
    let fx = Fixture::new(&[("a.py", "x\n")]);
    for bad in [
        "HEAD",
        "main",
        "v1.0",
        &fx.base[..12],
        &fx.base.to_uppercase(),
    ] {
        match compute_digest(fx.path(), bad) {
            Err(Error::BaseCommit(b)) => assert_eq!(b, bad),
            other => panic!("{bad}: expected BaseCommit, got {other:?}"),
        }
    }
    let unknown = "0".repeat(40);
    assert!(matches!(
        compute_digest(fx.path(), &unknown),
        Err(Error::Git { .. })
    ));
    assert!(matches!(
        compute_digest(&fx.path().join("nope"), &fx.base),
        Err(Error::Git { .. })
    ));
    let clean = compute_digest(fx.path(), &fx.base).unwrap();
    assert!(clean.files_changed.is_empty() && clean.diff.is_empty());
}

#[test]
fn unicode_and_spaced_paths_round_trip() {
    let fx = Fixture::new(&[("src/caf\u{e9} menu.py", "a = 1\n")]);
    fx.write("src/caf\u{e9} menu.py", "a = 2\n");
    fx.write("tests/test \u{fc}ber.py", "def test_x():\n    assert 1\n");
    let d = fx.digest();
    assert_eq!(
        d.files_changed,
        ["src/caf\u{e9} menu.py", "tests/test \u{fc}ber.py"]
    );
    assert_eq!(d.test_files_added, ["tests/test \u{fc}ber.py"]);
}

#[test]
fn malformed_diffs_are_errors_not_panics() {
    let cases = [
        "@@ -1,1 +1,1 @@\n-a\n+b\n",
        "diff --git a/x b/x\n--- a/x\n+++ b/x\n@@ -1,2 +1,1 @@\n-a\n",
        "diff --git a/x b/x\n--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\n+b\n+c\n",
        "diff --git a/x b/x\n--- a/x\n+++ b/x\n@@ -x,1 +1 @@\n-a\n+b\n",
        "diff --git a/x b/x\n--- a/x\n@@ -1 +1 @@\n",
        "diff --git a/x b/x\n--- a/x\n+++ b/x\n@@ -1,99999999999 +1 @@\n",
    ];
    for text in cases {
        match digest_from_unified_diff(text) {
            Err(Error::Diff { line, message }) => {
                assert!(line > 0 && !message.is_empty(), "{text:?}")
            }
            other => panic!("{text:?}: expected a diff error, got {other:?}"),
        }
    }
    // Free text before the first file (a commit message) is tolerated.
    let ok =
        "commit message\n\ndiff --git a/x.py b/x.py\n--- a/x.py\n+++ b/x.py\n@@ -1 +1 @@\n-a\n+b\n";
    let d = digest_from_unified_diff(ok).unwrap();
    assert_eq!(d.files_changed, ["x.py"]);
    assert!(
        digest_from_unified_diff("")
            .unwrap()
            .files_changed
            .is_empty()
    );
}

#[test]
fn parser_reads_headers_quoting_and_line_numbers() {
    let text = "diff --git \"a/t\\303\\251st.py\" \"b/t\\303\\251st.py\"\nindex 1..2 100644\n--- \"a/t\\303\\251st.py\"\n+++ \"b/t\\303\\251st.py\"\n@@ -3,3 +3,3 @@ def f():\n ctx\n-old\n+new\n ctx\n\\ No newline at end of file\ndiff --git a/gone.py b/gone.py\ndeleted file mode 100644\n--- a/gone.py\n+++ /dev/null\n@@ -1 +0,0 @@\n-x\n";
    let files = parse_unified_diff(text).unwrap();
    assert_eq!(files.len(), 2);
    assert_eq!(files[0].new_path.as_deref(), Some("t\u{e9}st.py"));
    assert_eq!(files[0].hunks[0].section, "def f():");
    let removed = &files[0].hunks[0].lines[1];
    assert_eq!(
        (removed.old_line, removed.new_line, removed.text.as_str()),
        (Some(4), None, "old")
    );
    assert_eq!(files[1].new_path, None);
    assert_eq!(files[1].old_path.as_deref(), Some("gone.py"));
    let d = Policy::default()
        .unwrap()
        .digest_from_unified_diff(text)
        .unwrap();
    assert_eq!(d.files_changed, ["gone.py", "t\u{e9}st.py"]);
}

#[test]
fn refused_paths_of_a_digest() {
    let fx = Fixture::new(&[("src/a.py", "x = 1\n"), ("Cargo.lock", "# lock\n")]);
    fx.write("src/a.py", "x = 2\n");
    fx.remove("Cargo.lock");
    fx.write(".github/workflows/ci.yml", "on: push\n");
    let d = fx.digest();
    let policy = Policy::default().unwrap();
    let refused = policy.refused_paths(&d.files_changed, Some(fx.path()));
    let rules: Vec<(&str, Option<&str>)> = refused.iter().map(|(p, r)| (*p, r.rule())).collect();
    assert_eq!(
        rules,
        [
            (".github/workflows/ci.yml", Some("ci-config")),
            ("Cargo.lock", Some("lockfile"))
        ]
    );
    assert!(policy.refused_paths(&["src/a.py"], None).is_empty());
}
