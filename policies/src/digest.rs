//! The diff digest: every `diff_digest` field of `open_pr`, the detectors' findings, and the
//! unified diff they were computed from.

use std::collections::BTreeSet;
use std::path::Path;

use airlock_schemas::DiffDigest;
use serde::Serialize;

use crate::detect::MoveKind;
use crate::detect::{FileLines, Finding, LineRef, SeqLine, Side};
use crate::diff::{FileDiff, LineKind, files_of_git_diff, parse_unified_diff};
use crate::languages::{Language, language_of};
use crate::testfiles::rust_test_regions;
use crate::{Error, Policy, Result};

/// Everything the broker recomputes from a tree, and the evidence behind it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DigestReport {
    /// Every path the diff touches (both sides of a rename), sorted.
    pub files_changed: Vec<String>,
    /// Added lines (binary files count 0).
    pub insertions: u64,
    /// Removed lines.
    pub deletions: u64,
    /// Test files that do not exist at base, sorted.
    pub test_files_added: Vec<String>,
    /// Test files that exist at base and whose existing test lines changed or were removed
    /// (or that were deleted), sorted. Appending new tests to an existing test file does not
    /// make it modified.
    pub test_files_modified: Vec<String>,
    /// Findings of kind `assertion-removed`.
    pub assertions_removed: u64,
    /// Findings of kind `skip-marker-added` (markers added, tests disabled).
    pub skip_markers_added: u64,
    /// Every detector finding, sorted by file, line, side, kind.
    pub findings: Vec<Finding>,
    /// The unified diff the digest was computed from.
    pub diff: String,
}

impl DigestReport {
    /// The `open_pr.diff_digest` part, for comparison with a model's claim.
    pub fn to_diff_digest(&self) -> DiffDigest {
        DiffDigest {
            files_changed: self.files_changed.clone(),
            insertions: self.insertions,
            deletions: self.deletions,
            test_files_added: self.test_files_added.clone(),
            test_files_modified: self.test_files_modified.clone(),
            assertions_removed: self.assertions_removed,
            skip_markers_added: self.skip_markers_added,
        }
    }

    /// Findings of one kind.
    pub fn findings_of(&self, kind: MoveKind) -> impl Iterator<Item = &Finding> {
        self.findings.iter().filter(move |f| f.kind == kind)
    }
}

/// [`Policy::compute_digest`] with the built-in policy.
pub fn compute_digest(repo: &Path, base_commit: &str) -> Result<DigestReport> {
    Policy::builtin()?.compute_digest(repo, base_commit)
}

/// Where the full text of a changed file comes from, when it is known.
type Sources<'a> = &'a dyn Fn(Side, &str) -> Option<String>;

pub(crate) fn from_unified_diff(policy: &Policy, text: &str) -> Result<DigestReport> {
    let files = parse_unified_diff(text)?;
    Ok(digest_files(policy, &files, text, &|_, _| None))
}

fn test_context_heuristic(hunk: &crate::diff::Hunk) -> bool {
    let marker = |s: &str| {
        let t = s.trim();
        t.contains("#[test]")
            || t.contains("#[cfg(test)]")
            || t.contains("::test]")
            || t.starts_with("mod tests")
            || t.starts_with("mod test ")
            || t.starts_with("pub mod tests")
    };
    marker(&hunk.section)
        || hunk.section.contains("mod tests")
        || hunk.lines.iter().any(|l| marker(&l.text))
}

fn in_regions(regions: &[(usize, usize)], line: usize) -> bool {
    regions.iter().any(|(s, e)| (*s..=*e).contains(&line))
}

