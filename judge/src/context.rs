//! Assembling what the judge sees of one queued submission: the artefact (issue, diff, the
//! witness steps' output, the PR body, the flags) and the codebase context the agent started
//! from (the file tree ranked by the issue, the retrieval engine's top candidates, and the
//! files the diff touches, each as of the base commit). Only artefacts: never the run's trace.

use std::path::Path;

use airlock_policies::testrun::Grade;

use crate::{CandidateFile, CodebaseContext, JudgeInput};

/// Bytes of one candidate file shown to the judge, as the agent's bounded read allows.
pub const CANDIDATE_FILE_MAX_BYTES: usize = 10 * 1024;
/// Characters of the file tree shown to the judge (the supervisor's warm-start budget).
pub const FILE_TREE_CHARS: usize = 6000;
/// How many retrieval candidates the judge is shown: the supervisor's default warm start.
pub const SEARCH_CANDIDATES: usize = 8;

/// One witness step of the submission, as the broker recorded it.
#[derive(Debug, Clone, Copy)]
pub struct Evidence<'a> {
    /// `pinned_selected`, `patched_selected`, `base_full` or `patched_full`.
    pub step: &'a str,
    /// What the step had to show (`fail`, `pass`, `inventory`, `green`).
    pub expect: &'a str,
    /// The command line.
    pub argv: &'a [String],
    /// Exit code, `None` when killed.
    pub exit_code: Option<i32>,
    /// Standard output, as kept.
    pub stdout: &'a str,
    /// Standard error, as kept.
    pub stderr: &'a str,
    /// The step's grade.
    pub grade: &'a Grade,
}

/// A queued submission, as far as the judge may see it.
#[derive(Debug, Clone)]
pub struct Submission<'a> {
    /// The issue identifier.
    pub issue_id: &'a str,
    /// The unified diff the broker computed.
    pub diff: &'a str,
    /// The accepted `open_pr` arguments, as JSON text (the PR body is taken from them).
    pub open_pr_args: &'a str,
    /// The witness steps, in order.
    pub evidence: Vec<Evidence<'a>>,
    /// The detectors' flags.
    pub flags: &'a [String],
}

/// The judge's input: the artefact of `submission`, the issue text and the context.
pub fn judge_input(
    submission: &Submission<'_>,
    issue_text: String,
    context: CodebaseContext,
) -> JudgeInput {
    let args: serde_json::Value = serde_json::from_str(submission.open_pr_args).unwrap_or_default();
    let pr_body = args["body"].as_str().unwrap_or("").to_owned();
    let mut before = String::new();
    let mut after = String::new();
    let mut witness = String::new();
    for step in &submission.evidence {
        let block = format!(
            "$ {}\nexit {:?}\n{}\n{}",
            step.argv.join(" "),
            step.exit_code,
            step.stdout,
            step.stderr
        );
        if step.step.starts_with("pinned") {
            before.push_str(&block);
        } else {
            after.push_str(&block);
        }
        witness.push_str(&format!(
            "{} (must {}): exit {:?}, {:?}\n",
            step.step, step.expect, step.exit_code, step.grade
        ));
    }
    JudgeInput {
        issue_id: submission.issue_id.to_owned(),
        issue_text,
        diff: submission.diff.to_owned(),
        before_output: before,
        after_output: after,
        witness_result: witness,
        pr_body,
        flags: submission.flags.to_vec(),
        context,
    }
}

/// The paths the diff touches that exist at the base commit: the old side of each file (a
/// renamed file's base name, a deleted file), none for an added file (its whole text is in the
/// diff). Sorted, from `airlock_policies`' diff parser, so a path with spaces stays whole.
pub fn base_paths_touched(diff: &str) -> Vec<String> {
    let mut out: Vec<String> = airlock_policies::parse_unified_diff(diff)
        .unwrap_or_default()
        .into_iter()
        .filter_map(|file| file.old_path)
        .collect();
    out.sort();
    out.dedup();
    out
}

