//! The broker's wire protocol, the one place both sides take it from: one JSON object per line
//! over the Unix socket, one reply line per request. The open_pr arguments travel as raw JSON so
//! the approver sees them byte for byte. The supervisor builds its requests and reads its
//! replies with these types; the broker parses and answers with them.

pub mod tls;

use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use sha2::{Digest, Sha256};

use airlock_policies::network::BlockedAttempt;
use airlock_schemas::BrokerError;

pub use airlock_policies::testrun::{TestEnvironment, TestRunner};

/// What a supervisor tells the broker about a run when the run starts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RunRegistration {
    /// The run's id (unique per broker).
    pub run_id: String,
    /// Repository name as configured in `broker.toml`.
    pub repository: String,
    /// The pinned base commit, 40 lower-case hex digits.
    pub base_commit: String,
    /// The issue the run works on: an `open_pr` must name it. Required at registration (the
    /// default only reads registrations stored before the field existed).
    #[serde(default)]
    pub issue_id: String,
    /// The GitHub issue number the issue id stands for (`ACME-123` taken from GitHub issue
    /// 123), when intake knows one: the draft pull request then says `Closes #N`. Optional, so
    /// supervisors that do not send it still register.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub issue_number: Option<u64>,
    /// The run's worktree; must lie under the configured runs root.
    pub worktree: String,
    /// The operator's full-suite test command (argv), run with the tree as working directory.
    pub test_command: Vec<String>,
    /// How that command selects one test and reports results.
    pub test_runner: TestRunner,
    /// The run's write allowlist (glob patterns, interpreted by `airlock-policies`).
    pub write_allowlist: Vec<String>,
    /// The environment of every test command (read-only grants, variables, prepared links);
    /// each granted path must be allowed by `broker.toml`.
    #[serde(default)]
    pub test_env: TestEnvironment,
    /// How long, in seconds, the supervisor keeps reconnecting and resending an `open_pr` whose
    /// connection broke (a broker restart). An intake cut short by a crash and taken up again
    /// later than this after the request arrived is abandoned, not queued: the supervisor has
    /// given up by then, and the run's outcome and the queue must agree. Absent:
    /// [`DEFAULT_RECONNECT_SECS`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reconnect_secs: Option<u64>,
    /// The issue as the supervisor read it, shown to the approver by `airlock-broker show`
    /// (escaped: it is repository text). Absent in registrations from supervisors that predate
    /// it; the broker never acts on it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub issue: Option<IssueText>,
    /// For a follow-up run: the queue item a reviewer requested changes on. The broker checks
    /// that `base_commit` is the head of the branch it pushed for that item (its pin when it
    /// was never published), queues the run's pull request as a follow-up of it, and on
    /// approval pushes a new commit to the same branch instead of opening a new pull request.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub follow_up_of: Option<i64>,
    /// What kind of change the run submits, which decides the witness its `open_pr` gets.
    /// Absent: [`ChangeKind::Fix`] (registrations from before the field existed).
    #[serde(default, skip_serializing_if = "ChangeKind::is_fix")]
    pub change: ChangeKind,
    /// How the broker gets the run's tree: from `worktree` on its own filesystem (the default,
    /// a run on the broker's host), or as bytes with every `open_pr` (a run on another host).
    #[serde(default, skip_serializing_if = "TreeTransfer::is_shared")]
    pub tree: TreeTransfer,
}

/// How the broker gets a run's tree.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TreeTransfer {
    /// The broker reads the run's worktree, which must lie under its runs root.
    #[default]
    Shared,
    /// Every `open_pr` carries the run's change ([`SubmittedChange`]): the broker rebuilds the
    /// tree from its own clone at the pin and checks that, never a path of the run's host.
    /// The registration's `worktree` is then only the run's own record of where it worked.
    Bytes,
}

impl TreeTransfer {
    /// Whether the broker reads the run's worktree itself.
    pub fn is_shared(&self) -> bool {
        *self == TreeTransfer::Shared
    }
}

/// The largest patch (decoded) an `open_pr` may carry.
pub const MAX_PATCH_BYTES: usize = 8 * 1024 * 1024;

