//! Claims on issues and the broker's shared work queue: who holds which issue, for how long,
//! and what the forge shows of it.

use serde::{Deserialize, Serialize};

/// What a worker asks of the shared work queue.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TakeWork {
    /// Who takes it (the claim's holder).
    pub holder: String,
    /// How long the claim holds without a renewal.
    pub lease_secs: u64,
    /// Only issues of this repository (as the broker names it); any when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub repository: Option<String>,
}

/// Issues a trigger puts on the shared work queue.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EnqueueWork {
    /// Who asks (recorded in the broker's audit log).
    pub by: String,
    /// The issues, each of a repository the broker serves.
    pub issues: Vec<IssueKey>,
}

/// One issue of one repository, as claims name it.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct IssueKey {
    /// The repository's name in `broker.toml` (`[repositories."owner/name"]`).
    pub repository: String,
    /// The forge's issue number.
    pub issue_number: u64,
}

/// A `claim` or `renew_claim` request.
// No `deny_unknown_fields`: serde does not support it beside `flatten`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClaimRequest {
    /// The issue.
    #[serde(flatten)]
    pub issue: IssueKey,
    /// Who claims: a worker's id, unique per worker process (`watch-<host>-<pid>-<start>`).
    pub holder: String,
    /// How long the claim holds without a renewal, in seconds; a worker that dies stops
    /// renewing, and its claim lapses after this.
    pub lease_secs: u64,
}

/// How a claim ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ClaimEnd {
    /// The run finished (a queued pull request, an escalation, an issue found not ready):
    /// no worker claims the issue again.
    Done,
    /// The worker gave up (an operational error, a shutdown): the issue is free at once.
    Abandoned,
}

/// A `release_claim` request.
// No `deny_unknown_fields`: serde does not support it beside `flatten`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClaimRelease {
    /// The issue.
    #[serde(flatten)]
    pub issue: IssueKey,
    /// The holder releasing it (must be the current holder).
    pub holder: String,
    /// Done or abandoned.
    pub end: ClaimEnd,
}

/// Where a claim stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ClaimState {
    /// Held by `holder` until `lease_expires_at` (after which anyone may take it).
    Held,
    /// Its run finished: nobody claims the issue again.
    Done,
    /// Abandoned by its holder: anyone may take it.
    Released,
}

/// What the broker did about the claim on the forge (the `airlock-claimed` label).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "mark", rename_all = "snake_case")]
pub enum ForgeMark {
    /// The label was added (or removed, on an abandoned claim).
    Posted,
    /// Nothing to post: a renewal, or a claim that did not change hands.
    Unchanged,
    /// The repository has no `forge_token_env`: the claim is in the broker's store only.
    NotConfigured,
    /// Too many label changes on this repository lately; the claim stands without it.
    RateLimited,
    /// The forge refused or failed the request; the claim stands without it.
    Failed {
        /// What went wrong (no token in it).
        message: String,
    },
}

/// A claim as the broker holds it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClaimStatus {
    /// The issue.
    #[serde(flatten)]
    pub issue: IssueKey,
    /// The current (or last) holder.
    pub holder: String,
    /// Held, done or released.
    pub state: ClaimState,
    /// Unix seconds the current holder took it.
    pub claimed_at: i64,
    /// Unix seconds the lease ends (for a held claim).
    pub lease_expires_at: i64,
}
