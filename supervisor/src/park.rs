//! Parked runs: what a run stopped by a budget keeps under its directory (`parked.json`: the
//! conversation, the ledger's state, the base inventory, the registration and the model's
//! spending, beside the kept worktree and trajectory), how `airlock resume` reads it back and
//! raises the budgets, and the expiry of parked runs older than `[budgets] park_max_age`.

use crate::config::Config;
use crate::issue::Issue;
use crate::ledger::LedgerState;
use crate::ports::Baseline;
use airlock_model::{BudgetLimits, Message, RunTotals};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::path::{Path, PathBuf};

/// The file a parked run keeps in its directory.
pub const PARKED_FILE: &str = "parked.json";

/// Errors reading, writing or resuming a parked run.
#[derive(Debug, thiserror::Error)]
pub enum ParkError {
    /// No run of that id under the runs root.
    #[error("no run {run_id} under the runs root {}", runs_root.display())]
    NoRun {
        /// The run asked for.
        run_id: String,
        /// Where runs are kept (`[paths] runs_root`).
        runs_root: PathBuf,
    },
    /// The run exists but is not parked (it finished, failed, or was resumed already).
    #[error("run {run_id} is not parked: {} has no {PARKED_FILE}", run_dir.display())]
    NotParked {
        /// The run.
        run_id: String,
        /// Its directory.
        run_dir: PathBuf,
    },
    /// The run was parked longer ago than `[budgets] park_max_age`.
    #[error(
        "run {run_id} was parked {age_secs} s ago, longer than park_max_age ({max_age_secs} s): it \
         expired and its worktree is removed; start a new run"
    )]
    Expired {
        /// The run.
        run_id: String,
        /// Seconds since it parked.
        age_secs: u64,
        /// `[budgets] park_max_age` in seconds.
        max_age_secs: u64,
    },
    /// Resuming would add nothing to the budget that stopped the run.
    #[error("run {run_id} parked on {budget}; pass {flag} to give it more")]
    NothingAdded {
        /// The run.
        run_id: String,
        /// The budget that stopped it.
        budget: &'static str,
        /// The `airlock resume` flag that raises it.
        flag: &'static str,
    },
    /// The file could not be read or written.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The file is not a parked run of this version.
    #[error("{} is not a parked run: {source}", path.display())]
    Parse {
        /// The file.
        path: PathBuf,
        /// Why.
        source: serde_json::Error,
    },
}

/// Result alias for parked runs.
pub type Result<T> = std::result::Result<T, ParkError>;

pub use crate::budget::ParkedOn;

/// What the loop hands back when it parks: enough to continue the conversation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ParkedSession {
    /// The budget that stopped the run.
    pub budget: ParkedOn,
    /// The conversation as the model will see it again (its closing summary included when it
    /// wrote one).
    pub conversation: Vec<Message>,
    /// The ledger's counters, facts and worktree state.
    pub ledger: LedgerState,
    /// The test environment and base inventory taken before the first model call.
    pub baseline: Baseline,
}

/// What `airlock resume` adds to a parked run's budgets.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Additions {
    /// More supervisor turns.
    pub turns: u32,
    /// More full test runs.
    pub full_runs: u32,
    /// More US dollars of model spend.
    pub usd: f64,
    /// More model tokens.
    pub tokens: u64,
    /// More model calls.
    pub calls: u64,
}

impl Additions {
    /// One line for the records: `turns +5, usd +1.000000`; only what is added.
    pub fn describe(&self) -> String {
        let mut parts = Vec::new();
        if self.turns > 0 {
            parts.push(format!("turns +{}", self.turns));
        }
        if self.full_runs > 0 {
            parts.push(format!("full_runs +{}", self.full_runs));
        }
        if self.usd > 0.0 {
            parts.push(format!("usd +{:.6}", self.usd));
        }
        if self.tokens > 0 {
            parts.push(format!("tokens +{}", self.tokens));
        }
        if self.calls > 0 {
            parts.push(format!("calls +{}", self.calls));
        }
        if parts.is_empty() {
            "nothing".to_string()
        } else {
            parts.join(", ")
        }
    }