/// A run's change as bytes: a git patch (the `git diff --binary` format: binary files as
/// `GIT binary patch` hunks, modes and symlinks included) from the pinned commit to the run's
/// tree. The broker applies it to its own clone's pin; nothing else of the run's is read.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SubmittedChange {
    /// The commit the patch applies to: the run's pin.
    pub base_commit: String,
    /// The patch, standard base64 (a patch need not be UTF-8).
    pub patch_base64: String,
}

impl SubmittedChange {
    /// The change for `patch` against `base_commit`.
    pub fn new(base_commit: &str, patch: &[u8]) -> SubmittedChange {
        use base64::Engine as _;
        SubmittedChange {
            base_commit: base_commit.to_owned(),
            patch_base64: base64::engine::general_purpose::STANDARD.encode(patch),
        }
    }

    /// The patch's bytes; an error says what is wrong with the encoding or the size.
    pub fn patch(&self) -> Result<Vec<u8>, String> {
        use base64::Engine as _;
        if self.patch_base64.len() / 4 * 3 > MAX_PATCH_BYTES + 3 {
            return Err(format!(
                "the patch is larger than {MAX_PATCH_BYTES} bytes: split the change"
            ));
        }
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(self.patch_base64.as_bytes())
            .map_err(|e| format!("patch_base64 is not standard base64: {e}"))?;
        if bytes.len() > MAX_PATCH_BYTES {
            return Err(format!(
                "the patch is larger than {MAX_PATCH_BYTES} bytes: split the change"
            ));
        }
        Ok(bytes)
    }
}

/// What kind of change a run submits (the agent definition's `output.change`), and so what
/// the broker's witness proves about it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ChangeKind {
    /// A fix: a claimed test fails on the pin and passes patched, and the patched full run
    /// keeps every test that passed at base.
    #[default]
    Fix,
    /// Documentation: no test is claimed or touched; the patched full run keeps every test
    /// that passed at base.
    Docs,
}

impl ChangeKind {
    /// Whether this is [`ChangeKind::Fix`] (the default, left out on the wire).
    pub fn is_fix(&self) -> bool {
        *self == ChangeKind::Fix
    }

    /// The configuration spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            ChangeKind::Fix => "fix",
            ChangeKind::Docs => "docs",
        }
    }
}

/// What a follow-up run starts from: the change request a reviewer made on a queue item, as
/// the broker answers `follow_up`. The feedback is a reviewer's text: data for the agent,
/// screened like any text it is shown.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FollowUpBrief {
    /// The queue item changes were requested on.
    pub queue_id: i64,
    /// Repository name as configured in `broker.toml`.
    pub repository: String,
    /// The issue the item is for.
    pub issue_id: String,
    /// Its GitHub number, when the run that queued the item registered one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub issue_number: Option<u64>,
    /// The issue's text as that run registered it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub issue: Option<IssueText>,
    /// Where the follow-up must start: the head of the branch the broker pushed for the item,
    /// or the item's pin when it was never published.
    pub base_commit: String,
    /// The pushed branch the follow-up's commit will go to, when the item was published.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub branch: Option<String>,
    /// The draft pull request the branch belongs to, when one was opened.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pr_url: Option<String>,
    /// The reviewer's feedback, as written.
    pub feedback: String,
    /// Who requested the changes.
    pub requested_by: String,
}

/// The text of the issue a run works on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct IssueText {
    /// One-line title.
    pub title: String,
    /// Free-text body.
    #[serde(default)]
    pub body: String,
}

/// One pull request at one head commit: what a review is of. The broker maps `owner/repo` to
/// the repository of `broker.toml` whose forge repository it is, and checks `head_sha` against
/// the forge before it believes anything else.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PullRequestKey {
    /// The repository owner on the forge.
    pub owner: String,
    /// The repository name on the forge.
    pub repo: String,
    /// The pull request's number.
    pub number: u64,
    /// The head commit the review was written against, 40 lower-case hex digits.
    pub head_sha: String,
}

impl std::fmt::Display for PullRequestKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}/{}#{} at {}",
            self.owner, self.repo, self.number, self.head_sha
        )
    }
}

