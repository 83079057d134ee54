//! Durable broker state behind the [`Store`] trait: registered runs, open_pr submissions keyed by
//! (run id, request id), the approval queue and its decisions, the judge's scores, the claims
//! workers hold on issues (`claims`: one row per issue, a holder and a lease) and the shared
//! work queue they take issues from (`work_queue`, each taken issue a claim), and the named
//! approvers (`approvers`, tokens kept hashed) with the approvals they gave (`approvals`), and
//! what the broker did with each failed CI check of its pull requests (`ci_checks`).
//!
//! Two backends keep the same rules: [`SqliteStore`], one file, the default, and
//! [`PostgresStore`] for a database server (`state_db = "postgres://..."`). [`open`] picks one
//! from `broker.toml`; nothing else opens a store. Every method is one transaction, so a crash
//! leaves the before or the after, and the races the broker cares about (two open_pr calls of a
//! run, two reviews of one head, concurrent claimers and takers) are decided inside it, which
//! holds across brokers sharing one PostgreSQL database. Each backend's schema is a list of
//! versioned migrations, recorded in `schema_migrations` and applied on open; the same version
//! means the same tables on both. `broker/tests/it/store_suite.rs` runs one suite on both.
//!
//! The rules are written once: `query` (runs, submissions, the queue) and `claims` (claims and
//! the work queue) implement [`Store`] for any `sql::Backend`, a connection that runs a
//! statement with typed parameters and returns typed rows; what SQLite and PostgreSQL spell
//! differently (placeholders, row locks, `SKIP LOCKED`, advisory locks, integer types) is one
//! `sql::Dialect` table per backend, and the tables one DDL template (`schema`). The backend
//! files hold a connection, its migrations and its dialect. A store records outcomes and
//! answers queries; what to answer a run is the caller's ([`Store::record_intake`] takes it).

mod approvers;
mod ci_checks;
mod claims;
mod codec;
mod postgres;
mod query;
mod questions;
mod schema;
mod sql;
mod sqlite;

pub use postgres::PostgresStore;
pub use sqlite::SqliteStore;

use serde::{Deserialize, Serialize};

use crate::config::{BrokerConfig, StateDb};
use crate::error::{Error, Result};
use crate::witness::WitnessOutput;
use airlock_protocol::{
    BrokerReply, ClaimRelease, ClaimRequest, ClaimStatus, IssueKey, PullRequestKey, RunRegistration,
};
use airlock_schemas::{BrokerError, Review};

/// Where a run stands with the broker.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RunState {
    /// Registered; no open_pr accepted or finally refused yet.
    Active,
    /// An open_pr was accepted and queued.
    Queued,
    /// A final refusal ended the run.
    Ended,
}

impl RunState {
    fn as_str(self) -> &'static str {
        match self {
            RunState::Active => "active",
            RunState::Queued => "queued",
            RunState::Ended => "ended",
        }
    }
}

/// A registered run as stored.
#[derive(Debug, Clone, PartialEq)]
pub struct RunRecord {
    /// What the supervisor registered.
    pub registration: RunRegistration,
    /// Current state.
    pub state: RunState,
    /// Unix seconds of registration.
    pub registered_at: i64,
}

/// What `begin_intake` found for a (run id, request id).
#[derive(Debug, Clone, PartialEq)]
pub enum IntakeStart {
    /// No reply has been recorded: run the intake (first time, or again after a crash).
    Run {
        /// Unix seconds the request first arrived.
        received_at: i64,
        /// Whether it arrived before (its intake was cut short by a crash or failed).
        resumed: bool,
    },
    /// This request already has an answer: return it, do nothing else.
    Completed(IntakeReply),
}

/// An intake's answer as the store records it (per (run id, request id), so that a resent
/// request gets the same answer). Kept as JSON in the shape of the protocol's
/// [`BrokerReply`] of the same name — tag `status`, the same fields — which is what the
/// databases already hold.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum IntakeReply {
    /// Queued for a human as queue item `queue_id`.
    Queued {
        /// The queue item.
        queue_id: i64,
    },
    /// Refused under the error contract.
    Refused {
        /// The refusal.
        error: BrokerError,
    },
}