fn digest_files(
    policy: &Policy,
    files: &[FileDiff],
    text: &str,
    sources: Sources<'_>,
) -> DigestReport {
    let mut files_changed = BTreeSet::new();
    let mut test_files_added = BTreeSet::new();
    let mut test_files_modified = BTreeSet::new();
    let (mut insertions, mut deletions) = (0u64, 0u64);
    let mut views: Vec<FileLines> = Vec::new();

    for f in files {
        files_changed.extend(f.old_path.iter().cloned());
        files_changed.extend(f.new_path.iter().cloned());
        insertions += f.insertions() as u64;
        deletions += f.deletions() as u64;
        let path = f.path().to_string();
        let language = language_of(&path);
        let old_test_path = f
            .old_path
            .as_deref()
            .is_some_and(|p| policy.is_test_path(p));
        let new_test_path = f
            .new_path
            .as_deref()
            .is_some_and(|p| policy.is_test_path(p));
        let rust = language == Some(Language::Rust);
        // Rust: test regions from the full sources when available.
        let regions = |side: Side, p: Option<&String>| -> Option<Vec<(usize, usize)>> {
            if !rust {
                return Some(Vec::new());
            }
            p.and_then(|p| sources(side, p))
                .map(|src| rust_test_regions(&src))
        };
        let old_regions = regions(Side::Old, f.old_path.as_ref());
        let new_regions = regions(Side::New, f.new_path.as_ref());

        let mut view = FileLines {
            path: path.clone(),
            language: language.unwrap_or(Language::Python),
            new_file: f.old_path.is_none(),
            removed: Vec::new(),
            added: Vec::new(),
            pairs: Vec::new(),
            new_runs: Vec::new(),
            old_runs: Vec::new(),
        };
        let mut removed_in_tests = false;
        let mut added_in_tests = false;
        for hunk in &f.hunks {
            let heuristic = rust && test_context_heuristic(hunk);
            let old_test = |line: usize| {
                old_test_path
                    || match &old_regions {
                        Some(r) => in_regions(r, line),
                        None => heuristic,
                    }
            };
            let new_test = |line: usize| {
                new_test_path
                    || match &new_regions {
                        Some(r) => in_regions(r, line),
                        None => heuristic,
                    }
            };
            let mut run_removed: Vec<LineRef> = Vec::new();
            let mut run_added: Vec<LineRef> = Vec::new();
            let mut new_run: Vec<SeqLine> = Vec::new();
            let mut old_run: Vec<SeqLine> = Vec::new();
            let flush =
                |removed: &mut Vec<LineRef>, added: &mut Vec<LineRef>, view: &mut FileLines| {
                    for (r, a) in removed.iter().zip(added.iter()) {
                        view.pairs.push((r.clone(), a.clone()));
                    }
                    removed.clear();
                    added.clear();
                };
            for line in &hunk.lines {
                match line.kind {
                    LineKind::Removed => {
                        if !run_added.is_empty() {
                            flush(&mut run_removed, &mut run_added, &mut view);
                        }
                        let n = line.old_line.unwrap_or(0);
                        old_run.push(SeqLine {
                            line: n,
                            text: line.text.clone(),
                            changed: true,
                            test: old_test(n),
                        });
                        if old_test(n) {
                            removed_in_tests = true;
                            let r = LineRef {
                                line: n,
                                text: line.text.clone(),
                            };
                            view.removed.push(r.clone());
                            run_removed.push(r);
                        }
                    }
                    LineKind::Added => {
                        let n = line.new_line.unwrap_or(0);
                        new_run.push(SeqLine {
                            line: n,
                            text: line.text.clone(),
                            changed: true,
                            test: new_test(n),
                        });
                        if new_test(n) {
                            added_in_tests = true;
                            let a = LineRef {
                                line: n,
                                text: line.text.clone(),
                            };
                            view.added.push(a.clone());
                            run_added.push(a);
                        }
                    }
                    LineKind::Context => {
                        flush(&mut run_removed, &mut run_added, &mut view);
                        for (run, n) in
                            [(&mut new_run, line.new_line), (&mut old_run, line.old_line)]
                        {
                            let n = n.unwrap_or(0);
                            run.push(SeqLine {
                                line: n,
                                text: line.text.clone(),
                                changed: false,
                                test: false,
                            });
                        }
                    }
                }
            }
            flush(&mut run_removed, &mut run_added, &mut view);
            view.new_runs.push(new_run);
            view.old_runs.push(old_run);
        }
        match (&f.old_path, &f.new_path) {
            (None, Some(new)) => {
                let has_tests = new_test_path
                    || (rust
                        && new_regions
                            .as_ref()
                            .map_or(added_in_tests, |r| !r.is_empty()));
                if has_tests {
                    test_files_added.insert(new.clone());
                }
            }
            (Some(old), new) => {
                let is_test = old_test_path
                    || (rust
                        && old_regions
                            .as_ref()
                            .map_or(removed_in_tests, |r| !r.is_empty()));
                if is_test && (new.is_none() || removed_in_tests) {
                    test_files_modified.insert(old.clone());
                }
                if let Some(new) = new
                    && new != old
                    && new_test_path
                {
                    test_files_added.insert(new.clone());
                }
            }
            (None, None) => {}
        }
        if language.is_some() {
            views.push(view);
        }
    }
    let findings = policy.detectors.run(&views);
    let count = |kind: MoveKind| findings.iter().filter(|f| f.kind == kind).count() as u64;
    DigestReport {
        files_changed: files_changed.into_iter().collect(),
        insertions,
        deletions,
        test_files_added: test_files_added.into_iter().collect(),
        test_files_modified: test_files_modified.into_iter().collect(),
        assertions_removed: count(MoveKind::AssertionRemoved),
        skip_markers_added: count(MoveKind::SkipMarkerAdded),
        findings,
        diff: text.to_string(),
    }
}

