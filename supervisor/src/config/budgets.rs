//! `[budgets]`, `[tokens]`, `[context]` and `[history]`: the limits of a run, the sizes of
//! its warm-start message, how its conversation is kept in bounds and how much of the memory of
//! merged pull requests it is shown.

use super::{ConfigError, Result, seconds};
use serde::{Deserialize, Serialize};

/// `[budgets]`: the limits of a run. `max_turns` and `max_full_runs` (like the model's own
/// budget) park the run when reached; the others end it as an escalation.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Budgets {
    /// Model turns of the supervisor (MAX_TURNS).
    pub max_turns: u32,
    /// Test runs without a selector (MAX_FULL_RUNS).
    pub max_full_runs: u32,
    /// `read_file` calls made by the supervisor itself.
    pub max_reads: u32,
    /// Repair prompts for an invalid final message before the run escalates.
    pub max_repair_prompts: u32,
    /// Upper bound on a reader worker's `max_reads`, whatever the model asks for.
    pub reader_max_reads: u32,
    /// Upper bound on a reader worker's `max_turns`, whatever the model asks for.
    pub reader_max_turns: u32,
    /// Write refusals tolerated before the run escalates (retrying a refused class counts).
    pub max_refusals: u32,
    /// How long a parked run (one stopped by `max_turns`, `max_full_runs` or the model's
    /// budget) waits for `airlock resume` before it expires and its worktree is removed
    /// (`park_max_age = "7d"`; a number is seconds).
    #[serde(alias = "park_max_age", deserialize_with = "seconds")]
    pub park_max_age_secs: u64,
}

/// How long a parked run waits for `airlock resume` unless `[budgets] park_max_age` says
/// otherwise: seven days.
pub const DEFAULT_PARK_MAX_AGE_SECS: u64 = 7 * 24 * 3600;

impl Default for Budgets {
    fn default() -> Self {
        Budgets {
            max_turns: 40,
            max_full_runs: 3,
            max_reads: 40,
            max_repair_prompts: 2,
            reader_max_reads: 40,
            reader_max_turns: 20,
            max_refusals: 3,
            park_max_age_secs: DEFAULT_PARK_MAX_AGE_SECS,
        }
    }
}

/// `[tokens]`: budgets of the warm-start message, in tokens (about four characters each).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct TokenBudgets {
    /// The whole warm-start message.
    pub warm_start: usize,
    /// The repository map inside it.
    pub repo_map: usize,
    /// The file tree inside it.
    pub file_tree: usize,
    /// The codegraph candidate block inside it.
    pub candidates: usize,
    /// How many search candidates the warm start lists.
    pub candidate_count: usize,
}

impl Default for TokenBudgets {
    fn default() -> Self {
        TokenBudgets {
            warm_start: 8000,
            repo_map: 2000,
            file_tree: 1500,
            candidates: 1500,
            candidate_count: 8,
        }
    }
}

/// `[history]`: the memory of merged pull requests (`search_history` and the warm start's
/// mention of the best matches).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct HistoryConfig {
    /// The score (BM25 over the issue text) a merged pull request must reach to be mentioned
    /// in the warm start.
    pub mention_threshold: f64,
    /// How many pull requests the warm start mentions at most (0 to 2; 0 turns it off).
    pub mention_count: usize,
    /// With `[github] token_env` set and a GitHub issue, read merged pull requests from the
    /// forge's API too (title, description and files as GitHub has them).
    pub forge: bool,
    /// The most merged pull requests read from the forge per run (newest first); each new one
    /// costs one request for its files, and is kept beside the index for later runs.
    pub forge_max_pulls: usize,
}

impl Default for HistoryConfig {
    fn default() -> Self {
        HistoryConfig {
            mention_threshold: DEFAULT_MENTION_THRESHOLD,
            mention_count: 2,
            forge: true,
            forge_max_pulls: 100,
        }
    }
}

/// The default `[history] mention_threshold` (see docs/history.md for how it was chosen).
pub const DEFAULT_MENTION_THRESHOLD: f64 = 50.0;

