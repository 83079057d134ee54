//! The checkout tests' standard repository, built with the shared test kit's `git`.

use std::path::{Path, PathBuf};

pub use airlock_testkit::git::{commit, git, git_output as git_raw, init, tree_bytes as snapshot};

/// The standard small repository: two commits on `main`, an annotated tag `v1` and a
/// lightweight tag `light` on the first, a branch `feature` with a third commit.
pub struct History {
    pub repo: PathBuf,
    pub first: String,
    pub second: String,
    pub feature: String,
}

pub fn history(parent: &Path) -> History {
    let repo = init(&parent.join("project"));
    let first = commit(
        &repo,
        &[
            ("README.md", "# project\n"),
            ("src/lib.rs", "pub fn answer() -> u32 {\n    42\n}\n"),
            ("src/parser/mod.rs", "pub mod tokenizer;\n"),
            ("src/parser/tokenizer.rs", "pub fn tokenize() {}\n"),
            ("tests/basic.rs", "#[test]\nfn t() {}\n"),
        ],
        "first",
    );
    git(&repo, &["tag", "-a", "v1", "-m", "release 1"]);
    git(&repo, &["tag", "light"]);
    let second = commit(
        &repo,
        &[("src/lib.rs", "pub fn answer() -> u32 {\n    43\n}\n")],
        "second",
    );
    git(&repo, &["checkout", "--quiet", "-b", "feature"]);
    let feature = commit(&repo, &[("src/feature.rs", "pub fn f() {}\n")], "feature");
    git(&repo, &["checkout", "--quiet", "main"]);
    History {
        repo,
        first,
        second,
        feature,
    }
}