fn git(context: &str) -> impl FnOnce(git2::Error) -> Error + '_ {
    move |source| Error::Git {
        context: context.to_string(),
        source,
    }
}

/// The repository at `repo_path`, once `base_commit` is known to be a full commit id.
fn open_at(repo_path: &Path, base_commit: &str) -> Result<git2::Repository> {
    let full_hex = base_commit.len() == 40
        && base_commit
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
    if !full_hex {
        return Err(Error::BaseCommit(base_commit.to_string()));
    }
    git2::Repository::open(repo_path).map_err(git("open repository"))
}

/// What the digest compares: the pinned tree against the working directory, untracked files
/// included and ignored ones left out, submodules ignored.
fn worktree_diff_options() -> git2::DiffOptions {
    let mut options = git2::DiffOptions::new();
    options
        .include_untracked(true)
        .recurse_untracked_dirs(true)
        .show_untracked_content(true)
        .include_ignored(false)
        .include_typechange(true)
        .ignore_submodules(true)
        .context_lines(3);
    options
}

/// The change of the working directory of the repository at `repo_path` against
/// `base_commit`, as one git patch in the `git diff --binary` format: exactly the files the
/// digest covers (untracked ones included, ignored ones not), binary files as `GIT binary
/// patch` hunks, file modes and symlinks kept, full object ids. It is what a run on another
/// host sends the broker instead of a path; the broker applies it to its own clone's pin.
pub fn change_patch(repo_path: &Path, base_commit: &str) -> Result<Vec<u8>> {
    let repo = open_at(repo_path, base_commit)?;
    let oid = git2::Oid::from_str(base_commit).map_err(git("parse base commit"))?;
    let commit = repo.find_commit(oid).map_err(git("find base commit"))?;
    let tree = commit.tree().map_err(git("read base tree"))?;
    let mut options = worktree_diff_options();
    options.show_binary(true).id_abbrev(40);
    let diff = repo
        .diff_tree_to_workdir(Some(&tree), Some(&mut options))
        .map_err(git("diff base tree to working directory"))?;
    let mut patch = Vec::new();
    for index in 0..diff.deltas().len() {
        if let Some(mut one) =
            git2::Patch::from_diff(&diff, index).map_err(git("make the patch of one file"))?
        {
            let buf = one.to_buf().map_err(git("print the patch of one file"))?;
            patch.extend_from_slice(&buf);
        }
    }
    Ok(patch)
}

pub(crate) fn compute(
    policy: &Policy,
    repo_path: &Path,
    base_commit: &str,
) -> Result<DigestReport> {
    let repo = open_at(repo_path, base_commit)?;
    let workdir = repo
        .workdir()
        .ok_or_else(|| Error::Git {
            context: "repository has no working directory".to_string(),
            source: git2::Error::from_str("bare repository"),
        })?
        .to_path_buf();
    let oid = git2::Oid::from_str(base_commit).map_err(git("parse base commit"))?;
    let commit = repo.find_commit(oid).map_err(git("find base commit"))?;
    let tree = commit.tree().map_err(git("read base tree"))?;
    let diff = repo
        .diff_tree_to_workdir(Some(&tree), Some(&mut worktree_diff_options()))
        .map_err(git("diff base tree to working directory"))?;
    let mut text = Vec::<u8>::new();
    diff.print(git2::DiffFormat::Patch, |_delta, _hunk, line| {
        match line.origin() {
            '+' | '-' | ' ' => {
                text.push(line.origin() as u8);
                text.extend_from_slice(line.content());
            }
            _ => text.extend_from_slice(line.content()),
        }
        true
    })
    .map_err(git("print diff"))?;
    let text = String::from_utf8_lossy(&text).into_owned();
    let files = files_of_git_diff(&diff)?;
    let sources = |side: Side, path: &str| -> Option<String> {
        match side {
            Side::Old => {
                let entry = tree.get_path(Path::new(path)).ok()?;
                let blob = entry.to_object(&repo).ok()?.peel_to_blob().ok()?;
                Some(String::from_utf8_lossy(blob.content()).into_owned())
            }
            Side::New => {
                let full = workdir.join(path);
                let meta = std::fs::symlink_metadata(&full).ok()?;
                if !meta.file_type().is_file() {
                    return None;
                }
                std::fs::read(&full)
                    .ok()
                    .map(|b| String::from_utf8_lossy(&b).into_owned())
            }
        }
    };
    Ok(digest_files(policy, &files, &text, &sources))
}
