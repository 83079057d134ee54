//! Which lines of a pull request's diff a review comment may sit on, and the diff itself.
//!
//! GitHub anchors an inline comment to one line of the pull request's diff: side `RIGHT` for a
//! line of the head version the diff adds or shows as context, side `LEFT` for a line of the
//! base version it removes or shows as context, always inside a hunk. The supervisor checks its
//! reviewer's comments against this map before it submits them, and the broker checks them
//! again against the diff it computed itself; both take the map from here.
//!
//! The diff is the pull request's as GitHub shows it: from the merge base of the base and the
//! head commits to the head commit ([`pull_request_diff`]).

use std::collections::{BTreeMap, BTreeSet};

use airlock_schemas::{DiffSide, Review};

use crate::diff::{FileDiff, LineKind, files_of_git_diff};
use crate::{Error, Result};

/// The lines of one file a comment may name, per side.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct FileLines {
    left: BTreeSet<u64>,
    right: BTreeSet<u64>,
}

/// The commentable lines of a diff, by path (a deleted file under its old path, any other
/// under its new one).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DiffLineMap {
    files: BTreeMap<String, FileLines>,
}

/// A comment whose anchor is not a line of the diff.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OffDiffComment {
    /// Its index in `comments` (0-based).
    pub index: usize,
    /// The path it names.
    pub path: String,
    /// The line it names.
    pub line: u64,
    /// The side it names.
    pub side: DiffSide,
    /// Why the line is not commentable, for the refusal.
    pub reason: String,
}

impl std::fmt::Display for OffDiffComment {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "comments[{}] on {:?} line {} ({}): {}",
            self.index,
            self.path,
            self.line,
            side_name(self.side),
            self.reason
        )
    }
}

/// `LEFT` or `RIGHT`, as GitHub spells the side.
pub fn side_name(side: DiffSide) -> &'static str {
    match side {
        DiffSide::Left => "LEFT",
        DiffSide::Right => "RIGHT",
    }
}

fn to_u64(n: usize) -> u64 {
    u64::try_from(n).unwrap_or(u64::MAX)
}

impl DiffLineMap {
    /// The map of `files`' hunks: removed and context lines on the left (at their base line
    /// numbers), added and context lines on the right (at their head line numbers).
    pub fn of(files: &[FileDiff]) -> DiffLineMap {
        let mut map = DiffLineMap::default();
        for file in files {
            let entry = map.files.entry(file.path().to_owned()).or_default();
            for line in file.hunks.iter().flat_map(|h| &h.lines) {
                match line.kind {
                    LineKind::Removed => entry.left.extend(line.old_line.map(to_u64)),
                    LineKind::Added => entry.right.extend(line.new_line.map(to_u64)),
                    LineKind::Context => {
                        entry.left.extend(line.old_line.map(to_u64));
                        entry.right.extend(line.new_line.map(to_u64));
                    }
                }
            }
        }
        map
    }

    /// Whether a comment on `path`, `line` of `side` sits on a line of the diff.
    pub fn contains(&self, path: &str, side: DiffSide, line: u64) -> bool {
        self.files.get(path).is_some_and(|f| match side {
            DiffSide::Left => f.left.contains(&line),
            DiffSide::Right => f.right.contains(&line),
        })
    }

    /// The paths the diff touches, sorted.
    pub fn paths(&self) -> impl Iterator<Item = &str> {
        self.files.keys().map(String::as_str)
    }

    /// Every comment of `review` that is not on a line of the diff, in order; empty when all
    /// are.
    pub fn off_diff_comments(&self, review: &Review) -> Vec<OffDiffComment> {
        review
            .comments
            .iter()
            .enumerate()
            .filter(|(_, c)| !self.contains(&c.path, c.side, c.line))
            .map(|(index, c)| OffDiffComment {
                index,
                path: c.path.clone(),
                line: c.line,
                side: c.side,
                reason: self.why_not(&c.path, c.side),
            })
            .collect()
    }

    fn why_not(&self, path: &str, side: DiffSide) -> String {
        let Some(file) = self.files.get(path) else {
            return "the diff does not touch this file".to_owned();
        };
        let lines = match side {
            DiffSide::Left => &file.left,
            DiffSide::Right => &file.right,
        };
        if lines.is_empty() {
            let what = match side {
                DiffSide::Left => "the file has no base lines in the diff (it is new)",
                DiffSide::Right => "the file has no head lines in the diff (it is deleted)",
            };
            return what.to_owned();
        }
        format!(
            "the line is outside the diff's hunks; on this side the diff shows lines {}",
            ranges(lines)
        )
    }
}

