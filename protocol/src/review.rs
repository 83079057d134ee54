//! Pull requests after they are opened: a review submission, a reviewer's feedback as the
//! forge names it, and the brief a follow-up run starts from.

use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

use crate::IssueText;

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

/// A reviewer's review or comment, or a CI check, on a pull request, by its forge id.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FeedbackSource {
    /// Which kind of text.
    pub kind: FeedbackKind,
    /// Its id on the forge.
    pub id: u64,
}

/// The kinds of text a follow-up starts from: a reviewer's, or the project's CI's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FeedbackKind {
    /// A pull request review (`/pulls/{n}/reviews/{id}`), with its inline comments.
    Review,
    /// A comment on the pull request's conversation (`/issues/comments/{id}`).
    IssueComment,
    /// A check run of the project's CI that completed on the pull request's head
    /// (`/check-runs/{id}`): its output, annotations and (for GitHub Actions) its job's log.
    CheckRun,
    /// The checks of the pull request's head as a whole: a check suite or a workflow run that
    /// completed (its id, kept for the record). The broker lists the head's check runs
    /// (`/commits/{sha}/check-runs`) and takes the first failed one it has not acted on.
    HeadChecks,
}
