//! The change set of a run: the run's worktree compared with the pinned commit of the broker's
//! own clone. The worktree's files are read as plain bytes (symlinks as links, never followed)
//! and written as objects into the broker's clone, so the diff, the witness trees and the
//! approved commit all come from one tree the broker built itself.

use std::collections::BTreeMap;
use std::path::Path;

use crate::error::{Error, Result};

/// What happened to one path.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ChangeKind {
    /// New path.
    Added,
    /// Content or mode changed.
    Modified,
    /// Removed.
    Deleted,
}

/// One changed path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileChange {
    /// Repository-relative path with `/` separators.
    pub path: String,
    /// Added, modified or deleted.
    pub kind: ChangeKind,
    /// Whether `airlock-policies` recognises the path as a test file.
    pub is_test: bool,
    /// New content (`None` for deletions).
    pub content: Option<Vec<u8>>,
    /// The pinned content of a modified path (`None` for additions and deletions): the queued
    /// diff carries both sides as text.
    pub pinned_content: Option<Vec<u8>>,
    /// Git file mode of the new content (0o100644, 0o100755 or 0o120000).
    pub filemode: i32,
}

/// The whole change of a run against its pin.
#[derive(Debug, Clone)]
pub struct ChangeSet {
    /// Changed paths, sorted.
    pub files: Vec<FileChange>,
    /// The patched tree, written into the broker's clone.
    pub tree: git2::Oid,
    /// The full unified diff (pin -> patched).
    pub diff: String,
    /// Lines added.
    pub insertions: usize,
    /// Lines removed.
    pub deletions: usize,
    /// Every symlink of the patched tree, pinned or changed: its path and its target's text,
    /// so a changed link's target is resolved through the others.
    pub symlinks: BTreeMap<String, String>,
}