/// The codebase context for a submission on `base` of the clone at `clone`, and a warning for
/// each piece that could not be built (left empty: the judge still scores the artefact).
pub fn codebase_context(
    clone: &Path,
    base: &str,
    diff: &str,
    issue: &str,
) -> (CodebaseContext, Vec<String>) {
    let mut warnings = Vec::new();
    let file_tree = airlock_checkout::CommitId::parse(base)
        .map_err(|e| e.to_string())
        .and_then(|c| {
            airlock_checkout::file_tree(
                clone,
                &c,
                &airlock_checkout::FileTreeOptions {
                    char_budget: FILE_TREE_CHARS,
                    query: Some(issue),
                },
            )
            .map_err(|e| e.to_string())
        })
        .unwrap_or_else(|e| {
            warnings.push(format!("no file tree for {base}: {e}"));
            String::new()
        });
    // The agent's warm start listed the retrieval engine's top candidates for the issue text;
    // the judge sees the same ones, then the files the diff touches, each as of the base.
    let mut paths = search_candidates(clone, base, issue).unwrap_or_else(|e| {
        warnings.push(format!("no search candidates for {base}: {e}"));
        Vec::new()
    });
    for path in base_paths_touched(diff) {
        if !paths.contains(&path) {
            paths.push(path);
        }
    }
    let repo = git2::Repository::open(clone);
    let candidate_files = match &repo {
        Ok(repo) => paths
            .into_iter()
            .filter_map(|path| {
                file_at(repo, base, &path).map(|content| CandidateFile { path, content })
            })
            .collect(),
        Err(e) => {
            warnings.push(format!("cannot open {}: {}", clone.display(), e.message()));
            Vec::new()
        }
    };
    (
        CodebaseContext {
            file_tree,
            candidate_files,
        },
        warnings,
    )
}

/// The retrieval engine's top candidates for the issue text at the base commit, indexed into a
/// throw-away directory.
fn search_candidates(clone: &Path, base: &str, issue: &str) -> Result<Vec<String>, String> {
    let index_dir = tempfile::Builder::new()
        .prefix("airlock-judge-index-")
        .tempdir()
        .map_err(|e| format!("cannot make a temporary index directory: {e}"))?;
    let hits = airlock_codegraph::Engine::open(clone, index_dir.path())
        .and_then(|mut engine| engine.search(base, issue, SEARCH_CANDIDATES))
        .map_err(|e| e.to_string())?;
    Ok(hits.into_iter().map(|hit| hit.path).collect())
}

/// A text file's content at `commit`, cut at [`CANDIDATE_FILE_MAX_BYTES`] (the cut marked);
/// `None` when it is missing there or binary.
fn file_at(repo: &git2::Repository, commit: &str, path: &str) -> Option<String> {
    let blob = repo
        .revparse_single(&format!("{commit}:{path}"))
        .ok()?
        .peel_to_blob()
        .ok()?;
    let bytes = blob.content();
    if bytes.contains(&0) {
        return None;
    }
    let cut = bytes.len() > CANDIDATE_FILE_MAX_BYTES;
    let mut text =
        String::from_utf8_lossy(&bytes[..bytes.len().min(CANDIDATE_FILE_MAX_BYTES)]).into_owned();
    if cut {
        text.push_str("\n[cut at 10 KB]\n");
    }
    Some(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_base_side_of_each_file_is_taken_whole() {
        let diff = "diff --git a/old name.py b/new name.py\nsimilarity index 90%\nrename from old name.py\nrename to new name.py\n\
                    diff --git a/added.py b/added.py\nnew file mode 100644\n--- /dev/null\n+++ b/added.py\n@@ -0,0 +1 @@\n+x = 1\n\
                    diff --git a/gone.py b/gone.py\ndeleted file mode 100644\n--- a/gone.py\n+++ /dev/null\n@@ -1 +0,0 @@\n-x = 1\n";
        assert_eq!(base_paths_touched(diff), vec!["gone.py", "old name.py"]);
    }
}
