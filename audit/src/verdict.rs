//! The security team's verdicts on injection findings as plain data: the verdict a triage
//! records, where a finding stands, the key a dismissal applies to and one entry of a
//! finding's history. The bottom of the crate: `error` and `event` name these types, so this
//! module imports nothing of the crate (parsing a name into a status, which fails with the
//! crate's `Error`, is `triage`'s).

use serde::{Deserialize, Serialize};

/// A verdict the security team records on a finding.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum TriageStatus {
    /// A real injection attempt.
    Confirmed,
    /// Benign: the same key is not raised as new again.
    Dismissed,
    /// Someone must look again.
    NeedsReview,
}

impl TriageStatus {
    /// Every verdict, in the order the CLI lists them.
    pub const ALL: [TriageStatus; 3] = [
        TriageStatus::Confirmed,
        TriageStatus::Dismissed,
        TriageStatus::NeedsReview,
    ];

    /// The name on the command line and on disk.
    pub fn as_str(self) -> &'static str {
        match self {
            TriageStatus::Confirmed => "confirmed",
            TriageStatus::Dismissed => "dismissed",
            TriageStatus::NeedsReview => "needs-review",
        }
    }

    /// Whether the verdict must say why.
    pub fn needs_note(self) -> bool {
        matches!(self, TriageStatus::Confirmed | TriageStatus::Dismissed)
    }
}

impl std::fmt::Display for TriageStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Where a finding stands: never triaged (`new`), or its current verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum FindingStatus {
    /// Not triaged, and its key was never dismissed.
    New,
    /// Confirmed.
    Confirmed,
    /// Dismissed, by its own triage or by its key's.
    Dismissed,
    /// Needs another look.
    NeedsReview,
}

impl FindingStatus {
    /// The name on the command line and in `--json`.
    pub fn as_str(self) -> &'static str {
        match self {
            FindingStatus::New => "new",
            FindingStatus::Confirmed => "confirmed",
            FindingStatus::Dismissed => "dismissed",
            FindingStatus::NeedsReview => "needs-review",
        }
    }
}

impl From<TriageStatus> for FindingStatus {
    fn from(t: TriageStatus) -> Self {
        match t {
            TriageStatus::Confirmed => FindingStatus::Confirmed,
            TriageStatus::Dismissed => FindingStatus::Dismissed,
            TriageStatus::NeedsReview => FindingStatus::NeedsReview,
        }
    }
}

impl std::fmt::Display for FindingStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What a dismissal applies to: one rule on one version (blob) of one text of one repository.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct FindingKey {
    /// The run's repository, as its `run_started` record names it.
    pub repository: String,
    /// The finding's path (a file, or `issue:<id>`, `search:<query>`, ...).
    pub path: String,
    /// The `blob` of the `injection_suspected` record.
    pub blob: String,
    /// The detector rule.
    pub rule: String,
}

/// One verdict in a finding's history.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TriageEntry {
    /// Seq of the `injection_triaged` record.
    pub seq: u64,
    /// When it was recorded.
    pub ts: String,
    /// The verdict.
    pub status: TriageStatus,
    /// Who.
    pub by: String,
    /// Why.
    pub note: Option<String>,
}
