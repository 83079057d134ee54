//! The witness's trees: the pinned commit written out, and the base, pinned-with-new-tests and
//! patched trees built from it and the change set, pinned test files kept as pinned and
//! read-only, a changed Rust file's test code handled like a test file's.

use std::path::Path;

use crate::changes::{ChangeKind, ChangeSet};
use crate::error::{Error, Result};

/// Write the tree of commit `pin` of `repo` into the empty directory `dest`.
pub fn write_pinned_tree(repo: &git2::Repository, pin: git2::Oid, dest: &Path) -> Result<()> {
    let commit = repo
        .find_commit(pin)
        .map_err(Error::git(format!("finding pinned commit {pin}")))?;
    let tree = commit
        .tree()
        .map_err(Error::git("reading the pinned tree"))?;
    write_tree(repo, &tree, dest)
}

fn write_tree(repo: &git2::Repository, tree: &git2::Tree<'_>, dest: &Path) -> Result<()> {
    std::fs::create_dir_all(dest).map_err(Error::io(format!("creating {}", dest.display())))?;
    for entry in tree.iter() {
        let Ok(name) = entry.name() else {
            return Err(Error::Witness(format!(
                "a path in the pinned tree under {} is not UTF-8",
                dest.display()
            )));
        };
        let path = dest.join(name);
        match entry.kind() {
            Some(git2::ObjectType::Tree) => {
                let sub = repo
                    .find_tree(entry.id())
                    .map_err(Error::git(format!("reading tree {name}")))?;
                write_tree(repo, &sub, &path)?;
            }
            Some(git2::ObjectType::Blob) => {
                let blob = repo
                    .find_blob(entry.id())
                    .map_err(Error::git(format!("reading blob {name}")))?;
                write_entry(&path, blob.content(), entry.filemode())?;
            }
            // Submodules (commits) are not part of the witness tree.
            _ => {}
        }
    }
    Ok(())
}

/// Write one file (or symlink, for mode 0o120000) with git's file mode.
fn write_entry(path: &Path, content: &[u8], filemode: i32) -> Result<()> {
    use std::os::unix::fs::PermissionsExt;
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent)
            .map_err(Error::io(format!("creating {}", parent.display())))?;
    }
    if path.symlink_metadata().is_ok() {
        std::fs::remove_file(path).map_err(Error::io(format!("replacing {}", path.display())))?;
    }
    if filemode == 0o120000 {
        let target = String::from_utf8_lossy(content).into_owned();
        return std::os::unix::fs::symlink(&target, path)
            .map_err(Error::io(format!("creating symlink {}", path.display())));
    }
    std::fs::write(path, content).map_err(Error::io(format!("writing {}", path.display())))?;
    let mode = if filemode == 0o100755 { 0o755 } else { 0o644 };
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
        .map_err(Error::io(format!("setting mode of {}", path.display())))
}

fn make_read_only(path: &Path) -> Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let meta = match path.symlink_metadata() {
        Ok(m) if m.file_type().is_file() => m,
        _ => return Ok(()),
    };
    let mode = meta.permissions().mode() & 0o555;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
        .map_err(Error::io(format!("making {} read-only", path.display())))
}

/// Which witness tree to build.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TreeKind {
    /// The pinned commit alone (the base inventory's tree).
    Base,
    /// The pinned source plus the newly added test files.
    PinnedWithNewTests,
    /// The pinned source plus the diff's non-test changes plus the newly added test files.
    Patched,
}

