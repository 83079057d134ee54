//! Work that starts without a person typing `airlock run`: GitHub webhooks (`webhook`), a poll
//! of labelled issues (`watch`), the project's CI failing on airlock's pull requests
//! (`checks`) and a batch of issues on one pin (`batch`). Each turns an issue
//! into a run through one path, [`worker::Worker`]: triage first (no claim, no token spent on
//! an issue that is not ready), then a claim through the broker (`claims`: one worker per
//! issue), then [`crate::runner::run_issue`], the very code path of `airlock run`.
//!
//! Everything read from GitHub here is data: an event's texts are kept as they are in typed
//! work items, never shown raw on a terminal and never taken as an instruction; a run screens
//! the issue text it works from like every other text.

pub mod batch;
pub mod checks;
pub mod claims;
pub mod gitlab;
pub mod replies;
pub mod shared_queue;
pub mod watch;
pub mod webhook;
pub mod work_queue;
pub mod worker;

use serde::{Deserialize, Serialize};

/// Errors of the triggers. None carries a secret or a token.
#[derive(Debug, thiserror::Error)]
pub enum TriggerError {
    /// The command line or the configuration lacks something.
    #[error("{0}")]
    Usage(String),
    /// The webhook secret's variable is unset or empty.
    #[error(
        "--secret-env names {var}, which is not set or is empty: export the webhook's secret \
         (the one configured on GitHub, or GitLab's secret token) in it"
    )]
    SecretMissing {
        /// The variable's name.
        var: String,
    },
    /// A file or directory of the triggers' state could not be read or written.
    #[error("{context}: {source}")]
    Io {
        /// What was being done, naming the path.
        context: String,
        /// The I/O failure.
        source: std::io::Error,
    },
    /// The broker did not answer a claim as the protocol says.
    #[error("broker: {0}")]
    Broker(String),
    /// Listing or reading issues on GitHub failed.
    #[error(transparent)]
    Github(#[from] crate::github::GithubError),
    /// Reading an issue on GitLab failed.
    #[error(transparent)]
    Gitlab(#[from] crate::gitlab::GitlabError),
    /// Reading an issue file failed.
    #[error(transparent)]
    Issue(#[from] crate::issue::IssueError),
    /// An agent the triggers start is missing or invalid, or two share a trigger.
    #[error(transparent)]
    Agent(#[from] crate::agents::AgentError),
    /// Loading the configuration, mirroring or pinning failed.
    #[error(transparent)]
    Run(#[from] crate::runner::RunError),
    /// The webhook server could not start.
    #[error("webhook server on {addr}: {message}")]
    Serve {
        /// The address.
        addr: String,
        /// Why.
        message: String,
    },
}

/// Result alias for the triggers.
pub type Result<T> = std::result::Result<T, TriggerError>;

/// Issue `number` of `repository` as a work item names it (`OWNER/REPO` on GitHub,
/// `gitlab:GROUP/NAME` on GitLab) as a run's source; `None` when no reference can carry it.
pub fn forge_issue(repository: &str, number: u64) -> Option<crate::github::IssueSource> {
    use crate::github::IssueSource;
    let source = if repository.starts_with(gitlab::GITLAB_PREFIX) {
        IssueSource::parse(&format!("{repository}#{number}")).ok()?
    } else {
        let (owner, repo) = repository.split_once('/')?;
        IssueSource::parse(&format!("github:{owner}/{repo}#{number}")).ok()?
    };
    matches!(source, IssueSource::GitHub(_) | IssueSource::GitLab(_)).then_some(source)
}

impl TriggerError {
    pub(crate) fn io(context: impl Into<String>) -> impl FnOnce(std::io::Error) -> TriggerError {
        let context = context.into();
        move |source| TriggerError::Io { context, source }
    }
}

/// Why an issue run was triggered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum IssueTrigger {
    /// The issue was given the configured label.
    Labelled,
    /// A comment on the issue mentioned `@airlock`.
    Mentioned,
    /// A poll found it open with the label.
    Polled,
}

/// What a reviewer did on an airlock pull request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FollowUpTrigger {
    /// A review that requests changes.
    ChangesRequested,
    /// A review that comments (a follow-up when it mentions `@airlock`; the broker decides).
    ReviewCommented,
    /// A comment on the pull request's conversation.
    PullRequestComment,
    /// A check of the project's CI failed on it (the broker reads the check and decides).
    CheckFailed,
}

/// One unit of work a trigger produced, as queued: typed, with GitHub's texts kept as data.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum WorkItem {
    /// Run the issue.
    Issue {
        /// `OWNER/REPO` on GitHub, `gitlab:GROUP/NAME` on GitLab ([`forge_issue`]).
        repository: String,
        /// The issue number.
        number: u64,
        /// Why.
        trigger: IssueTrigger,
        /// The agent its trigger starts (a built-in name or a definition's path); the run's
        /// default agent when absent.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        agent: Option<String>,
        /// The webhook delivery it came from, when it did.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        delivery: Option<String>,
    },
    /// A reviewer acted on an airlock pull request: a follow-up run on the same pull request,
    /// once the broker has read the review or comment from GitHub and accepted it.
    FollowUp {
        /// `OWNER/REPO` on GitHub, `gitlab:GROUP/NAME` on GitLab ([`forge_issue`]).
        repository: String,
        /// The pull request's number.
        pull_request: u64,
        /// Its head branch (`airlock/<issue>-<queue id>`), when the event carries it.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        head_branch: Option<String>,
        /// What the reviewer did.
        trigger: FollowUpTrigger,
        /// The reviewer's login.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        author: Option<String>,
        /// The review or comment, by its id: the broker reads its text from GitHub (the
        /// payload's copy is not believed).
        source: airlock_protocol::FeedbackSource,
        /// The webhook delivery it came from.
        delivery: String,
    },
    /// A pull request was merged: run the `on-merge` agent with it as its task.
    Merged {
        /// `OWNER/REPO` on GitHub.
        repository: String,
        /// The pull request's number.
        pull_request: u64,
        /// The agent (a built-in name or a definition's path).
        agent: String,
        /// The webhook delivery it came from.
        delivery: String,
    },
    /// A pull request was opened or updated: review it (when the webhook is configured to).
    Review {
        /// `OWNER/REPO` on GitHub.
        repository: String,
        /// The pull request's number.
        pull_request: u64,
        /// The head commit the event names (the review run reads the pull request again).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        head_sha: Option<String>,
        /// The reviewing agent (a built-in name or a definition's path); the built-in
        /// reviewer when absent.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        agent: Option<String>,
        /// The webhook delivery it came from.
        delivery: String,
    },
    /// A comment on an issue labelled `needs-info`: perhaps the answer to a run's question.
    Reply {
        /// `OWNER/REPO` on GitHub, `gitlab:GROUP/NAME` on GitLab ([`forge_issue`]).
        repository: String,
        /// The issue number.
        number: u64,
        /// The comment's id.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        comment_id: Option<u64>,
        /// The replier's login, as the delivery says (the broker reads it again).
        author: String,
        /// The replier's `author_association`, as the delivery says (the broker reads the
        /// standing again from the forge).
        association: String,
        /// Whether the replier opened the issue.
        by_issue_author: bool,
        /// The reply (GitHub's text, kept as data).
        text: String,
        /// The webhook delivery it came from, when it did.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        delivery: Option<String>,
    },
}