/// `[context]`: how the conversation sent to the model is kept in bounds (`condense`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ContextConfig {
    /// Above this many tokens (at four characters each) of conversation, old tool results are
    /// condensed to one-line stubs; 0 never condenses.
    pub condense_above_tokens: usize,
    /// The most recent tool results, which always stay whole.
    pub keep_recent_results: usize,
}

impl Default for ContextConfig {
    fn default() -> Self {
        ContextConfig {
            condense_above_tokens: 24_000,
            keep_recent_results: 4,
        }
    }
}

impl Budgets {
    /// Every count is at least 1.
    pub(super) fn validate(&self, invalid: &dyn Fn(&str, &str) -> ConfigError) -> Result<()> {
        let b = self;
        for (key, value) in [
            ("budgets.max_turns", b.max_turns),
            ("budgets.max_full_runs", b.max_full_runs),
            ("budgets.max_reads", b.max_reads),
            ("budgets.reader_max_reads", b.reader_max_reads),
            ("budgets.reader_max_turns", b.reader_max_turns),
        ] {
            if value == 0 {
                return Err(invalid(key, "must be at least 1"));
            }
        }
        Ok(())
    }
}

impl TokenBudgets {
    /// Every budget is at least 1, and the parts fit in the whole.
    pub(super) fn validate(&self, invalid: &dyn Fn(&str, &str) -> ConfigError) -> Result<()> {
        let t = self;
        for (key, value) in [
            ("tokens.warm_start", t.warm_start),
            ("tokens.repo_map", t.repo_map),
            ("tokens.file_tree", t.file_tree),
            ("tokens.candidates", t.candidates),
        ] {
            if value == 0 {
                return Err(invalid(key, "must be at least 1"));
            }
        }
        if t.repo_map + t.file_tree + t.candidates > t.warm_start {
            return Err(invalid(
                "tokens.warm_start",
                "must be at least tokens.repo_map + tokens.file_tree + tokens.candidates",
            ));
        }
        Ok(())
    }
}

impl ContextConfig {
    /// The result the model just asked for is always kept.
    pub(super) fn validate(&self, invalid: &dyn Fn(&str, &str) -> ConfigError) -> Result<()> {
        if self.keep_recent_results == 0 {
            return Err(invalid(
                "context.keep_recent_results",
                "must be at least 1 (the model must see the result it just asked for)",
            ));
        }
        Ok(())
    }
}

impl HistoryConfig {
    /// The threshold is a score, the count at most two.
    pub(super) fn validate(&self, invalid: &dyn Fn(&str, &str) -> ConfigError) -> Result<()> {
        if !(self.mention_threshold.is_finite() && self.mention_threshold >= 0.0) {
            return Err(invalid(
                "history.mention_threshold",
                "must be a number at least 0 (a BM25 score; see docs/history.md)",
            ));
        }
        if self.mention_count > 2 {
            return Err(invalid(
                "history.mention_count",
                "must be 0, 1 or 2 (the warm start mentions the best one or two)",
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;
    use std::path::Path;

    #[test]
    fn context_sets_condensation_and_refuses_unknown_keys_and_keeping_nothing() {
        let c = Config::parse("", Path::new("airlock.toml")).unwrap();
        assert_eq!(c.context, ContextConfig::default());
        let c = Config::parse(
            "[context]
condense_above_tokens = 0
keep_recent_results = 2
",
            Path::new("airlock.toml"),
        )
        .unwrap();
        assert_eq!(c.context.condense_above_tokens, 0);
        assert_eq!(c.context.keep_recent_results, 2);
        let err = Config::parse(
            "[context]
condense_after = 100
",
            Path::new("airlock.toml"),
        )
        .unwrap_err()
        .to_string();
        assert!(err.contains("unknown field `condense_after`"), "{err}");
        let err = Config::parse(
            "[context]
keep_recent_results = 0
",
            Path::new("airlock.toml"),
        )
        .unwrap_err()
        .to_string();
        assert!(err.contains("context.keep_recent_results"), "{err}");
    }

    #[test]
    fn zero_budget_is_refused_by_key() {
        let err = Config::parse("[budgets]\nmax_full_runs = 0\n", Path::new("a.toml"))
            .unwrap_err()
            .to_string();
        assert!(err.contains("budgets.max_full_runs"), "{err}");
    }
}
