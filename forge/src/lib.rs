//! The forges airlock works with, behind one interface: [`Forge`] names the operations airlock
//! uses (read an issue with its comments, list issues by label, add and remove a label, comment,
//! open a draft change request, find one by its head branch, read review feedback with its line
//! comments and each author's standing, verify a webhook delivery) as typed requests and
//! replies. [`github::GitHub`] implements it over GitHub's REST API (github.com or GitHub
//! Enterprise), [`gitlab::GitLab`] over GitLab's REST API v4 (gitlab.com or a self-managed
//! instance by its `api_url`).
//!
//! What a forge answers is repository text: it is returned as data, never interpreted. A
//! token is read from its [`TokenSource`] for each request and dropped when the request ends;
//! no error, `Debug` output or reply carries it. This crate decides nothing (who may give
//! feedback, which label claims an issue): callers do, with the facts it returns. It never
//! runs git, never pushes, and depends on no other airlock crate.

pub mod error;
pub mod github;
pub mod gitlab;
pub mod token;
pub mod types;
pub mod webhook;

pub use error::{Error, Result};
pub use token::{EnvToken, TokenSource};
pub use types::{
    AccessLevel, Author, ChangeRequest, Comment, DraftRequest, ForgeIssue, LineRef, ReviewFeedback,
    ReviewNote, ReviewThread,
};
pub use webhook::{VerifiedDelivery, WebhookDelivery};

/// The operations airlock asks of a forge, on one project (a GitHub repository, a GitLab
/// project). Numbers are the project-scoped ones a person sees (`#12`, `!4`).
pub trait Forge {
    /// The issue `number` with its comments (system notes left out), oldest first.
    fn issue(&self, number: u64) -> Result<ForgeIssue>;

    /// The project's default branch (what a run pins when no commit is named).
    fn default_branch(&self) -> Result<String>;

    /// The numbers of the open issues that carry `label`, ascending, every page read.
    fn open_issues_labelled(&self, label: &str) -> Result<Vec<u64>>;

    /// Add `label` to issue `number` (adding one it has already is no error).
    fn add_label(&self, number: u64, label: &str) -> Result<()>;

    /// Remove `label` from issue `number` (removing one it lacks is no error).
    fn remove_label(&self, number: u64, label: &str) -> Result<()>;

    /// Post `body` as a comment on issue `number`; the comment as the forge recorded it.
    fn comment_on_issue(&self, number: u64, body: &str) -> Result<Comment>;

    /// Open a draft change request (a draft pull request, a draft merge request).
    fn open_draft(&self, request: &DraftRequest) -> Result<ChangeRequest>;

    /// The open change request whose head (source) branch is `branch`, if there is one.
    fn find_change_request(&self, branch: &str) -> Result<Option<ChangeRequest>>;

    /// The standing of user `user_id` in the project; `None` for someone who is no member
    /// (whose reply to a question, say, starts nothing).
    fn member_access(&self, user_id: u64) -> Result<Option<AccessLevel>>;

    /// The review feedback on change request `number`: its threads, their line comments, and
    /// each author's standing in the project.
    fn review_feedback(&self, number: u64) -> Result<ReviewFeedback>;

    /// Check that `delivery` was sent by the forge with `secret`, before any of its body is
    /// parsed; what identifies the delivery (for refusing a replay) when it was.
    fn verify_webhook(
        &self,
        delivery: &WebhookDelivery<'_>,
        secret: &str,
    ) -> Result<VerifiedDelivery>;
}
