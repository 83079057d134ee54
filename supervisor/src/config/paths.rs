//! `[paths]`: where a run's records, caches, indexes and prepared environments go.

use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// `[paths]`: where the run's records go.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct PathsConfig {
    /// Each run writes `<runs_root>/<run_id>/` (trajectory, outcome, worktree).
    pub runs_root: PathBuf,
    /// The audit log every step is appended to.
    pub audit_log: PathBuf,
    /// The checkout mirror cache.
    pub cache_dir: PathBuf,
    /// The codegraph index directory.
    pub index_dir: PathBuf,
    /// Where prepared test environments are kept, one directory per repository, commit and
    /// prepare inputs (the broker must allow it: `allow_ro` in `broker.toml`).
    pub envs_dir: PathBuf,
}

impl Default for PathsConfig {
    /// Everything under airlock's one data directory ([`airlock_audit::data_dir`]:
    /// `$AIRLOCK_HOME`, else `$XDG_DATA_HOME/airlock`, else `~/.local/share/airlock`), so that
    /// `airlock audit` finds a run's log without being told; `.airlock/` beside the file (or
    /// the working directory) when none can be derived.
    fn default() -> Self {
        let base = airlock_audit::data_dir().unwrap_or_else(|_| PathBuf::from(".airlock"));
        PathsConfig::under(&base)
    }
}

impl PathsConfig {
    /// The default layout under the data directory `base`: `runs/`, `audit.jsonl`, `cache/`,
    /// `index/`, `envs/`. `airlock init` writes the same into both `airlock.toml` and
    /// `broker.toml`, so the two agree.
    pub fn under(base: &Path) -> PathsConfig {
        PathsConfig {
            runs_root: base.join("runs"),
            audit_log: base.join("audit.jsonl"),
            cache_dir: base.join("cache"),
            index_dir: base.join("index"),
            envs_dir: base.join("envs"),
        }
    }
}
