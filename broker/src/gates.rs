//! The organisation's gates in the intake: loading each repository's gates from `broker.toml`
//! (their examples checked; a failing one stops the broker from starting), building what a
//! gate is shown from the broker's own change set (never from the run's claims), and what a
//! queue item keeps of their verdicts ([`GateNote`]: the flags and routes). Running a gate is
//! `airlock-gates`' job; deciding what a deny means (POLICY_VIOLATION) and recording every
//! verdict in the audit log is the intake's (`intake::gates`).

use std::collections::BTreeMap;

use airlock_gates::{FileStatus, GateEngine, GateFile, LoadedGate, Verdict};
use serde::{Deserialize, Serialize};

use crate::changes::{ChangeKind, ChangeSet};
use crate::config::BrokerConfig;
use crate::error::{Error, Result};

/// Every repository's loaded gates, in their configured order.
#[derive(Default)]
pub struct Gates {
    by_repository: BTreeMap<String, Vec<LoadedGate>>,
}

impl Gates {
    /// Load and check every gate `config` lists. No engine is started when none is listed.
    pub fn load(config: &BrokerConfig) -> Result<Self> {
        if config.gates.is_empty() {
            return Ok(Gates::default());
        }
        let engine = GateEngine::new()?;
        let mut by_repository = BTreeMap::new();
        for (repository, specs) in &config.gates {
            let loaded = specs
                .iter()
                .map(|spec| airlock_gates::load_gate(&engine, spec))
                .collect::<airlock_gates::Result<Vec<_>>>()?;
            by_repository.insert(repository.clone(), loaded);
        }
        Ok(Gates { by_repository })
    }

    /// The gates of `repository`, in order (none when it has none).
    pub fn of(&self, repository: &str) -> &[LoadedGate] {
        self.by_repository
            .get(repository)
            .map(Vec::as_slice)
            .unwrap_or_default()
    }
}

/// A gate's flag or route, kept with the queue item and shown to the approver (the gate's text
/// is data: escaped wherever it is shown).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GateNote {
    /// The gate's name.
    pub gate: String,
    /// `sha256:` of the component that decided.
    pub digest: String,
    /// The flag or the route.
    #[serde(flatten)]
    pub verdict: Verdict,
}

/// The changed files with both their sides: the pinned content from the broker's clone, the
/// patched content the broker read from the worktree. A link is shown as its target's text.
pub fn gate_files(
    repo: &git2::Repository,
    pin: git2::Oid,
    changes: &ChangeSet,
) -> Result<Vec<GateFile>> {
    let pin_tree = repo
        .find_commit(pin)
        .and_then(|c| c.tree())
        .map_err(Error::git("reading the pinned tree for the gates"))?;
    changes
        .files
        .iter()
        .map(|change| {
            let pinned = || -> Result<Vec<u8>> {
                let entry = pin_tree
                    .get_path(std::path::Path::new(&change.path))
                    .map_err(Error::git(format!("finding {} at the pin", change.path)))?;
                let blob = repo
                    .find_blob(entry.id())
                    .map_err(Error::git(format!("reading {} at the pin", change.path)))?;
                Ok(blob.content().to_vec())
            };
            let (status, base) = match change.kind {
                ChangeKind::Added => (FileStatus::Added, None),
                ChangeKind::Modified => (
                    FileStatus::Modified,
                    Some(match &change.pinned_content {
                        Some(content) => content.clone(),
                        None => pinned()?,
                    }),
                ),
                ChangeKind::Deleted => (FileStatus::Deleted, Some(pinned()?)),
            };
            Ok(GateFile {
                path: change.path.clone(),
                status,
                base,
                patched: change.content.clone(),
            })
        })
        .collect()
}

/// What `airlock-broker gate test` found: the gate and each example's run.
#[derive(Debug, Clone)]
pub struct GateTestReport {
    /// The gate's file, as given.
    pub path: std::path::PathBuf,
    /// `sha256:` of the component.
    pub digest: String,
    /// Every example, in file order.
    pub outcomes: Vec<airlock_gates::ExampleOutcome>,
}

impl GateTestReport {
    /// Whether every example got its verdict.
    pub fn passed(&self) -> bool {
        self.outcomes.iter().all(|o| o.passed)
    }
}

/// Load the gate at `component` (a `.wasm` component or `.wat` text) and run every example of
/// `examples` through it, failing ones included: for the person writing the gate.
pub fn test_gate(
    component: &std::path::Path,
    examples: &std::path::Path,
    limits: airlock_gates::GateLimits,
) -> Result<GateTestReport> {
    let name = component
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| "gate".to_owned());
    let spec = airlock_gates::GateSpec {
        name,
        component: component.to_owned(),
        examples: examples.to_owned(),
        limits,
    };
    let engine = GateEngine::new()?;
    let (gate, examples) = airlock_gates::load_unchecked(&engine, &spec)?;
    Ok(GateTestReport {
        path: component.to_owned(),
        digest: gate.digest().to_owned(),
        outcomes: airlock_gates::examples::run_examples(&gate, &examples),
    })
}