impl From<IntakeReply> for BrokerReply {
    fn from(reply: IntakeReply) -> Self {
        match reply {
            IntakeReply::Queued { queue_id } => BrokerReply::Queued { queue_id },
            IntakeReply::Refused { error } => BrokerReply::Refused { error },
        }
    }
}

/// What queueing an accepted intake found, inside the transaction that records its answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QueueInsert {
    /// The item is queued as `queue_id` and its run is now queued.
    Inserted {
        /// The new queue item.
        queue_id: i64,
    },
    /// The run already had queue item `queue_id` (an earlier or concurrent submission was
    /// queued first): nothing was inserted.
    RunAlreadyQueued {
        /// The run's queue item.
        queue_id: i64,
    },
}

/// Status of a queue item.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum QueueStatus {
    /// Waiting for a human.
    Queued,
    /// Approved; the commit, push or draft pull request may still be under way.
    Approved,
    /// Approved and published (pushed, and the draft pull request opened when configured).
    Published,
    /// Approved, but the commit, push or draft pull request failed; the error is kept in
    /// [`QueueItem::publish_error`]. `airlock-broker publish N` retries it, `abandon` ends it.
    PublishFailed,
    /// Approved, its publication failed, and a human gave it up (final, with who and why).
    Abandoned,
    /// Denied with a reason.
    Denied,
    /// Nobody decided within the queue age; the diff is kept for a human.
    Expired,
}

impl QueueStatus {
    /// The status as shown and stored.
    pub fn as_str(self) -> &'static str {
        match self {
            QueueStatus::Queued => "queued",
            QueueStatus::Approved => "approved",
            QueueStatus::Published => "published",
            QueueStatus::Denied => "denied",
            QueueStatus::Expired => "expired",
            QueueStatus::PublishFailed => "publish_failed",
            QueueStatus::Abandoned => "abandoned",
        }
    }

    fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "queued" => QueueStatus::Queued,
            "approved" => QueueStatus::Approved,
            "published" => QueueStatus::Published,
            "denied" => QueueStatus::Denied,
            "expired" => QueueStatus::Expired,
            "publish_failed" => QueueStatus::PublishFailed,
            "abandoned" => QueueStatus::Abandoned,
            _ => return None,
        })
    }
}

/// Everything the approver sees, assembled by a successful intake.
#[derive(Debug, Clone, PartialEq)]
pub struct NewQueueItem {
    /// Repository name.
    pub repository: String,
    /// The pinned base.
    pub base_commit: String,
    /// issue_id from the arguments.
    pub issue_id: String,
    /// title from the arguments.
    pub title: String,
    /// The open_pr arguments, verbatim.
    pub args: String,
    /// The full unified diff the broker computed.
    pub diff: String,
    /// The digest the broker computed (JSON).
    pub digest: serde_json::Value,
    /// Every witness command's output.
    pub evidence: Vec<WitnessOutput>,
    /// The detectors' flags, sorted.
    pub flags: Vec<String>,
    /// The organisation's gates' flags and routes, in the order the gates ran.
    pub gates: Vec<crate::gates::GateNote>,
    /// What the egress proxy refused the run's own test runs, as the run reported it with
    /// `open_pr`: shown to the approver, attributed to the run, never acted on.
    pub network_blocked: Vec<airlock_policies::network::BlockedAttempt>,
    /// Every risk signal screened for the approver, one per place: the broker's own screening
    /// and what the run reported with `open_pr` (attributed, never acted on). `None` for items
    /// queued before findings were stored.
    pub findings: Option<Vec<airlock_protocol::ItemFinding>>,
}