/// A `submit_review`: the reviewer agent's review of a pull request, for the approval queue.
/// The review travels as raw JSON, byte for byte as the model wrote it: the broker validates
/// it against `schemas/review.json` itself and checks every comment against the diff it
/// computes itself.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReviewSubmission {
    /// The supervisor's run id of the review (its audit events carry it; one review per run).
    pub run_id: String,
    /// The pull request and the head the review is of.
    pub pull: PullRequestKey,
    /// The review, as the model produced it.
    pub review: Box<RawValue>,
}

/// The heading of the broker's evidence in every draft pull request it opens: the broker writes
/// it, and the webhook knows an airlock pull request's conversation by it.
pub const PR_EVIDENCE_HEADING: &str = "## Evidence (checked by the airlock broker)";

/// The handle that addresses airlock in an issue or pull request comment.
pub const MENTION: &str = "@airlock";

/// Whether `text` mentions [`MENTION`] as a whole handle (not `@airlock-bot`, not an e-mail
/// address), the way the webhook and the broker both read a comment.
pub fn mentions_airlock(text: &str) -> bool {
    let lower = text.to_ascii_lowercase();
    lower.match_indices(MENTION).any(|(at, _)| {
        let before = lower[..at].chars().next_back();
        let after = lower[at + MENTION.len()..].chars().next();
        !before.is_some_and(|c| c.is_alphanumeric() || c == '.' || c == '_')
            && !after.is_some_and(|c| c.is_alphanumeric() || c == '-' || c == '_')
    })
}

/// The reconnect window of a registration that does not state one, in seconds.
pub const DEFAULT_RECONNECT_SECS: u64 = 600;

impl RunRegistration {
    /// The run's reconnect window in seconds.
    pub fn reconnect_window(&self) -> u64 {
        self.reconnect_secs.unwrap_or(DEFAULT_RECONNECT_SECS)
    }
}

/// The idempotency key of an open_pr call: SHA-256 of the run id, a NUL byte and the exact
/// argument bytes. A supervisor that resends the same call after a broker crash gets the same
/// key, and the broker answers it once.
pub fn request_id_for(run_id: &str, args: &str) -> String {
    let mut h = Sha256::new();
    h.update(run_id.as_bytes());
    h.update([0u8]);
    h.update(args.as_bytes());
    hex::encode(h.finalize())
}

/// The idempotency key of an open_pr call that carries its change: SHA-256 of the run id, a
/// NUL byte, the argument bytes, a NUL byte and the change's base commit and patch text, so the
/// same arguments over another tree are another request.
pub fn request_id_for_change(run_id: &str, args: &str, change: &SubmittedChange) -> String {
    let mut h = Sha256::new();
    h.update(run_id.as_bytes());
    h.update([0u8]);
    h.update(args.as_bytes());
    h.update([0u8]);
    h.update(change.base_commit.as_bytes());
    h.update([0u8]);
    h.update(change.patch_base64.as_bytes());
    hex::encode(h.finalize())
}