    /// Whether this adds to the budget that stopped the run.
    pub fn raises(&self, budget: ParkedOn) -> bool {
        match budget {
            ParkedOn::MaxTurns => self.turns > 0,
            ParkedOn::MaxFullRuns => self.full_runs > 0,
            ParkedOn::ModelCalls => self.calls > 0,
            ParkedOn::ModelTokens => self.tokens > 0,
            ParkedOn::ModelCost => self.usd > 0.0,
        }
    }
}

/// A parked run as `parked.json` keeps it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ParkedRun {
    /// The run id.
    pub run_id: String,
    /// The repository as the operator gave it.
    pub repo: String,
    /// The bare mirror the worktree was materialised from (the retrieval index's key).
    pub mirror: PathBuf,
    /// The pinned commit.
    pub base_commit: String,
    /// The issue.
    pub issue: Issue,
    /// The intake record (`outcome.json`'s `intake`).
    pub intake: crate::intake::IntakeRecord,
    /// The run's configuration, budgets as raised by earlier resumes.
    pub config: Config,
    /// Where the configuration came from, for error messages.
    pub config_origin: String,
    /// The model spec the run used.
    pub model_spec: String,
    /// The model budget's limits, as raised by earlier resumes.
    pub model_limits: BudgetLimits,
    /// What the model has cost so far.
    pub model_spent: RunTotals,
    /// The loop's state.
    pub session: ParkedSession,
    /// For a follow-up run: the change request it answers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub follow_up: Option<airlock_protocol::FollowUpBrief>,
    /// The agent the run was started with; the issue fixer when absent (runs parked before
    /// agents were data).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<crate::agents::Agent>,
    /// Why the loop stopped.
    pub stop: String,
    /// Unix seconds when it parked (the age `park_max_age` is measured from).
    pub parked_at: u64,
    /// Unix seconds when it expired and its worktree was removed; `None` while resumable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expired_at: Option<u64>,
}

/// Unix seconds now.
pub fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

/// Write `parked.json` into `run_dir` (whole, then renamed over the old one).
pub fn write(run_dir: &Path, parked: &ParkedRun) -> Result<()> {
    let path = run_dir.join(PARKED_FILE);
    let tmp = run_dir.join(format!("{PARKED_FILE}.tmp"));
    let text = serde_json::to_string_pretty(parked).map_err(|source| ParkError::Parse {
        path: path.clone(),
        source,
    })? + "\n";
    std::fs::write(&tmp, text).map_err(|source| ParkError::Io {
        path: tmp.clone(),
        source,
    })?;
    std::fs::rename(&tmp, &path).map_err(|source| ParkError::Io {
        path: path.clone(),
        source,
    })
}

/// Read the parked run `run_id` under `runs_root`.
pub fn read(runs_root: &Path, run_id: &str) -> Result<ParkedRun> {
    // A run id names one directory of the runs root, never a path elsewhere.
    let plain = !run_id.is_empty()
        && run_id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
    let run_dir = runs_root.join(run_id);
    if !plain || !run_dir.is_dir() {
        return Err(ParkError::NoRun {
            run_id: run_id.to_string(),
            runs_root: runs_root.to_path_buf(),
        });
    }
    let path = run_dir.join(PARKED_FILE);
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(ParkError::NotParked {
                run_id: run_id.to_string(),
                run_dir,
            });
        }
        Err(source) => return Err(ParkError::Io { path, source }),
    };
    serde_json::from_str(&text).map_err(|source| ParkError::Parse { path, source })
}

/// Whether `parked` has outlived `max_age_secs` at `now`, or expired already. The error names
/// its age.
pub fn check_not_expired(parked: &ParkedRun, max_age_secs: u64, now: u64) -> Result<()> {
    let age_secs = now.saturating_sub(parked.parked_at);
    if parked.expired_at.is_some() || age_secs > max_age_secs {
        return Err(ParkError::Expired {
            run_id: parked.run_id.clone(),
            age_secs,
            max_age_secs,
        });
    }
    Ok(())
}