/// A queue item as stored.
#[derive(Debug, Clone, PartialEq)]
pub struct QueueItem {
    /// Queue id.
    pub id: i64,
    /// The run it came from.
    pub run_id: String,
    /// The submission's request id.
    pub request_id: String,
    /// What the intake assembled.
    pub item: NewQueueItem,
    /// Current status.
    pub status: QueueStatus,
    /// Unix seconds it was queued.
    pub queued_at: i64,
    /// Unix seconds of the decision (approval, denial or expiry).
    pub decided_at: Option<i64>,
    /// Who decided (user name), when a person did.
    pub decided_by: Option<String>,
    /// The denial reason.
    pub reason: Option<String>,
    /// The pushed branch.
    pub branch: Option<String>,
    /// The pushed commit.
    pub commit: Option<String>,
    /// The draft pull request's URL.
    pub pr_url: Option<String>,
    /// Why the last publication attempt failed (kept until a retry succeeds).
    pub publish_error: Option<String>,
    /// Who abandoned the item after a failed publication.
    pub abandoned_by: Option<String>,
    /// Why it was abandoned.
    pub abandon_reason: Option<String>,
    /// Unix seconds of the abandonment.
    pub abandoned_at: Option<i64>,
    /// The GitHub issue number of the run's registration, when it sent one.
    pub issue_number: Option<u64>,
    /// For an item of kind review: the pull request, the commits and the review. `None` for a
    /// pull request of the agent's.
    pub review: Option<ReviewItem>,
}

/// What a queue item is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ItemKind {
    /// A pull request of the agent's: pushed and opened as a draft on approval.
    PullRequest,
    /// A review of someone's pull request: posted as a GitHub review on approval.
    Review,
}

impl QueueItem {
    /// Pull request or review.
    pub fn kind(&self) -> ItemKind {
        if self.review.is_some() {
            ItemKind::Review
        } else {
            ItemKind::PullRequest
        }
    }

    /// Whether this is a review of `pull`'s head commit that still stands: waiting, approved or
    /// posted (a denied, expired or abandoned one does not stop another review).
    pub fn reviews_head(&self, pull: &PullRequestKey) -> bool {
        let Some(review) = &self.review else {
            return false;
        };
        let standing = !matches!(
            self.status,
            QueueStatus::Denied | QueueStatus::Expired | QueueStatus::Abandoned
        );
        standing
            && review.pull.owner.eq_ignore_ascii_case(&pull.owner)
            && review.pull.repo.eq_ignore_ascii_case(&pull.repo)
            && review.pull.number == pull.number
            && review.pull.head_sha == pull.head_sha
    }
}

/// What [`Store::queue_review`] did.
#[derive(Debug, Clone, PartialEq)]
pub enum ReviewQueueing {
    /// The review is queued: now, or earlier under the same run id (a resent submission).
    Queued(QueueItem),
    /// Another run's review of the same head commit stands ([`QueueItem::reviews_head`]):
    /// nothing was queued (rule `one_review_per_head`).
    HeadReviewed(QueueItem),
}

/// A stored judge score: the judgement as `airlock judge` attached it, and when (Unix seconds).
pub type JudgeScore = (serde_json::Value, i64);

/// A queued review: what it is of, as the broker established it, and the review as validated
/// at intake (`args` keeps the bytes the supervisor sent).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReviewItem {
    /// The pull request and the head commit the review is of (checked against the forge).
    pub pull: PullRequestKey,
    /// The pull request's base commit, from the forge.
    pub base_sha: String,
    /// The merge base the broker's diff starts from.
    pub merge_base: String,
    /// The review.
    pub review: Review,
}

/// A reviewer's request for changes on a queue item: what a follow-up run answers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChangeRequest {
    /// The queue item.
    pub queue_id: i64,
    /// The reviewer's feedback, as written (data for the follow-up's agent).
    pub feedback: String,
    /// Who requested the changes.
    pub requested_by: String,
    /// Unix seconds of the request.
    pub requested_at: i64,
}

/// The result of an intake, recorded atomically by [`Store::finish_intake`].
#[derive(Debug, Clone, PartialEq)]
pub enum IntakeOutcome {
    /// Every check passed: queue it.
    Queue(Box<NewQueueItem>),
    /// Refused under the error contract.
    Refuse(BrokerError),
}

/// A human decision on a queue item.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Approve for publication.
    Approve {
        /// Who approved.
        by: String,
    },
    /// Deny with a one-line reason.
    Deny {
        /// Who denied.
        by: String,
        /// The one-line reason returned to the run.
        reason: String,
    },
}

/// A named approver as the store keeps them (never the token: only its hash is stored).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Approver {
    /// The approver's name, recorded as `decided_by` and in the audit log.
    pub name: String,
    /// Whether the approver may give the senior approval a senior-route item needs.
    pub senior: bool,
    /// Unix seconds the approver was added.
    pub added_at: i64,
}