/// One request, by operation: what a supervisor (or the CLI's client) asks the broker.
/// On the wire it is one JSON object with `op` naming the operation ([`WireRequest`]); a line
/// whose `op` is unknown or lacks its operation's fields does not parse, and the error says
/// which fields the operation needs.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(try_from = "WireRequest", into = "WireRequest")]
pub enum Request {
    /// `register_run`: the run's details, before any `open_pr`.
    RegisterRun(Box<RunRegistration>),
    /// `open_pr`: the model's tool-call arguments, byte for byte.
    OpenPr {
        /// The registered run.
        run_id: String,
        /// The idempotency key ([`request_id_for`] of the run id and the argument bytes when
        /// absent): a retried request with the same key gets the stored reply instead of a
        /// second intake.
        request_id: String,
        /// The arguments exactly as the model produced them.
        args: Box<RawValue>,
        /// The run's change, for a run registered with [`TreeTransfer::Bytes`].
        change: Option<Box<SubmittedChange>>,
        /// What the egress proxy refused the run's own test runs, as the run reports it: the
        /// broker stores and shows it, attributed to the run, and acts on none of it.
        network_blocked: Vec<BlockedAttempt>,
    },
    /// `decision`: the current decision on the run's queued pull request.
    Decision {
        /// The registered run.
        run_id: String,
    },
    /// `claim`: take the issue for `holder` for `lease_secs` (or extend the lease the holder
    /// already has). Answered [`BrokerReply::Claimed`] or [`BrokerReply::ClaimTaken`].
    Claim(ClaimRequest),
    /// `renew_claim`: extend the lease `holder` has on the issue. A lease that expired and was
    /// taken by another holder is [`BrokerReply::ClaimTaken`]: the renewing worker must stop.
    RenewClaim(ClaimRequest),
    /// `release_claim`: end `holder`'s claim, as done (no worker takes the issue again) or
    /// abandoned (another worker may take it at once). Answered [`BrokerReply::Released`].
    ReleaseClaim(ClaimRelease),
    /// `follow_up`: what a follow-up run on queue item `queue_id` needs (the branch head, the
    /// issue and the reviewer's feedback).
    FollowUp {
        /// The queue item changes were requested on.
        queue_id: i64,
    },
    /// `enqueue_work`: put issues on the broker's shared work queue (a trigger that feeds the
    /// workers: `airlock watch --enqueue`). Answered [`BrokerReply::Enqueued`].
    EnqueueWork(EnqueueWork),
    /// `take_work`: take the oldest ready issue of the broker's shared work queue for
    /// `holder`, as a claim with a lease. Answered [`BrokerReply::Claimed`], or
    /// [`BrokerReply::NoWork`] when nothing is ready.
    TakeWork(TakeWork),
    /// `submit_review`: queue a pull request review for an approver. Answered
    /// [`BrokerReply::Queued`] or [`BrokerReply::Refused`] (SCHEMA_INVALID, or POLICY_VIOLATION
    /// naming the first comment that is not on a line of the diff).
    SubmitReview(Box<ReviewSubmission>),
    /// `pr_feedback`: a reviewer acted on a pull request on the forge (a webhook saw it). The
    /// broker reads the review or comment from the forge itself, checks that the pull request
    /// is one it opened and that the author may ask for changes, records the change request on
    /// the pull request's latest published queue item, and answers [`BrokerReply::FollowUp`].
    /// Nothing of the reviewer's text travels in the request: the asker is not believed.
    PrFeedback(PrFeedback),
}

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

/// What a `pr_feedback` request names: where the reviewer acted, never what they wrote.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PrFeedback {
    /// `OWNER/REPO` on the forge (a repository's `forge_repo` in `broker.toml`, or its name).
    pub forge_repo: String,
    /// The pull request's number.
    pub pull_request: u64,
    /// The review or comment.
    pub source: FeedbackSource,
}

/// A reviewer's review or comment on a pull request, by its forge id.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FeedbackSource {
    /// Which kind of text.
    pub kind: FeedbackKind,
    /// Its id on the forge.
    pub id: u64,
}

/// The kinds of reviewer text a follow-up starts from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FeedbackKind {
    /// A pull request review (`/pulls/{n}/reviews/{id}`), with its inline comments.
    Review,
    /// A comment on the pull request's conversation (`/issues/comments/{id}`).
    IssueComment,
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

impl Request {
    /// An `open_pr` request for `args_text` (one JSON value, sent as it is), keyed by
    /// [`request_id_for`] unless `request_id` is given.
    pub fn open_pr(
        run_id: &str,
        args_text: &str,
        request_id: Option<&str>,
    ) -> Result<Request, serde_json::Error> {
        Ok(Request::OpenPr {
            run_id: run_id.to_owned(),
            request_id: request_id
                .map(str::to_owned)
                .unwrap_or_else(|| request_id_for(run_id, args_text)),
            args: RawValue::from_string(args_text.to_owned())?,
            change: None,
            network_blocked: Vec::new(),
        })
    }