/// Every file of the worktree but `.git` and what it ignores; a path the pin tracks is kept even
/// when an ignore rule matches it (a published crate's `.gitignore` lists the `Cargo.lock` it
/// ships).
fn worktree_files(root: &Path, pin_tree: &git2::Tree<'_>) -> Result<Vec<(String, Vec<u8>, i32)>> {
    use std::os::unix::fs::PermissionsExt;
    let ignores = git2::Repository::open(root).ok().filter(|r| !r.is_bare());
    let mut out = Vec::new();
    let mut stack = vec![String::new()];
    while let Some(rel) = stack.pop() {
        let dir = if rel.is_empty() {
            root.to_path_buf()
        } else {
            root.join(&rel)
        };
        let entries =
            std::fs::read_dir(&dir).map_err(Error::io(format!("reading {}", dir.display())))?;
        for entry in entries {
            let entry = entry.map_err(Error::io(format!("reading {}", dir.display())))?;
            let name = entry.file_name();
            let Some(name) = name.to_str() else {
                return Err(Error::Witness(format!(
                    "a file name under {} is not UTF-8",
                    dir.display()
                )));
            };
            if rel.is_empty() && name == ".git" {
                continue;
            }
            let child = if rel.is_empty() {
                name.to_owned()
            } else {
                format!("{rel}/{name}")
            };
            let meta = entry
                .path()
                .symlink_metadata()
                .map_err(Error::io(format!("reading {}", entry.path().display())))?;
            if let Some(repo) = &ignores
                && repo.is_path_ignored(Path::new(&child)).unwrap_or(false)
                && pin_tree.get_path(Path::new(&child)).is_err()
            {
                continue;
            }
            if meta.is_dir() {
                stack.push(child);
            } else if meta.file_type().is_symlink() {
                let target = std::fs::read_link(entry.path()).map_err(Error::io(format!(
                    "reading link {}",
                    entry.path().display()
                )))?;
                out.push((
                    child,
                    target.to_string_lossy().into_owned().into_bytes(),
                    0o120000,
                ));
            } else if meta.is_file() {
                let content = std::fs::read(entry.path())
                    .map_err(Error::io(format!("reading {}", entry.path().display())))?;
                let mode = if meta.permissions().mode() & 0o111 != 0 {
                    0o100755
                } else {
                    0o100644
                };
                out.push((child, content, mode));
            }
        }
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(out)
}

fn index_entry(path: &str, id: git2::Oid, mode: i32, size: usize) -> git2::IndexEntry {
    git2::IndexEntry {
        ctime: git2::IndexTime::new(0, 0),
        mtime: git2::IndexTime::new(0, 0),
        dev: 0,
        ino: 0,
        mode: mode as u32,
        uid: 0,
        gid: 0,
        file_size: size as u32,
        id,
        flags: (path.len().min(0xfff)) as u16,
        flags_extended: 0,
        path: path.as_bytes().to_vec(),
    }
}

/// Compare the worktree with commit `pin` of the broker's clone `repo`; `is_test` classifies paths.
pub fn collect(
    repo: &git2::Repository,
    pin: git2::Oid,
    worktree: &Path,
    is_test: &dyn Fn(&str) -> bool,
) -> Result<ChangeSet> {
    let pin_tree = repo
        .find_commit(pin)
        .and_then(|c| c.tree())
        .map_err(Error::git(format!(
            "reading the tree of pinned commit {pin}"
        )))?;
    let mut index = git2::Index::new().map_err(Error::git("creating an in-memory index"))?;
    let files = worktree_files(worktree, &pin_tree)?;
    for (path, content, mode) in &files {
        let id = repo
            .blob(content)
            .map_err(Error::git(format!("storing {path}")))?;
        index
            .add(&index_entry(path, id, *mode, content.len()))
            .map_err(Error::git(format!("staging {path}")))?;
    }
    let tree_id = index
        .write_tree_to(repo)
        .map_err(Error::git("writing the patched tree"))?;
    let new_tree = repo
        .find_tree(tree_id)
        .map_err(Error::git("reading the patched tree"))?;
    let mut opts = git2::DiffOptions::new();
    opts.context_lines(3);
    let diff = repo
        .diff_tree_to_tree(Some(&pin_tree), Some(&new_tree), Some(&mut opts))
        .map_err(Error::git("diffing the patched tree against the pin"))?;
    let stats = diff.stats().map_err(Error::git("counting the diff"))?;
    let mut text = Vec::new();
    diff.print(git2::DiffFormat::Patch, |_, _, line| {
        if matches!(line.origin(), '+' | '-' | ' ') {
            text.push(line.origin() as u8);
        }
        text.extend_from_slice(line.content());
        true
    })
    .map_err(Error::git("printing the diff"))?;
    let mut changes = Vec::new();
    for delta in diff.deltas() {
        let (kind, file) = match delta.status() {
            git2::Delta::Added => (ChangeKind::Added, delta.new_file()),
            git2::Delta::Deleted => (ChangeKind::Deleted, delta.old_file()),
            _ => (ChangeKind::Modified, delta.new_file()),
        };
        let Some(path) = file.path().and_then(|p| p.to_str()).map(str::to_owned) else {
            continue;
        };
        let content = if kind == ChangeKind::Deleted {
            None
        } else {
            Some(
                repo.find_blob(file.id())
                    .map_err(Error::git(format!("reading {path}")))?
                    .content()
                    .to_vec(),
            )
        };
        let pinned_content = if kind == ChangeKind::Modified {
            Some(
                repo.find_blob(delta.old_file().id())
                    .map_err(Error::git(format!("reading the pinned {path}")))?
                    .content()
                    .to_vec(),
            )
        } else {
            None
        };
        let is_test = is_test(&path)
            || (kind == ChangeKind::Added
                && content
                    .as_deref()
                    .is_some_and(|c| is_rust_test_module(&path, c)));
        changes.push(FileChange {
            is_test,
            path,
            kind,
            content,
            pinned_content,
            filemode: i32::from(file.mode()),
        });
    }
    changes.sort_by(|a, b| a.path.cmp(&b.path));
    let symlinks = tree_symlinks(repo, &new_tree)?;
    Ok(ChangeSet {
        files: changes,
        tree: tree_id,
        diff: String::from_utf8_lossy(&text).into_owned(),
        insertions: stats.insertions(),
        deletions: stats.deletions(),
        symlinks,
    })
}

/// Why a submitted patch was not turned into a tree: the supervisor's bytes, not the broker's
/// failure, so the intake refuses it with this reason.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PatchRefused(pub String);

/// Rebuild a run's tree from the patch it sent (`git diff --binary` against the pin): the
/// patch is applied to the pinned tree of the broker's clone `repo` (the new objects are written
/// into the clone, as [`collect`] writes a shared worktree's), and `dest` becomes a git
/// repository that borrows the clone's objects, its HEAD the pin and its working directory the
/// patched tree: where a shared worktree would stand, for every check that follows. A patch
/// that does not parse, names a path outside the tree or inside `.git`, or does not apply to
/// the pin is [`PatchRefused`].
pub fn rebuild_tree(
    repo: &git2::Repository,
    pin: git2::Oid,
    patch: &[u8],
    dest: &Path,
) -> Result<std::result::Result<(), PatchRefused>> {
    let refuse = |why: String| Ok(Err(PatchRefused(why)));
    let pin_tree = repo
        .find_commit(pin)
        .and_then(|c| c.tree())
        .map_err(Error::git(format!(
            "reading the tree of pinned commit {pin}"
        )))?;
    let diff = match git2::Diff::from_buffer(patch) {
        Ok(diff) => diff,
        Err(e) => return refuse(format!("the change is not a git patch: {}", e.message())),
    };
    for delta in diff.deltas() {
        for file in [delta.old_file(), delta.new_file()] {
            let Some(path) = file.path() else { continue };
            let Some(text) = path.to_str() else {
                return refuse(format!(
                    "the patch names a path that is not UTF-8: {path:?}"
                ));
            };
            if let Some(bad) = unsafe_patch_path(text) {
                return refuse(format!("the patch names {text:?}: {bad}"));
            }
        }
    }
    let mut index = match repo.apply_to_tree(&pin_tree, &diff, None) {
        Ok(index) => index,
        Err(e) => {
            return refuse(format!(
                "the patch does not apply to the pinned commit {pin}: {}",
                e.message()
            ));
        }
    };
    let tree_id = index
        .write_tree_to(repo)
        .map_err(Error::git("writing the tree the patch makes"))?;
    let tree = repo
        .find_tree(tree_id)
        .map_err(Error::git("reading the tree the patch makes"))?;
    let built =
        git2::Repository::init(dest).map_err(Error::git(format!("creating {}", dest.display())))?;
    let objects = repo.path().join("objects");
    let alternates = built.path().join("objects/info/alternates");
    std::fs::write(&alternates, format!("{}\n", objects.display()))
        .map_err(Error::io(format!("writing {}", alternates.display())))?;
    // Re-open, so the object database reads the alternates file.
    let built =
        git2::Repository::open(dest).map_err(Error::git(format!("opening {}", dest.display())))?;
    built
        .set_head_detached(pin)
        .map_err(Error::git("pointing the rebuilt tree's HEAD at the pin"))?;
    let tree = built.find_tree(tree.id()).map_err(Error::git(
        "reading the patched tree through the alternates",
    ))?;
    let mut checkout = git2::build::CheckoutBuilder::new();
    checkout.force().recreate_missing(true);
    built
        .checkout_tree(tree.as_object(), Some(&mut checkout))
        .map_err(Error::git(format!(
            "writing the patched tree to {}",
            dest.display()
        )))?;
    // The index stays the pin's, as in a run's own worktree: the change is what differs.
    let mut index = built
        .index()
        .map_err(Error::git("opening the rebuilt tree's index"))?;
    let pinned = built
        .find_tree(pin_tree.id())
        .map_err(Error::git("reading the pinned tree through the alternates"))?;
    index
        .read_tree(&pinned)
        .and_then(|()| index.write())
        .map_err(Error::git("resetting the rebuilt tree's index to the pin"))?;
    Ok(Ok(()))
}

/// Why a path of a submitted patch may not be written, if it may not: absolute, `..`, `.git`,
/// empty components or control characters.
fn unsafe_patch_path(path: &str) -> Option<&'static str> {
    if path.is_empty() || path.starts_with('/') {
        return Some("a path must be relative to the repository");
    }
    if path.chars().any(char::is_control) {
        return Some("a path must not contain control characters");
    }
    for part in path.split('/') {
        if part.is_empty() || part == "." || part == ".." {
            return Some("a path must not have empty, `.` or `..` components");
        }
        if part.eq_ignore_ascii_case(".git") {
            return Some("a patch may not write inside .git");
        }
    }
    None
}