/// `3-9, 20-24`: a set of line numbers as ranges, for a refusal.
fn ranges(lines: &BTreeSet<u64>) -> String {
    let mut out: Vec<String> = Vec::new();
    let mut run: Option<(u64, u64)> = None;
    for &n in lines {
        run = match run {
            Some((start, end)) if n == end + 1 => Some((start, n)),
            Some((start, end)) => {
                out.push(range(start, end));
                Some((n, n))
            }
            None => Some((n, n)),
        };
    }
    if let Some((start, end)) = run {
        out.push(range(start, end));
    }
    out.join(", ")
}

fn range(start: u64, end: u64) -> String {
    if start == end {
        start.to_string()
    } else {
        format!("{start}-{end}")
    }
}

/// A pull request's diff as airlock computed it: from the merge base to the head commit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PullRequestDiff {
    /// The merge base of the base and head commits (40 hex).
    pub merge_base: String,
    /// The unified diff text, as `git diff` prints it (three lines of context).
    pub text: String,
    /// Its files, hunks and lines.
    pub files: Vec<FileDiff>,
}

impl PullRequestDiff {
    /// The lines a review comment may name.
    pub fn line_map(&self) -> DiffLineMap {
        DiffLineMap::of(&self.files)
    }
}

fn git(context: &str) -> impl FnOnce(git2::Error) -> Error + '_ {
    move |source| Error::Git {
        context: context.to_string(),
        source,
    }
}