    /// An `open_pr` request for `args_text` that carries the run's change, keyed by
    /// [`request_id_for_change`] unless `request_id` is given.
    pub fn open_pr_with_change(
        run_id: &str,
        args_text: &str,
        change: SubmittedChange,
        request_id: Option<&str>,
    ) -> Result<Request, serde_json::Error> {
        Ok(Request::OpenPr {
            run_id: run_id.to_owned(),
            request_id: request_id
                .map(str::to_owned)
                .unwrap_or_else(|| request_id_for_change(run_id, args_text, &change)),
            args: RawValue::from_string(args_text.to_owned())?,
            change: Some(Box::new(change)),
            network_blocked: Vec::new(),
        })
    }

    /// The same request carrying what the egress proxy refused the run's test runs (only an
    /// `open_pr` carries it; other requests are returned unchanged). Not part of the
    /// idempotency key: a resend carries the same list.
    pub fn with_network_blocked(mut self, blocked: Vec<BlockedAttempt>) -> Request {
        if let Request::OpenPr {
            network_blocked, ..
        } = &mut self
        {
            *network_blocked = blocked;
        }
        self
    }

    /// The operation's wire name.
    pub fn op(&self) -> &'static str {
        match self {
            Request::RegisterRun(_) => "register_run",
            Request::OpenPr { .. } => "open_pr",
            Request::Decision { .. } => "decision",
            Request::Claim(_) => "claim",
            Request::RenewClaim(_) => "renew_claim",
            Request::ReleaseClaim(_) => "release_claim",
            Request::FollowUp { .. } => "follow_up",
            Request::PrFeedback(_) => "pr_feedback",
            Request::SubmitReview(_) => "submit_review",
            Request::TakeWork(_) => "take_work",
            Request::EnqueueWork(_) => "enqueue_work",
        }
    }
}

/// One request line as it travels: `op` is `register_run`, `open_pr`, `decision`, `claim`,
/// `renew_claim`, `release_claim`, `enqueue_work`, `take_work`, `follow_up`, `pr_feedback` or `submit_review`, with that operation's fields. [`Request`] is
/// what both sides handle.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct WireRequest {
    /// The operation.
    pub op: String,
    /// For `register_run`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run: Option<RunRegistration>,
    /// For `open_pr` and `decision`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_id: Option<String>,
    /// For `open_pr`: the idempotency key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_id: Option<String>,
    /// For `open_pr`: the tool-call arguments exactly as the model produced them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub args: Option<Box<RawValue>>,
    /// For `open_pr` of a run registered with [`TreeTransfer::Bytes`]: its change.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub change: Option<Box<SubmittedChange>>,
    /// For `open_pr`: what the egress proxy refused the run's test runs, as the run reports it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub network_blocked: Vec<BlockedAttempt>,
    /// For `take_work`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub take: Option<TakeWork>,
    /// For `enqueue_work`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enqueue: Option<EnqueueWork>,
    /// For `claim` and `renew_claim`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub claim: Option<ClaimRequest>,
    /// For `release_claim`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub release: Option<ClaimRelease>,
    /// For `follow_up`: the queue item changes were requested on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queue_id: Option<i64>,
    /// For `pr_feedback`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub feedback: Option<PrFeedback>,
    /// For `submit_review`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub submission: Option<ReviewSubmission>,
}

impl TryFrom<WireRequest> for Request {
    type Error = String;

