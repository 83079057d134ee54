//! The broker's view of the shared rules in `airlock-policies`: which paths are tests, which
//! writes the run's allowlist and the always-refused classes permit, the recomputed diff digest
//! and the detectors' flags. The broker never decides these itself; [`Rules`] is the seam.

use std::path::Path;

use airlock_policies::{Policy, WriteDecision};
use airlock_schemas::DiffDigest;

use crate::changes::ChangeSet;
use crate::error::{Error, Result};

/// A write the policy refuses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PathRefusal {
    /// The offending path.
    pub path: String,
    /// The rule that refused it.
    pub rule: String,
    /// Why, for a person.
    pub reason: String,
}

/// The shared rules, as the broker needs them.
pub trait Rules: Send + Sync {
    /// Whether `path` (repository-relative) is a test file.
    fn is_test_file(&self, path: &str) -> bool;
    /// The first changed path the allowlist or an always-refused class refuses, if any.
    fn check_writes(
        &self,
        allowlist: &[String],
        changes: &ChangeSet,
    ) -> Result<Option<PathRefusal>>;
    /// Every diff_digest field recomputed from the worktree against the pin, and the
    /// detectors' flags (sorted).
    fn digest(&self, worktree: &Path, base_commit: &str) -> Result<(DiffDigest, Vec<String>)>;
}

/// [`Rules`] backed by an `airlock-policies` [`Policy`].
pub struct PolicyRules {
    policy: Policy,
}

impl PolicyRules {
    /// The built-in policy, or the policy file at `path`.
    pub fn load(path: Option<&Path>) -> Result<Self> {
        let policy = match path {
            Some(p) => Policy::load(p),
            None => Policy::default(),
        }
        .map_err(|e| Error::Dependency(format!("loading the write policy: {e}")))?;
        Ok(PolicyRules { policy })
    }
}

impl Rules for PolicyRules {
    fn is_test_file(&self, path: &str) -> bool {
        self.policy.is_test_path(path)
    }

    fn check_writes(
        &self,
        allowlist: &[String],
        changes: &ChangeSet,
    ) -> Result<Option<PathRefusal>> {
        let policy = if allowlist.is_empty() {
            self.policy.clone()
        } else {
            self.policy
                .with_allowlist(allowlist)
                .map_err(|e| Error::Dependency(format!("the run's write allowlist: {e}")))?
        };
        for change in &changes.files {
            if let WriteDecision::Refused { rule, reason } = policy.check_write(&change.path) {
                return Ok(Some(PathRefusal {
                    path: change.path.clone(),
                    rule,
                    reason,
                }));
            }
        }
        Ok(None)
    }

    fn digest(&self, worktree: &Path, base_commit: &str) -> Result<(DiffDigest, Vec<String>)> {
        let report = self
            .policy
            .compute_digest(worktree, base_commit)
            .map_err(|e| Error::Dependency(format!("recomputing the diff digest: {e}")))?;
        let mut flags: Vec<String> = report
            .findings
            .iter()
            .map(|f| {
                format!(
                    "{} {}:{} ({}): {}",
                    f.kind.as_str(),
                    f.file,
                    f.line,
                    f.rule,
                    f.excerpt
                )
            })
            .collect();
        flags.sort();
        Ok((report.to_diff_digest(), flags))
    }
}