/// The diff of pull request `base`..`head` in the repository at `repo_path` (bare or not; both
/// commits must be in it): the merge base's tree to the head's, with three lines of context,
/// as GitHub shows a pull request.
pub fn pull_request_diff(
    repo_path: &std::path::Path,
    base: &str,
    head: &str,
) -> Result<PullRequestDiff> {
    let repo = git2::Repository::open(repo_path).map_err(git("open the repository"))?;
    let base = git2::Oid::from_str(base).map_err(git("parse the base commit id"))?;
    let head = git2::Oid::from_str(head).map_err(git("parse the head commit id"))?;
    let merge_base = repo
        .merge_base(base, head)
        .map_err(git("find the merge base of the base and head commits"))?;
    let old = repo
        .find_commit(merge_base)
        .and_then(|c| c.tree())
        .map_err(git("read the merge base's tree"))?;
    let new = repo
        .find_commit(head)
        .and_then(|c| c.tree())
        .map_err(git("read the head commit's tree"))?;
    let mut options = git2::DiffOptions::new();
    options
        .include_typechange(true)
        .ignore_submodules(true)
        .context_lines(3);
    let diff = repo
        .diff_tree_to_tree(Some(&old), Some(&new), Some(&mut options))
        .map_err(git("diff the merge base to the head"))?;
    let mut text = Vec::<u8>::new();
    diff.print(git2::DiffFormat::Patch, |_delta, _hunk, line| {
        if matches!(line.origin(), '+' | '-' | ' ') {
            text.push(line.origin() as u8);
        }
        text.extend_from_slice(line.content());
        true
    })
    .map_err(git("print the diff"))?;
    Ok(PullRequestDiff {
        merge_base: merge_base.to_string(),
        text: String::from_utf8_lossy(&text).into_owned(),
        files: files_of_git_diff(&diff)?,
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::diff::parse_unified_diff;
    use airlock_schemas::{ReviewComment, ReviewVerdict};

    const DIFF: &str = "\
diff --git a/calc/ops.py b/calc/ops.py
index 1111111..2222222 100644
--- a/calc/ops.py
+++ b/calc/ops.py
@@ -3,5 +3,6 @@ def add(a, b):
 line3
 line4
-old5
+new5
+new6
 line6
 line7
@@ -20,3 +21,2 @@ def sub(a, b):
 line20
-old21
 line22
diff --git a/NEW.md b/NEW.md
new file mode 100644
index 0000000..3333333
--- /dev/null
+++ b/NEW.md
@@ -0,0 +1,2 @@
+hello
+world
diff --git a/gone.txt b/gone.txt
deleted file mode 100644
index 4444444..0000000
--- a/gone.txt
+++ /dev/null
@@ -1,2 +0,0 @@
-bye
-now
";

    fn map() -> DiffLineMap {
        DiffLineMap::of(&parse_unified_diff(DIFF).unwrap())
    }

    #[test]
    fn diffmap_right_holds_added_and_context_lines_of_each_hunk() {
        let m = map();
        for line in [3, 4, 5, 6, 7, 8, 21, 22] {
            assert!(m.contains("calc/ops.py", DiffSide::Right, line), "{line}");
        }
        // Between the hunks, before the first, after the last.
        for line in [1, 2, 9, 20, 23] {
            assert!(!m.contains("calc/ops.py", DiffSide::Right, line), "{line}");
        }
    }

    #[test]
    fn diffmap_left_holds_removed_and_context_lines_at_base_numbers() {
        let m = map();
        for line in [3, 4, 5, 6, 7, 20, 21, 22] {
            assert!(m.contains("calc/ops.py", DiffSide::Left, line), "{line}");
        }
        for line in [2, 8, 19, 23] {
            assert!(!m.contains("calc/ops.py", DiffSide::Left, line), "{line}");
        }
    }

    #[test]
    fn diffmap_new_files_have_only_a_right_side_and_deleted_files_only_a_left() {
        let m = map();
        assert!(m.contains("NEW.md", DiffSide::Right, 1));
        assert!(m.contains("NEW.md", DiffSide::Right, 2));
        assert!(!m.contains("NEW.md", DiffSide::Left, 1));
        assert!(m.contains("gone.txt", DiffSide::Left, 2));
        assert!(!m.contains("gone.txt", DiffSide::Right, 1));
        assert!(!m.contains("README.md", DiffSide::Right, 1));
        assert_eq!(
            m.paths().collect::<Vec<_>>(),
            ["NEW.md", "calc/ops.py", "gone.txt"]
        );
    }

    #[test]
    fn diffmap_off_diff_comments_are_named_by_index_path_line_and_reason() {
        let comment = |path: &str, line: u64, side: DiffSide| ReviewComment {
            path: path.to_owned(),
            line,
            side,
            body: "x".to_owned(),
        };
        let review = Review {
            summary: "s".to_owned(),
            verdict: ReviewVerdict::Comment,
            comments: vec![
                comment("calc/ops.py", 6, DiffSide::Right),
                comment("calc/ops.py", 12, DiffSide::Right),
                comment("NEW.md", 1, DiffSide::Left),
                comment("gone.txt", 1, DiffSide::Right),
                comment("other.py", 1, DiffSide::Right),
                comment("gone.txt", 1, DiffSide::Left),
            ],
        };
        let off = map().off_diff_comments(&review);
        let named: Vec<String> = off.iter().map(ToString::to_string).collect();
        assert_eq!(
            named,
            [
                "comments[1] on \"calc/ops.py\" line 12 (RIGHT): the line is outside the diff's \
                 hunks; on this side the diff shows lines 3-8, 21-22",
                "comments[2] on \"NEW.md\" line 1 (LEFT): the file has no base lines in the diff \
                 (it is new)",
                "comments[3] on \"gone.txt\" line 1 (RIGHT): the file has no head lines in the \
                 diff (it is deleted)",
                "comments[4] on \"other.py\" line 1 (RIGHT): the diff does not touch this file",
            ]
        );
    }

    #[test]
    fn diffmap_of_a_real_pull_request_starts_at_the_merge_base() {
        let dir = tempfile::tempdir().unwrap();
        let repo = git2::Repository::init(dir.path()).unwrap();
        let sig = git2::Signature::now("t", "t@example.com").unwrap();
        let commit = |parent: Option<git2::Oid>, files: &[(&str, &str)]| {
            let mut index = repo.index().unwrap();
            index.clear().unwrap();
            for (path, text) in files {
                let blob = repo.blob(text.as_bytes()).unwrap();
                let entry = git2::IndexEntry {
                    ctime: git2::IndexTime::new(0, 0),
                    mtime: git2::IndexTime::new(0, 0),
                    dev: 0,
                    ino: 0,
                    mode: 0o100_644,
                    uid: 0,
                    gid: 0,
                    file_size: 0,
                    id: blob,
                    flags: 0,
                    flags_extended: 0,
                    path: path.as_bytes().to_vec(),
                };
                index.add(&entry).unwrap();
            }
            let tree = repo.find_tree(index.write_tree().unwrap()).unwrap();
            let parents: Vec<git2::Commit<'_>> = parent
                .iter()
                .map(|p| repo.find_commit(*p).unwrap())
                .collect();
            let refs: Vec<&git2::Commit<'_>> = parents.iter().collect();
            repo.commit(None, &sig, &sig, "c", &tree, &refs).unwrap()
        };
        let root = commit(None, &[("a.py", "1\n2\n3\n"), ("b.py", "x\n")]);
        // The base branch moves on (b.py changes); the pull request changes a.py only.
        let base = commit(Some(root), &[("a.py", "1\n2\n3\n"), ("b.py", "y\n")]);
        let head = commit(Some(root), &[("a.py", "1\nTWO\n3\n"), ("b.py", "x\n")]);
        let pr = pull_request_diff(dir.path(), &base.to_string(), &head.to_string()).unwrap();
        assert_eq!(pr.merge_base, root.to_string());
        let m = pr.line_map();
        assert_eq!(m.paths().collect::<Vec<_>>(), ["a.py"]);
        assert!(m.contains("a.py", DiffSide::Right, 2));
        assert!(m.contains("a.py", DiffSide::Left, 2));
        assert!(pr.text.contains("-2\n+TWO\n"), "{}", pr.text);
    }
}