/// Build a witness tree in the empty directory `dest`. Every test file of the pinned tree and
/// every newly added test file is left read-only.
pub fn build_tree(
    repo: &git2::Repository,
    pin: git2::Oid,
    changes: &ChangeSet,
    pinned_test_files: &[String],
    kind: TreeKind,
    dest: &Path,
) -> Result<()> {
    write_pinned_tree(repo, pin, dest)?;
    for change in &changes.files {
        // Rust keeps its unit tests inside the source file (`#[cfg(test)] mod tests`): the
        // test code of a changed source file is handled as a test file's would be.
        if !change.is_test
            && change.kind == ChangeKind::Modified
            && change.path.ends_with(".rs")
            && let Some(content) = &change.content
            && let Some(pinned) = pinned_blob(repo, pin, &change.path)?
            && let (Ok(pinned), Ok(patched)) =
                (std::str::from_utf8(&pinned), std::str::from_utf8(content))
            && let Some(text) = rust_tests_transplanted(pinned, patched, kind)
        {
            write_entry(&dest.join(&change.path), text.as_bytes(), change.filemode)?;
            continue;
        }
        let take = match (kind, change.is_test, change.kind) {
            (TreeKind::Base, _, _) => false,
            (_, true, ChangeKind::Added) => true,
            // Pre-existing test files stay as pinned, whatever the diff did to them.
            (_, true, _) => false,
            (TreeKind::Patched, false, _) => true,
            (TreeKind::PinnedWithNewTests, false, _) => false,
        };
        if !take {
            continue;
        }
        let path = dest.join(&change.path);
        match (&change.kind, &change.content) {
            (ChangeKind::Deleted, _) => {
                if path.symlink_metadata().is_ok() {
                    std::fs::remove_file(&path)
                        .map_err(Error::io(format!("removing {}", path.display())))?;
                }
            }
            (_, Some(content)) => write_entry(&path, content, change.filemode)?,
            (_, None) => {
                return Err(Error::Witness(format!(
                    "the change to {} carries no content",
                    change.path
                )));
            }
        }
    }
    for test in pinned_test_files {
        make_read_only(&dest.join(test))?;
    }
    if kind != TreeKind::Base {
        for change in changes
            .files
            .iter()
            .filter(|c| c.is_test && c.kind == ChangeKind::Added)
        {
            make_read_only(&dest.join(&change.path))?;
        }
    }
    Ok(())
}

/// The pinned content of `path`, if the pin has it as a file.
fn pinned_blob(repo: &git2::Repository, pin: git2::Oid, path: &str) -> Result<Option<Vec<u8>>> {
    let tree = repo
        .find_commit(pin)
        .and_then(|c| c.tree())
        .map_err(Error::git("reading the pinned tree"))?;
    let Ok(entry) = tree.get_path(Path::new(path)) else {
        return Ok(None);
    };
    Ok(repo
        .find_blob(entry.id())
        .ok()
        .map(|b| b.content().to_vec()))
}

/// The lines of `text` outside `regions` (1-based inclusive), and the lines inside them.
fn split_regions(text: &str, regions: &[(usize, usize)]) -> (Vec<String>, Vec<String>) {
    let (mut code, mut tests) = (Vec::new(), Vec::new());
    for (i, line) in text.lines().enumerate() {
        let n = i + 1;
        if regions.iter().any(|(a, b)| (*a..=*b).contains(&n)) {
            tests.push(line.to_owned());
        } else {
            code.push(line.to_owned());
        }
    }
    (code, tests)
}

/// Whether `old` is a subsequence of `new`: `new` only adds lines.
fn only_adds(old: &[String], new: &[String]) -> bool {
    let mut want = old.iter().peekable();
    for line in new {
        if want.peek() == Some(&line) {
            want.next();
        }
    }
    want.peek().is_none()
}

