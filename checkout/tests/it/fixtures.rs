//! Fixture repositories built with the `git` CLI, with fixed identities and dates so commit
//! ids are the same on every run.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Runs `git` in `dir` with a clean, fixed configuration; panics with stderr on failure.
pub fn git(dir: &Path, args: &[&str]) -> String {
    let out = git_raw(dir, args);
    assert!(
        out.status.success(),
        "git {args:?} in {} failed: {}",
        dir.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap().trim().to_owned()
}

/// Like [`git`] but returns the raw output, success or not.
pub fn git_raw(dir: &Path, args: &[&str]) -> std::process::Output {
    Command::new("git")
        .current_dir(dir)
        .args(args)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_AUTHOR_NAME", "Fixture")
        .env("GIT_AUTHOR_EMAIL", "fixture@example.invalid")
        .env("GIT_COMMITTER_NAME", "Fixture")
        .env("GIT_COMMITTER_EMAIL", "fixture@example.invalid")
        .env("GIT_AUTHOR_DATE", "2020-01-01T00:00:00Z")
        .env("GIT_COMMITTER_DATE", "2020-01-01T00:00:00Z")
        .output()
        .unwrap()
}

/// A new repository at `parent/name` on branch `main`.
pub fn init_repo(parent: &Path, name: &str) -> PathBuf {
    let repo = parent.join(name);
    fs::create_dir_all(&repo).unwrap();
    git(&repo, &["init", "--quiet", "--initial-branch=main"]);
    repo
}

/// Writes `files` (path, content) and commits everything; returns the commit id.
pub fn commit(repo: &Path, files: &[(&str, &str)], message: &str) -> String {
    for (path, content) in files {
        let full = repo.join(path);
        fs::create_dir_all(full.parent().unwrap()).unwrap();
        fs::write(full, content).unwrap();
    }
    git(repo, &["add", "--all"]);
    git(repo, &["commit", "--quiet", "--allow-empty", "-m", message]);
    git(repo, &["rev-parse", "HEAD"])
}

/// The standard small repository: two commits on `main`, an annotated tag `v1` and a
/// lightweight tag `light` on the first, a branch `feature` with a third commit.
pub struct History {
    pub repo: PathBuf,
    pub first: String,
    pub second: String,
    pub feature: String,
}

pub fn history(parent: &Path) -> History {
    let repo = init_repo(parent, "project");
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

/// Every file under `root` (not `.git`), with content, sorted: a byte-level picture of a tree.
pub fn snapshot(root: &Path) -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    let mut pending = vec![root.to_path_buf()];
    while let Some(dir) = pending.pop() {
        for entry in fs::read_dir(&dir).unwrap() {
            let entry = entry.unwrap();
            let path = entry.path();
            let rel = path
                .strip_prefix(root)
                .unwrap()
                .to_string_lossy()
                .into_owned();
            if rel == ".git" {
                continue;
            }
            let meta = fs::symlink_metadata(&path).unwrap();
            if meta.is_dir() {
                pending.push(path);
            } else if meta.is_symlink() {
                let target = fs::read_link(&path).unwrap();
                out.push((rel, target.to_string_lossy().into_owned().into_bytes()));
            } else {
                out.push((rel, fs::read(&path).unwrap()));
            }
        }
    }
    out.sort();
    out
}
