//! A run's records outside the loop: its id, the outcome document (`outcome.json`), and what is
//! left behind when a run fails after it began.

use super::RunError;
use crate::config::Config;
use crate::park;
use crate::session::RunEnd;
use crate::setup::OUTCOME_FILE;
use airlock_audit::AuditLog;
use serde_json::{Value, json};
use std::path::{Path, PathBuf};

/// The outcome file: the run's identity, how it ended, and the outcome object (or the triage).
pub fn outcome_document(run_id: &str, base_commit: &str, issue_id: &str, end: &RunEnd) -> Value {
    match end {
        RunEnd::NotReady(triage) => json!({
            "run_id": run_id,
            "base_commit": base_commit,
            "issue_id": issue_id,
            "result": "not_ready",
            "triage": triage,
        }),
        RunEnd::Finished {
            outcome,
            pr_queued,
            stop,
        } => json!({
            "run_id": run_id,
            "base_commit": base_commit,
            "issue_id": issue_id,
            "result": if *pr_queued { "pr_queued" } else { "escalated" },
            "stop": stop,
            "outcome": outcome,
        }),
        RunEnd::Parked {
            outcome,
            stop,
            parked,
        } => json!({
            "run_id": run_id,
            "base_commit": base_commit,
            "issue_id": issue_id,
            "result": "parked",
            "stop": stop,
            "outcome": outcome,
            "parked": {
                "budget": parked.budget,
                "resume": format!("airlock resume {run_id} {}", parked.budget.flag()),
            },
        }),
        RunEnd::Reviewed { queue_id, stop } => json!({
            "run_id": run_id,
            "base_commit": base_commit,
            "issue_id": issue_id,
            "result": if queue_id.is_some() { "review_queued" } else { "no_review" },
            "stop": stop,
            "queue_id": queue_id,
        }),
    }
}

/// A run that has begun: what is needed to record its failure.
pub(super) struct Started {
    pub(super) run_id: String,
    pub(super) run_dir: PathBuf,
    pub(super) worktree: PathBuf,
    pub(super) base_commit: String,
    pub(super) issue_id: String,
    pub(super) audit_log: PathBuf,
}

impl Started {
    /// Record that the run stopped on `error`: `outcome.json` with `result: failed`, a
    /// `run_finished` record (failed) when the audit log opens, and the worktree removed unless
    /// `keep`. Each step is best effort: the error that stopped the run is what is returned.
    pub(super) fn failed(self, error: RunError, keep: bool) -> RunError {
        let (error, usage) = error.split_usage();
        let reason = error.to_string();
        let outcome = self.run_dir.join(OUTCOME_FILE);
        let mut document = json!({
            "run_id": self.run_id,
            "base_commit": self.base_commit,
            "issue_id": self.issue_id,
            "result": "failed",
            "error": reason,
            "worktree_kept": keep,
        });
        // What the model calls made before the failure cost is spent all the same.
        if let Some(usage) = usage {
            document["model_usage"] = serde_json::to_value(usage).unwrap_or_default();
        }
        let text = serde_json::to_string_pretty(&document).unwrap_or_default() + "\n";
        if let Err(e) = std::fs::write(&outcome, text) {
            tracing::warn!("cannot write {}: {e}", outcome.display());
        }
        remove_parked(&self.run_dir);
        match AuditLog::open(&self.audit_log) {
            Ok(audit) => {
                let event = airlock_audit::Event::RunFinished {
                    outcome: airlock_audit::RunOutcome::Failed,
                    reason: Some(reason),
                };
                if let Err(e) = audit.append(&self.run_id, event) {
                    tracing::warn!("cannot record the failed run in the audit log: {e}");
                }
            }
            Err(e) => tracing::warn!("cannot open the audit log to record the failure: {e}"),
        }
        if !keep
            && self.worktree.exists()
            && let Err(e) = std::fs::remove_dir_all(&self.worktree)
        {
            tracing::warn!("cannot remove {}: {e}", self.worktree.display());
        }
        RunError::Failed {
            run_id: self.run_id,
            outcome,
            error: Box::new(error),
        }
    }
}

/// A resumed run that ended (or failed) is parked no more.
pub(super) fn remove_parked(run_dir: &Path) {
    let path = run_dir.join(park::PARKED_FILE);
    if let Err(e) = std::fs::remove_file(&path)
        && e.kind() != std::io::ErrorKind::NotFound
    {
        tracing::warn!("cannot remove {}: {e}", path.display());
    }
}

/// Six hex digits that tell this host's runs from another's: of the host name and the runs
/// root (two workers on one host keep their runs apart by their roots). The same on every run
/// of one worker, so ids stay reproducible.
pub(crate) fn host_tag(runs_root: &Path) -> String {
    use sha2::Digest;
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
    let mut hash = sha2::Sha256::new();
    hash.update(host.trim().as_bytes());
    hash.update([0u8]);
    hash.update(runs_root.as_os_str().as_encoded_bytes());
    hex::encode(hash.finalize())[..6].to_owned()
}

/// `<issue>-<commit[..12]>-<n>`: the first `n` whose directory does not exist yet. No clock or
/// random part, so the same inputs name their runs the same way.
pub(crate) fn next_run_id(runs_root: &Path, issue_id: &str, commit: &str) -> String {
    let safe: String = issue_id
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect();
    let short = commit.get(..12).unwrap_or(commit);
    let mut n = 1u32;
    loop {
        let id = format!("{safe}-{short}-{n}");
        if !runs_root.join(&id).exists() {
            return id;
        }
        n += 1;
    }
}

/// What names the repository in a prepared environment's key: the broker's name for it when
/// configured (`[broker] repository`), else the repository's path. Not the run's mirror, whose
/// path depends on the cache directory: two runs on one repository, commit and inputs share
/// one environment.
pub(crate) fn prepare_repo_key(config: &Config, repo: &str) -> String {
    match &config.broker.repository {
        Some(name) => name.clone(),
        None => airlock_codegraph::store::repo_key(Path::new(repo)),
    }
}