/// A changed Rust source file in a witness tree, its test code handled like a test file's: the
/// pinned tree gets the pinned code with the patched test code (the new tests, on the pinned
/// source), so long as the patch only added test lines; when it changed or removed existing
/// test lines, those stay as pinned in both trees (a weakened in-file test cannot make the
/// witness green) and the patched tree gets the patched code with the pinned test code.
/// `None` when the test code is unchanged (the file is taken as the tree kind takes source).
fn rust_tests_transplanted(pinned: &str, patched: &str, kind: TreeKind) -> Option<String> {
    let pinned_regions = airlock_policies::rust_test_regions(pinned);
    let patched_regions = airlock_policies::rust_test_regions(patched);
    let (pinned_code, pinned_tests) = split_regions(pinned, &pinned_regions);
    let (patched_code, patched_tests) = split_regions(patched, &patched_regions);
    if pinned_tests == patched_tests {
        return None;
    }
    let additions_only = only_adds(&pinned_tests, &patched_tests);
    let (code, tests) = match (kind, additions_only) {
        (TreeKind::Base, _) => return None,
        (TreeKind::PinnedWithNewTests, true) => (pinned_code, patched_tests),
        (TreeKind::PinnedWithNewTests, false) => return Some(pinned.to_owned()),
        (TreeKind::Patched, true) => return None,
        (TreeKind::Patched, false) => (patched_code, pinned_tests),
    };
    let mut text = code.join("\n");
    text.push_str("\n\n");
    text.push_str(&tests.join("\n"));
    text.push('\n');
    Some(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    const PINNED: &str = "pub fn clamp(x: i64, lo: i64, hi: i64) -> i64 {\n    x.max(lo)\n}\n\n#[cfg(test)]\nmod tests {\n    #[test]\n    fn low() {\n        assert_eq!(super::clamp(-5, 0, 3), 0);\n    }\n}\n";

    fn patched(fix: bool, tests: &str) -> String {
        let code = if fix {
            "pub fn clamp(x: i64, lo: i64, hi: i64) -> i64 {\n    x.max(lo).min(hi)\n}\n"
        } else {
            "pub fn clamp(x: i64, lo: i64, hi: i64) -> i64 {\n    x.max(lo)\n}\n"
        };
        format!("{code}\n#[cfg(test)]\nmod tests {{\n{tests}}}\n")
    }

    const LOW: &str =
        "    #[test]\n    fn low() {\n        assert_eq!(super::clamp(-5, 0, 3), 0);\n    }\n";
    const HIGH: &str =
        "\n    #[test]\n    fn high() {\n        assert_eq!(super::clamp(9, 0, 3), 3);\n    }\n";

    #[test]
    fn a_test_added_to_an_in_file_module_runs_on_the_pinned_source() {
        let patched = patched(true, &format!("{LOW}{HIGH}"));
        let pinned_tree =
            rust_tests_transplanted(PINNED, &patched, TreeKind::PinnedWithNewTests).unwrap();
        assert!(pinned_tree.contains("    x.max(lo)\n}"), "{pinned_tree}");
        assert!(!pinned_tree.contains("min(hi)"), "{pinned_tree}");
        assert!(pinned_tree.contains("fn high()") && pinned_tree.contains("fn low()"));
        // The patched tree takes the file as patched; the base tree as pinned.
        assert_eq!(
            rust_tests_transplanted(PINNED, &patched, TreeKind::Patched),
            None
        );
        assert_eq!(
            rust_tests_transplanted(PINNED, &patched, TreeKind::Base),
            None
        );
    }

    #[test]
    fn a_weakened_in_file_test_stays_as_pinned_in_both_trees() {
        let weakened = patched(true, &format!("{}{HIGH}", LOW.replace("0);", "-5);")));
        let pinned_tree =
            rust_tests_transplanted(PINNED, &weakened, TreeKind::PinnedWithNewTests).unwrap();
        assert_eq!(pinned_tree, PINNED);
        let patched_tree = rust_tests_transplanted(PINNED, &weakened, TreeKind::Patched).unwrap();
        assert!(patched_tree.contains("min(hi)"), "{patched_tree}");
        assert!(
            patched_tree.contains("assert_eq!(super::clamp(-5, 0, 3), 0);"),
            "{patched_tree}"
        );
        assert!(!patched_tree.contains("fn high()"), "{patched_tree}");
    }

    #[test]
    fn unchanged_test_code_leaves_the_file_to_the_tree_kind() {
        let patched = patched(true, LOW);
        for kind in [
            TreeKind::Base,
            TreeKind::PinnedWithNewTests,
            TreeKind::Patched,
        ] {
            assert_eq!(rust_tests_transplanted(PINNED, &patched, kind), None);
        }
    }
}

#[cfg(test)]
mod mod_decl_tests {
    use super::*;

    #[test]
    fn a_declared_test_module_is_taken_into_the_pinned_tree() {
        let pinned = "mod a;\npub use a::A;\n\npub fn f() -> u8 {\n    0\n}\n";
        let patched = "mod a;\npub use a::A;\n\n#[cfg(test)]\nmod new_tests;\n\npub fn f() -> u8 {\n    1\n}\n";
        let tree = rust_tests_transplanted(pinned, patched, TreeKind::PinnedWithNewTests).unwrap();
        assert!(tree.contains("#[cfg(test)]\nmod new_tests;"), "{tree}");
        assert!(tree.contains("    0\n"), "{tree}");
    }
}