/// An approver to add: the name, seniority and the SHA-256 (hex) of the token they log in
/// with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewApprover {
    /// The name.
    pub name: String,
    /// Senior or not.
    pub senior: bool,
    /// The token's SHA-256, lowercase hex.
    pub token_sha256: String,
}

/// One approval given on a queue item.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ApprovalRecord {
    /// Who approved.
    pub approver: String,
    /// Whether they were a senior approver when they approved.
    pub senior: bool,
    /// The one-line reason they gave, if any.
    pub reason: Option<String>,
    /// Unix seconds of the approval.
    pub approved_at: i64,
}

/// What [`Store::record_approval`] did.
#[derive(Debug, Clone, PartialEq)]
pub enum RecordedApproval {
    /// The approvals so far complete the decision: the item is now approved.
    Approved(Box<QueueItem>),
    /// The approval is recorded and the item stays queued; every approval so far, oldest
    /// first.
    Pending(Vec<ApprovalRecord>),
}

/// What a `claim` or `renew_claim` found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ClaimAttempt {
    /// The asker newly holds the issue: it was unclaimed, released, or its lease had lapsed.
    Acquired(ClaimStatus),
    /// The asker already held it; the lease is extended.
    Renewed(ClaimStatus),
    /// Another holder has it, or its run is done: the asker must not work on it.
    Taken(ClaimStatus),
}

/// One issue of the shared work queue, with its claim when a worker took it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct WorkEntry {
    /// The issue.
    pub issue: IssueKey,
    /// Unix seconds it was queued.
    pub enqueued_at: i64,
    /// How many times a worker took it.
    pub attempts: u32,
    /// Its claim, once a worker took it (or claimed it by `claim`).
    pub claim: Option<ClaimStatus>,
}

/// What the broker did with one failed CI check of one of its pull requests.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CiCheckOutcome {
    /// Its output became a change request: a follow-up run starts from it.
    FollowUp,
    /// The same check fails at the pinned base too: a comment, no run.
    BaseFailed,
    /// The pull request had its `max_ci_followups`: a comment and an escalation, no run.
    Escalated,
}

impl CiCheckOutcome {
    /// The outcome as stored and audited.
    pub fn as_str(self) -> &'static str {
        match self {
            CiCheckOutcome::FollowUp => "follow_up",
            CiCheckOutcome::BaseFailed => "base_failed",
            CiCheckOutcome::Escalated => "escalated",
        }
    }

    fn parse(s: &str) -> Option<Self> {
        [
            CiCheckOutcome::FollowUp,
            CiCheckOutcome::BaseFailed,
            CiCheckOutcome::Escalated,
        ]
        .into_iter()
        .find(|o| o.as_str() == s)
    }
}

/// One failed CI check the broker acted on: the first record of a (repository, pull request,
/// head commit, check name) stands.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CiCheckRecord {
    /// The repository's name in `broker.toml`.
    pub repository: String,
    /// The pull request's number.
    pub pull_request: u64,
    /// The head commit the check ran on.
    pub head_sha: String,
    /// The check's name.
    pub check_name: String,
    /// The check run's id on the forge.
    pub check_run_id: u64,
    /// What the broker did.
    pub outcome: CiCheckOutcome,
    /// The published queue item (the pull request's latest) it was recorded on.
    pub queue_id: i64,
    /// Unix seconds.
    pub recorded_at: i64,
}

/// A question kept open, with the last reply on the forge the broker read for it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredQuestion {
    /// The question as asked.
    pub open: airlock_protocol::OpenQuestion,
    /// The id of the last comment read after it (0 before any): comments up to it are not
    /// read again.
    pub last_reply_id: u64,
}

/// How an open question closes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QuestionClose {
    /// Answered by a reply, or ended because the issue is gone.
    pub end: Option<airlock_protocol::QuestionEnd>,
    /// Who closed it: the answer's author, or the trigger that found the issue gone.
    pub by: String,
}

impl QuestionClose {
    /// The state stored: `answered`, or the end's name.
    pub fn state(&self) -> &'static str {
        self.end.map_or("answered", |e| e.as_str())
    }
}