    fn try_from(w: WireRequest) -> Result<Request, String> {
        match w.op.as_str() {
            "register_run" => match w.run {
                Some(run) => Ok(Request::RegisterRun(Box::new(run))),
                None => Err("register_run needs \"run\"".to_owned()),
            },
            "open_pr" => match (w.run_id, w.args) {
                (Some(run_id), Some(args)) => Ok(Request::OpenPr {
                    request_id: w.request_id.unwrap_or_else(|| match &w.change {
                        Some(change) => request_id_for_change(&run_id, args.get(), change),
                        None => request_id_for(&run_id, args.get()),
                    }),
                    run_id,
                    args,
                    change: w.change,
                    network_blocked: w.network_blocked,
                }),
                _ => Err("open_pr needs \"run_id\" and \"args\"".to_owned()),
            },
            "decision" => match w.run_id {
                Some(run_id) => Ok(Request::Decision { run_id }),
                None => Err("decision needs \"run_id\"".to_owned()),
            },
            "claim" | "renew_claim" => match w.claim {
                Some(claim) if w.op == "claim" => Ok(Request::Claim(claim)),
                Some(claim) => Ok(Request::RenewClaim(claim)),
                None => Err(format!(
                    "{} needs \"claim\" (repository, issue_number, holder, lease_secs)",
                    w.op
                )),
            },
            "release_claim" => match w.release {
                Some(release) => Ok(Request::ReleaseClaim(release)),
                None => Err(
                    "release_claim needs \"release\" (repository, issue_number, holder, end)"
                        .to_owned(),
                ),
            },
            "enqueue_work" => match w.enqueue {
                Some(enqueue) => Ok(Request::EnqueueWork(enqueue)),
                None => Err("enqueue_work needs \"enqueue\" (by, issues)".to_owned()),
            },
            "take_work" => match w.take {
                Some(take) => Ok(Request::TakeWork(take)),
                None => Err("take_work needs \"take\" (holder, lease_secs, repository)".to_owned()),
            },
            "follow_up" => match w.queue_id {
                Some(queue_id) => Ok(Request::FollowUp { queue_id }),
                None => Err("follow_up needs \"queue_id\"".to_owned()),
            },
            "pr_feedback" => match w.feedback {
                Some(feedback) => Ok(Request::PrFeedback(feedback)),
                None => Err(
                    "pr_feedback needs \"feedback\" (forge_repo, pull_request, source)".to_owned(),
                ),
            },
            "submit_review" => match w.submission {
                Some(submission) => Ok(Request::SubmitReview(Box::new(submission))),
                None => Err(
                    "submit_review needs \"submission\" (run_id, pull: owner, repo, number, \
                     head_sha, and review)"
                        .to_owned(),
                ),
            },
            other => Err(format!(
                "unknown op {other:?} (expected register_run, open_pr, decision, claim, \
                 renew_claim, release_claim, enqueue_work, take_work, follow_up, pr_feedback or \
                 submit_review)"
            )),
        }
    }
}

impl From<Request> for WireRequest {
    fn from(r: Request) -> WireRequest {
        let op = r.op().to_owned();
        match r {
            Request::RegisterRun(run) => WireRequest {
                op,
                run: Some(*run),
                ..WireRequest::default()
            },
            Request::OpenPr {
                run_id,
                request_id,
                args,
                change,
                network_blocked,
            } => WireRequest {
                op,
                run_id: Some(run_id),
                request_id: Some(request_id),
                args: Some(args),
                change,
                network_blocked,
                ..WireRequest::default()
            },
            Request::TakeWork(take) => WireRequest {
                op,
                take: Some(take),
                ..WireRequest::default()
            },
            Request::EnqueueWork(enqueue) => WireRequest {
                op,
                enqueue: Some(enqueue),
                ..WireRequest::default()
            },
            Request::Decision { run_id } => WireRequest {
                op,
                run_id: Some(run_id),
                ..WireRequest::default()
            },
            Request::Claim(claim) | Request::RenewClaim(claim) => WireRequest {
                op,
                claim: Some(claim),
                ..WireRequest::default()
            },
            Request::ReleaseClaim(release) => WireRequest {
                op,
                release: Some(release),
                ..WireRequest::default()
            },
            Request::FollowUp { queue_id } => WireRequest {
                op,
                queue_id: Some(queue_id),
                ..WireRequest::default()
            },
            Request::PrFeedback(feedback) => WireRequest {
                op,
                feedback: Some(feedback),
                ..WireRequest::default()
            },
            Request::SubmitReview(submission) => WireRequest {
                op,
                submission: Some(*submission),
                ..WireRequest::default()
            },
        }
    }
}