/// Expire one parked run: its worktree is removed, `parked.json` keeps the record without the
/// conversation (`expired_at` set), and `outcome.json`'s result becomes `expired`.
pub fn expire(run_dir: &Path, parked: &mut ParkedRun, now: u64) -> Result<()> {
    let worktree = run_dir.join("worktree");
    if worktree.exists() {
        std::fs::remove_dir_all(&worktree).map_err(|source| ParkError::Io {
            path: worktree.clone(),
            source,
        })?;
    }
    parked.expired_at = Some(now);
    parked.session.conversation.clear();
    write(run_dir, parked)?;
    let outcome = run_dir.join("outcome.json");
    if let Ok(text) = std::fs::read_to_string(&outcome)
        && let Ok(Value::Object(mut doc)) = serde_json::from_str::<Value>(&text)
    {
        doc.insert("result".into(), Value::from("expired"));
        let text = serde_json::to_string_pretty(&doc).unwrap_or_default() + "\n";
        std::fs::write(&outcome, text).map_err(|source| ParkError::Io {
            path: outcome.clone(),
            source,
        })?;
    }
    Ok(())
}

/// Expire every parked run under `runs_root` parked longer ago than `max_age_secs`; returns
/// their ids, sorted. A run directory that cannot be read is skipped with a warning: cleaning
/// never stops a run from starting.
pub fn expire_old(runs_root: &Path, max_age_secs: u64, now: u64) -> Vec<String> {
    let Ok(entries) = std::fs::read_dir(runs_root) else {
        return Vec::new();
    };
    let mut expired = Vec::new();
    for entry in entries.flatten() {
        let run_dir = entry.path();
        if !run_dir.join(PARKED_FILE).is_file() {
            continue;
        }
        let Some(run_id) = run_dir.file_name().and_then(|n| n.to_str()) else {
            continue;
        };
        let mut parked = match read(runs_root, run_id) {
            Ok(p) => p,
            Err(e) => {
                tracing::warn!("skipping parked run {}: {e}", run_dir.display());
                continue;
            }
        };
        if parked.expired_at.is_some() || check_not_expired(&parked, max_age_secs, now).is_ok() {
            continue;
        }
        match expire(&run_dir, &mut parked, now) {
            Ok(()) => expired.push(run_id.to_string()),
            Err(e) => tracing::warn!("cannot expire parked run {run_id}: {e}"),
        }
    }
    expired.sort();
    expired
}

/// Raise a parked run's budgets by `add`: the configuration's turn and full-run limits and the
/// model budget's limits (a limit that was unlimited stays so).
pub fn raise(parked: &mut ParkedRun, add: &Additions) {
    let budgets = &mut parked.config.budgets;
    budgets.max_turns = budgets.max_turns.saturating_add(add.turns);
    budgets.max_full_runs = budgets.max_full_runs.saturating_add(add.full_runs);
    let limits = &mut parked.model_limits;
    if let Some(max) = limits.max_cost_usd.as_mut() {
        *max += add.usd;
    }
    if let Some(max) = limits.max_tokens.as_mut() {
        *max = max.saturating_add(add.tokens);
    }
    if let Some(max) = limits.max_calls.as_mut() {
        *max = max.saturating_add(add.calls);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn additions_say_what_they_add_and_whether_they_raise_the_budget_that_stopped_the_run() {
        let add = Additions {
            turns: 5,
            usd: 1.5,
            ..Additions::default()
        };
        assert_eq!(add.describe(), "turns +5, usd +1.500000");
        assert!(add.raises(ParkedOn::MaxTurns));
        assert!(add.raises(ParkedOn::ModelCost));
        assert!(!add.raises(ParkedOn::MaxFullRuns));
        assert_eq!(Additions::default().describe(), "nothing");
    }
}