/// Every symlink of `tree` (git mode 120000) with its target's text.
fn tree_symlinks(
    repo: &git2::Repository,
    tree: &git2::Tree<'_>,
) -> Result<BTreeMap<String, String>> {
    let mut links = Vec::new();
    tree.walk(git2::TreeWalkMode::PreOrder, |dir, entry| {
        if entry.filemode() == 0o120000
            && let Ok(name) = entry.name()
        {
            links.push((format!("{dir}{name}"), entry.id()));
        }
        git2::TreeWalkResult::Ok
    })
    .map_err(Error::git("walking the patched tree"))?;
    let mut out = BTreeMap::new();
    for (path, id) in links {
        let blob = repo
            .find_blob(id)
            .map_err(Error::git(format!("reading the symlink {path}")))?;
        out.insert(path, String::from_utf8_lossy(blob.content()).into_owned());
    }
    Ok(out)
}

/// A new Rust file that is test code throughout (`#![cfg(test)]` at its top, or nothing but
/// `#[cfg(test)]` items and comments): a unit-test module its source file declares.
fn is_rust_test_module(path: &str, content: &[u8]) -> bool {
    let Some(text) = path
        .ends_with(".rs")
        .then(|| std::str::from_utf8(content).ok())
        .flatten()
    else {
        return false;
    };
    let regions = airlock_policies::rust_test_regions(text);
    !regions.is_empty()
        && text.lines().enumerate().all(|(i, line)| {
            let t = line.trim();
            t.is_empty()
                || t.starts_with("//")
                || regions.iter().any(|(a, b)| (*a..=*b).contains(&(i + 1)))
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn commit_all(repo: &git2::Repository) -> git2::Oid {
        let mut index = repo.index().unwrap();
        // `-f`: the file is listed in .gitignore and tracked anyway.
        index
            .add_all(["*"], git2::IndexAddOption::FORCE, None)
            .unwrap();
        index.write().unwrap();
        let tree = repo.find_tree(index.write_tree().unwrap()).unwrap();
        let sig = git2::Signature::now("t", "t@example.com").unwrap();
        repo.commit(Some("HEAD"), &sig, &sig, "pin", &tree, &[])
            .unwrap()
    }

    #[test]
    fn a_tracked_file_that_an_ignore_rule_matches_is_not_seen_as_deleted() {
        let dir = tempfile::tempdir().unwrap();
        let wt = dir.path().join("wt");
        std::fs::create_dir_all(wt.join("src")).unwrap();
        std::fs::write(wt.join(".gitignore"), "/Cargo.lock\n/target\n").unwrap();
        std::fs::write(wt.join("Cargo.lock"), "version = 4\n").unwrap();
        std::fs::write(wt.join("src/lib.rs"), "pub fn f() {}\n").unwrap();
        let repo = git2::Repository::init(&wt).unwrap();
        let pin = commit_all(&repo);
        std::fs::write(wt.join("src/lib.rs"), "pub fn f() -> u8 { 1 }\n").unwrap();
        // Ignored and untracked: still left out.
        std::fs::create_dir_all(wt.join("target")).unwrap();
        std::fs::write(wt.join("target/junk"), "x").unwrap();
        let changes = collect(&repo, pin, &wt, &|_| false).unwrap();
        let paths: Vec<&str> = changes.files.iter().map(|f| f.path.as_str()).collect();
        assert_eq!(paths, ["src/lib.rs"]);
    }

    /// A run on another host sends its change as a patch; the tree the broker rebuilds from it
    /// is the one it would have read from a shared worktree: text, non-UTF-8 and binary files
    /// added, changed and deleted, a mode change, a symlink and a file without a final newline.
    #[test]
    fn a_patch_of_the_worktree_rebuilds_the_same_tree_in_the_brokers_clone() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let wt = dir.path().join("wt");
        std::fs::create_dir_all(wt.join("src")).unwrap();
        std::fs::create_dir_all(wt.join("assets")).unwrap();
        std::fs::write(wt.join(".gitignore"), "/target\n").unwrap();
        std::fs::write(wt.join("src/lib.py"), "def f():\n    return 1\n").unwrap();
        std::fs::write(wt.join("src/gone.py"), "x = 1\n").unwrap();
        std::fs::write(wt.join("run.sh"), "echo hi\n").unwrap();
        std::fs::write(wt.join("assets/logo.png"), b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR").unwrap();
        let repo = git2::Repository::init(&wt).unwrap();
        let pin = commit_all(&repo);
        let broker_clone = dir.path().join("clone");
        let clone = git2::Repository::clone(wt.to_str().unwrap(), &broker_clone).unwrap();

        std::fs::write(wt.join("src/lib.py"), "def f():\n    return 2").unwrap();
        std::fs::remove_file(wt.join("src/gone.py")).unwrap();
        std::fs::write(wt.join("src/latin1.txt"), b"caf\xe9\n").unwrap();
        std::fs::write(wt.join("assets/logo.png"), b"\x89PNG\r\n\x1a\n\0\x01\x02").unwrap();
        std::fs::write(wt.join("assets/new.bin"), b"\0\x01\x02\x03").unwrap();
        std::fs::set_permissions(wt.join("run.sh"), std::fs::Permissions::from_mode(0o755))
            .unwrap();
        std::os::unix::fs::symlink("lib.py", wt.join("src/alias.py")).unwrap();
        std::fs::create_dir_all(wt.join("target")).unwrap();
        std::fs::write(wt.join("target/junk"), "ignored").unwrap();

        let patch = airlock_policies::change_patch(&wt, &pin.to_string()).unwrap();
        let dest = dir.path().join("rebuilt");
        rebuild_tree(&clone, pin, &patch, &dest).unwrap().unwrap();
        let shared = collect(&clone, pin, &wt, &|_| false).unwrap();
        let rebuilt = collect(&clone, pin, &dest, &|_| false).unwrap();
        assert_eq!(
            rebuilt.tree,
            shared.tree,
            "{}",
            String::from_utf8_lossy(&patch)
        );
        assert_eq!(rebuilt.files.len(), 7);
        // The digest reads the rebuilt tree as it reads a run's worktree.
        let policy = airlock_policies::Policy::builtin().unwrap();
        let from_run = policy.compute_digest(&wt, &pin.to_string()).unwrap();
        let from_bytes = policy.compute_digest(&dest, &pin.to_string()).unwrap();
        assert_eq!(from_bytes.to_diff_digest(), from_run.to_diff_digest());
        assert_eq!(from_bytes.diff, from_run.diff);

        // What does not apply, or reaches outside the tree, is refused with the reason.
        for (bad, says) in [
            (b"not a patch at all\n".to_vec(), "not a git patch"),
            (
                b"diff --git a/src/lib.py b/src/lib.py\n--- a/src/lib.py\n+++ b/src/lib.py\n@@ -1,2 +1,2 @@\n def g():\n-    return 9\n+    return 3\n".to_vec(),
                "does not apply",
            ),
            (
                b"diff --git a/.git/config b/.git/config\nnew file mode 100644\n--- /dev/null\n+++ b/.git/config\n@@ -0,0 +1 @@\n+x\n".to_vec(),
                ".git",
            ),
            (
                b"diff --git a/../x b/../x\nnew file mode 100644\n--- /dev/null\n+++ b/../x\n@@ -0,0 +1 @@\n+x\n".to_vec(),
                "..",
            ),
        ] {
            let dest = tempfile::tempdir().unwrap();
            let refused = rebuild_tree(&clone, pin, &bad, &dest.path().join("t")).unwrap();
            let Err(PatchRefused(why)) = refused else {
                panic!("{} was taken", String::from_utf8_lossy(&bad))
            };
            assert!(why.contains(says), "{why}");
        }
    }

    /// Publication applies the queued diff text to the pinned tree (`publish.rs`): a deleted
    /// binary file must survive that, since intake lets deletions of binary files through.
    #[test]
    fn the_diff_of_a_deleted_binary_file_applies_to_the_pinned_tree() {
        let dir = tempfile::tempdir().unwrap();
        let wt = dir.path().join("wt");
        std::fs::create_dir_all(wt.join("assets")).unwrap();
        std::fs::write(wt.join("assets/logo.png"), b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR").unwrap();
        std::fs::write(wt.join("README.md"), "calc\n").unwrap();
        let repo = git2::Repository::init(&wt).unwrap();
        let pin = commit_all(&repo);
        std::fs::remove_file(wt.join("assets/logo.png")).unwrap();
        let changes = collect(&repo, pin, &wt, &|_| false).unwrap();
        assert_eq!(changes.files.len(), 1);
        assert_eq!(changes.files[0].kind, ChangeKind::Deleted);
        let diff = git2::Diff::from_buffer(changes.diff.as_bytes()).unwrap();
        let base = repo.find_commit(pin).unwrap().tree().unwrap();
        let applied = repo.apply_to_tree(&base, &diff, None);
        let tree = repo
            .find_tree(applied.unwrap().write_tree_to(&repo).unwrap())
            .unwrap();
        assert!(tree.get_path(Path::new("assets/logo.png")).is_err());
        assert!(tree.get_path(Path::new("README.md")).is_ok());
    }
}