/// One reply line.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum BrokerReply {
    /// The run is registered (or was already registered with identical details).
    Registered {
        /// The run.
        run_id: String,
    },
    /// open_pr passed every check and waits for a human.
    Queued {
        /// Queue item id, as `airlock-broker show` takes it.
        queue_id: i64,
    },
    /// No decision yet on the run's queued pull request.
    Pending {
        /// Queue item id.
        queue_id: i64,
    },
    /// Approved and published.
    Approved {
        /// Queue item id.
        queue_id: i64,
        /// The pushed branch, `airlock/<issue-id>-<queue id>`.
        branch: String,
        /// The commit that was pushed.
        commit: String,
        /// The draft pull request, when a forge token is configured.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pr_url: Option<String>,
    },
    /// Refused under the open_pr error contract.
    Refused {
        /// The refusal: code, retryability and what the code returns.
        error: BrokerError,
    },
    /// The claim is the asker's (newly taken, or its lease extended).
    Claimed {
        /// The claim as stored.
        claim: ClaimStatus,
        /// Whether the asker newly took it (false: it already held it and the lease was
        /// extended).
        acquired: bool,
        /// The label on the forge.
        forge: ForgeMark,
    },
    /// Another holder has the issue, or its run is done: the asker must not work on it.
    ClaimTaken {
        /// The claim as stored.
        claim: ClaimStatus,
    },
    /// The claim ended as asked.
    Released {
        /// The claim as stored.
        claim: ClaimStatus,
        /// The label on the forge (removed when abandoned).
        forge: ForgeMark,
    },
    /// The answer to `follow_up`: what the follow-up run starts from.
    FollowUp {
        /// The change request and the branch head.
        brief: Box<FollowUpBrief>,
    },
    /// `take_work` found no ready issue.
    NoWork,
    /// `enqueue_work` took the issues.
    Enqueued {
        /// How many were not on the queue already.
        added: usize,
    },
    /// The broker could not do its job (not a verdict on the submission).
    Failed {
        /// What went wrong.
        message: String,
    },
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn requests_round_trip_and_bad_lines_say_what_the_operation_needs() {
        let open = Request::open_pr("run-1", "{\"b\": 1,  \"a\": 2}", None).unwrap();
        let line = serde_json::to_string(&open).unwrap();
        assert!(line.contains("\"op\":\"open_pr\""), "{line}");
        // The arguments travel byte for byte, spacing and key order kept.
        assert!(line.contains("{\"b\": 1,  \"a\": 2}"), "{line}");
        let back: Request = serde_json::from_str(&line).unwrap();
        let Request::OpenPr { request_id, .. } = &back else {
            panic!("{back:?}")
        };
        assert_eq!(
            request_id,
            &request_id_for("run-1", "{\"b\": 1,  \"a\": 2}")
        );
        for (line, says) in [
            (r#"{"op": "register_run"}"#, "register_run needs \"run\""),
            (r#"{"op": "open_pr", "run_id": "r"}"#, "open_pr needs"),
            (r#"{"op": "decision"}"#, "decision needs \"run_id\""),
            (r#"{"op": "claim"}"#, "claim needs \"claim\""),
            (r#"{"op": "release_claim"}"#, "release_claim needs"),
            (r#"{"op": "follow_up"}"#, "follow_up needs \"queue_id\""),
            (r#"{"op": "take_work"}"#, "take_work needs \"take\""),
            (
                r#"{"op": "enqueue_work"}"#,
                "enqueue_work needs \"enqueue\"",
            ),
            (r#"{"op": "pr_feedback"}"#, "pr_feedback needs \"feedback\""),
            (
                r#"{"op": "submit_review"}"#,
                "submit_review needs \"submission\"",
            ),
            (
                r#"{"op": "approve", "run_id": "r"}"#,
                "unknown op \"approve\"",
            ),
        ] {
            let err = serde_json::from_str::<Request>(line)
                .unwrap_err()
                .to_string();
            assert!(err.contains(says), "{line}: {err}");
        }
        // Without a request id, the key is derived from the bytes sent.
        let back: Request =
            serde_json::from_str(r#"{"op": "open_pr", "run_id": "r", "args": {"x":1}}"#).unwrap();
        assert_eq!(
            serde_json::to_string(&back).unwrap(),
            serde_json::to_string(&Request::open_pr("r", r#"{"x":1}"#, None).unwrap()).unwrap()
        );
    }

    #[test]
    fn claim_requests_travel_flat_and_round_trip() {
        let claim = ClaimRequest {
            issue: IssueKey {
                repository: "acme/calc".to_owned(),
                issue_number: 7,
            },
            holder: "w-1".to_owned(),
            lease_secs: 60,
        };
        let line = serde_json::to_string(&Request::RenewClaim(claim.clone())).unwrap();
        assert_eq!(
            line,
            r#"{"op":"renew_claim","claim":{"repository":"acme/calc","issue_number":7,"holder":"w-1","lease_secs":60}}"#
        );
        let back: Request = serde_json::from_str(&line).unwrap();
        assert!(matches!(back, Request::RenewClaim(c) if c == claim));
        let release = Request::ReleaseClaim(ClaimRelease {
            issue: claim.issue.clone(),
            holder: "w-1".to_owned(),
            end: ClaimEnd::Done,
        });
        let line = serde_json::to_string(&release).unwrap();
        assert!(line.contains(r#""end":"done""#), "{line}");
        let reply = BrokerReply::ClaimTaken {
            claim: ClaimStatus {
                issue: claim.issue,
                holder: "w-2".to_owned(),
                state: ClaimState::Held,
                claimed_at: 1,
                lease_expires_at: 61,
            },
        };
        let text = serde_json::to_string(&reply).unwrap();
        assert_eq!(serde_json::from_str::<BrokerReply>(&text).unwrap(), reply);
    }

    #[test]
    fn a_review_submission_travels_with_its_review_byte_for_byte() {
        let line = r#"{"op":"submit_review","submission":{"run_id":"r","pull":{"owner":"acme","repo":"calc","number":3,"head_sha":"ab"},"review":{"verdict": "comment",  "summary":"s","comments":[]}}}"#;
        let request: Request = serde_json::from_str(line).unwrap();
        let Request::SubmitReview(submission) = &request else {
            panic!("{request:?}")
        };
        assert_eq!(submission.pull.number, 3);
        assert_eq!(
            submission.review.get(),
            r#"{"verdict": "comment",  "summary":"s","comments":[]}"#
        );
        assert_eq!(serde_json::to_string(&request).unwrap(), line);
        let unknown = line.replace("\"number\":3", "\"number\":3,\"extra\":1");
        assert!(serde_json::from_str::<Request>(&unknown).is_err());
    }

    #[test]
    fn an_open_pr_with_its_change_is_another_request_than_without_and_round_trips() {
        let change = SubmittedChange::new(&"a".repeat(40), b"diff --git a/x b/x\n\0binary");
        assert_eq!(change.patch().unwrap(), b"diff --git a/x b/x\n\0binary");
        let with = Request::open_pr_with_change("r", "{}", change.clone(), None).unwrap();
        let without = Request::open_pr("r", "{}", None).unwrap();
        let (Request::OpenPr { request_id: a, .. }, Request::OpenPr { request_id: b, .. }) =
            (&with, &without)
        else {
            panic!("{with:?}")
        };
        assert_ne!(a, b);
        let line = serde_json::to_string(&with).unwrap();
        let back: Request = serde_json::from_str(&line).unwrap();
        assert!(matches!(back, Request::OpenPr { change: Some(c), .. } if *c == change));
        // A change that is not base64, or larger than the bound, says so.
        let bad = SubmittedChange {
            base_commit: "a".repeat(40),
            patch_base64: "***".to_owned(),
        };
        assert!(bad.patch().unwrap_err().contains("base64"));
        let huge = SubmittedChange {
            base_commit: "a".repeat(40),
            patch_base64: "A".repeat(MAX_PATCH_BYTES / 3 * 4 + 8),
        };
        assert!(huge.patch().unwrap_err().contains("larger than"));
        let take = Request::TakeWork(TakeWork {
            holder: "w".to_owned(),
            lease_secs: 60,
            repository: None,
        });
        let line = serde_json::to_string(&take).unwrap();
        assert_eq!(
            line,
            r#"{"op":"take_work","take":{"holder":"w","lease_secs":60}}"#
        );
        assert_eq!(
            serde_json::to_string(&BrokerReply::NoWork).unwrap(),
            r#"{"status":"no_work"}"#
        );
    }

    #[test]
    fn the_request_id_is_sha256_of_run_nul_args() {
        assert_eq!(
            request_id_for("r", "{}"),
            hex::encode(Sha256::digest(b"r\0{}"))
        );
    }
}