/// Durable broker state. Every method is atomic: a crash leaves either the before or the after.
pub trait Store: Send {
    /// Register a run; registering the same run again with identical details is a no-op, with
    /// different details an error.
    fn register_run(&mut self, run: &RunRegistration, now: i64) -> Result<()>;
    /// A registered run.
    fn run(&mut self, run_id: &str) -> Result<Option<RunRecord>>;
    /// Record that an open_pr request arrived (idempotent per (run id, request id)) and say
    /// whether it still has to be evaluated.
    fn begin_intake(
        &mut self,
        run_id: &str,
        request_id: &str,
        args: &str,
        now: i64,
    ) -> Result<IntakeStart>;
    /// Record an intake's outcome and its answer, and move the run and queue accordingly, in
    /// one transaction. A queue outcome is inserted unless the run already has a queue item;
    /// `answer` turns what the insert found into the answer recorded and returned (the policy
    /// is the caller's). A refusal is recorded as it is; a final one ends a run that has no
    /// queue item. When the request already has an answer (a concurrent attempt finished
    /// first), that answer stands and is returned.
    fn record_intake(
        &mut self,
        run_id: &str,
        request_id: &str,
        outcome: IntakeOutcome,
        answer: &dyn Fn(QueueInsert) -> IntakeReply,
        now: i64,
    ) -> Result<IntakeReply>;
    /// Queue a review, in one transaction: one per run id (a run that has a queue item gets
    /// that item back), and one per head commit while it stands (of concurrent reviews of one
    /// head, from any number of brokers, exactly one is queued; the others get
    /// [`ReviewQueueing::HeadReviewed`]).
    fn queue_review(
        &mut self,
        run_id: &str,
        request_id: &str,
        item: &NewQueueItem,
        review: &ReviewItem,
        now: i64,
    ) -> Result<ReviewQueueing>;
    /// Requests received whose intake never finished (the broker died during it).
    fn unfinished_intakes(&mut self) -> Result<Vec<(String, String, String)>>;
    /// All queue items, oldest first.
    fn queue(&mut self) -> Result<Vec<QueueItem>>;
    /// One queue item.
    fn queue_item(&mut self, id: i64) -> Result<Option<QueueItem>>;
    /// The queue item of a run, if it has one.
    fn queue_item_for_run(&mut self, run_id: &str) -> Result<Option<QueueItem>>;
    /// Mark queued items queued at or before `cutoff` as expired; returns them.
    fn expire_queued_before(&mut self, cutoff: i64, now: i64) -> Result<Vec<QueueItem>>;
    /// Apply a human decision to a queued item.
    fn decide(&mut self, id: i64, decision: &Decision, now: i64) -> Result<QueueItem>;
    /// Record a reviewer's request for changes on a queue item.
    fn record_change_request(
        &mut self,
        queue_id: i64,
        by: &str,
        feedback: &str,
        now: i64,
    ) -> Result<()>;
    /// The latest change request on a queue item.
    fn change_request(&mut self, queue_id: i64) -> Result<Option<ChangeRequest>>;
    /// Record the pushed branch and commit of an approved item.
    fn record_push(&mut self, id: i64, branch: &str, commit: &str) -> Result<()>;
    /// Record the draft pull request (if any) and mark the item published.
    fn record_published(&mut self, id: i64, pr_url: Option<&str>) -> Result<()>;
    /// Mark an approved item `publish_failed` with the error.
    fn record_publish_failed(&mut self, id: i64, error: &str) -> Result<()>;
    /// Put a `publish_failed` item back to `approved` for another attempt (the error is kept
    /// until the attempt succeeds); an approved or published item is left as it is.
    fn retry_publication(&mut self, id: i64) -> Result<QueueItem>;
    /// End a `publish_failed` item: `abandoned`, with who, why and when.
    fn abandon(&mut self, id: i64, by: &str, reason: &str, now: i64) -> Result<QueueItem>;
    /// Attach the judge's score (its JSON judgement) to queue item `id`, replacing an earlier
    /// one; the queue row itself is never touched. An unknown id is
    /// [`crate::Error::UnknownQueueItem`].
    fn attach_judge_score(
        &mut self,
        id: i64,
        judgement: &serde_json::Value,
        now: i64,
    ) -> Result<()>;
    /// The judge's score attached to queue item `id`, if any.
    fn judge_score(&mut self, id: i64) -> Result<Option<JudgeScore>>;
    /// Replace the findings of queue item `id` while it is still queued; `false` (nothing
    /// written) once it was decided or expired.
    fn set_queued_findings(
        &mut self,
        id: i64,
        findings: &[airlock_protocol::ItemFinding],
    ) -> Result<bool>;
    /// Claim an issue for `request.holder` until `now + lease_secs`, in one transaction: of
    /// concurrent claimers exactly one acquires it. A lapsed lease or a released claim is
    /// taken over; a done one never.
    fn claim(&mut self, request: &ClaimRequest, now: i64) -> Result<ClaimAttempt>;
    /// Extend the holder's lease. A lease that lapsed but was not taken over is extended; one
    /// another holder took is `Taken`; no claim at all is [`crate::Error::ClaimNotHeld`].
    fn renew_claim(&mut self, request: &ClaimRequest, now: i64) -> Result<ClaimAttempt>;
    /// End the holder's claim as done or released; [`crate::Error::ClaimNotHeld`] when the
    /// asker is not its holder.
    fn release_claim(&mut self, release: &ClaimRelease, now: i64) -> Result<ClaimStatus>;
    /// Every claim, by repository and issue number.
    fn claims(&mut self) -> Result<Vec<ClaimStatus>>;
    /// Add issues to the shared work queue; an issue already in it is left as it is. Returns
    /// how many were new.
    fn enqueue_work(&mut self, issues: &[IssueKey], now: i64) -> Result<usize>;
    /// Take the oldest queued issue (by enqueued_at, then repository, then issue number) that
    /// is ready — no claim, a released claim, or a held claim whose lease ended at or before
    /// `now`; never a done one — restricted to `repository` when given, and claim it for
    /// `holder` until `now + lease_secs`, counting the attempt, in one transaction. On
    /// PostgreSQL the candidate row is chosen with `SELECT ... FOR UPDATE SKIP LOCKED`, so
    /// concurrent takers get different issues; on SQLite the IMMEDIATE transaction serialises
    /// them. `None` when nothing is ready.
    fn take_work(
        &mut self,
        holder: &str,
        lease_secs: u64,
        repository: Option<&str>,
        now: i64,
    ) -> Result<Option<ClaimStatus>>;
    /// The work queue, oldest first, each issue with its claim.
    fn work(&mut self) -> Result<Vec<WorkEntry>>;
    /// Add a named approver; a name already taken is [`crate::Error::ApproverExists`].
    fn add_approver(&mut self, approver: &NewApprover, now: i64) -> Result<Approver>;
    /// Every named approver, by name.
    fn approvers(&mut self) -> Result<Vec<Approver>>;
    /// Every named approver with the SHA-256 of their token, by name (for a login to compare
    /// against in constant time).
    fn approver_credentials(&mut self) -> Result<Vec<(Approver, String)>>;
    /// Remove a named approver (their approvals stay on record); an unknown name is
    /// [`crate::Error::UnknownApprover`].
    fn remove_approver(&mut self, name: &str) -> Result<Approver>;
    /// Record `approval` on queued item `id`, in one transaction: an item that is not queued is
    /// [`crate::Error::WrongState`], a second approval by the same approver is
    /// [`crate::Error::AlreadyApproved`]. When `complete` says the approvals so far (this one
    /// last) decide the item, it is approved by this approver at `approval.approved_at`.
    fn record_approval(
        &mut self,
        id: i64,
        approval: &ApprovalRecord,
        complete: &dyn Fn(&[ApprovalRecord]) -> bool,
    ) -> Result<RecordedApproval>;
    /// The approvals given on queue item `id`, oldest first.
    fn approvals(&mut self, id: i64) -> Result<Vec<ApprovalRecord>>;
    /// Record what was done with a failed CI check; `false` (nothing written) when its
    /// (repository, pull request, head, check name) was recorded before.
    fn record_ci_check(&mut self, record: &CiCheckRecord) -> Result<bool>;
    /// The failed CI checks recorded on pull request `pull_request` of `repository`, oldest
    /// first.
    fn ci_checks(&mut self, repository: &str, pull_request: u64) -> Result<Vec<CiCheckRecord>>;
    /// Keep `question` open (asking a round again replaces it and opens it again).
    fn record_question(
        &mut self,
        question: &airlock_protocol::IssueQuestion,
        now: i64,
    ) -> Result<()>;
    /// The open questions of `repository` (of its issue `issue_number` when given), oldest
    /// first.
    fn open_questions(
        &mut self,
        repository: &str,
        issue_number: Option<u64>,
    ) -> Result<Vec<StoredQuestion>>;
    /// Remember that the comments up to `last_reply_id` after question `round` of `issue` were
    /// read (never moved back).
    fn question_replies_read(
        &mut self,
        issue: &IssueKey,
        round: u32,
        last_reply_id: u64,
    ) -> Result<()>;
    /// Close question `round` of `issue`; `false` (nothing written) when it was not open.
    fn close_question(
        &mut self,
        issue: &IssueKey,
        round: u32,
        close: &QuestionClose,
        now: i64,
    ) -> Result<bool>;
}

/// Open the store `config.state_db` names: the SQLite file (created when missing) or the
/// PostgreSQL database (its password from `state_db_password_env`), its schema brought up to
/// date. Everything that reads or writes broker state opens it here.
pub fn open(config: &BrokerConfig) -> Result<Box<dyn Store>> {
    Ok(match &config.state_db {
        StateDb::Sqlite(path) => Box::new(SqliteStore::open(path)?),
        StateDb::Postgres { url, password_env } => {
            let password = match password_env {
                Some(var) => Some(
                    std::env::var(var)
                        .ok()
                        .filter(|v| !v.is_empty())
                        .ok_or_else(|| Error::MissingStatePassword { var: var.clone() })?,
                ),
                None => None,
            };
            Box::new(PostgresStore::connect(url, password.as_deref())?)
        }
    })
}

/// Refuse a schema that has versions this broker does not know (a newer broker migrated it):
/// writing it with an older idea of the tables could lose what the newer one keeps.
fn check_schema_version(applied: &[i64], known: impl Iterator<Item = i64>) -> Result<()> {
    let known: Vec<i64> = known.collect();
    match applied.iter().find(|v| !known.contains(v)) {
        Some(unknown) => Err(Error::StoreCorrupt {
            what: "schema version".to_owned(),
            message: format!(
                "migration {unknown} was applied by a newer broker; this one knows {known:?}: \
                 upgrade the broker"
            ),
        }),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unset_password_variable_is_named_before_any_connection() {
        let config = BrokerConfig::parse(
            "socket = \"s\"\nstate_db = \"postgres://airlock@127.0.0.1:1/airlock\"\n\
             state_db_password_env = \"AIRLOCK_TEST_PASSWORD_NEVER_SET\"\nruns_root = \"r\"\n\
             audit_log = \"a\"\nqueue_max_age = \"1d\"\n",
            std::path::Path::new("/"),
        )
        .unwrap();
        let err = open(&config).err().unwrap();
        assert!(
            matches!(&err, Error::MissingStatePassword { var } if var == "AIRLOCK_TEST_PASSWORD_NEVER_SET"),
            "{err}"
        );
        assert!(err.to_string().contains("state_db_password_env"), "{err}");
    }

    #[test]
    fn an_intake_reply_is_kept_in_the_shape_of_the_broker_reply() {
        let refusal = BrokerError::policy_violation("x", "y", "z");
        for (stored, wire) in [
            (
                IntakeReply::Queued { queue_id: 7 },
                BrokerReply::Queued { queue_id: 7 },
            ),
            (
                IntakeReply::Refused {
                    error: refusal.clone(),
                },
                BrokerReply::Refused { error: refusal },
            ),
        ] {
            let old = serde_json::to_string(&wire).unwrap();
            assert_eq!(serde_json::to_string(&stored).unwrap(), old);
            assert_eq!(serde_json::from_str::<IntakeReply>(&old).unwrap(), stored);
            assert_eq!(BrokerReply::from(stored), wire);
        }
    }
}
