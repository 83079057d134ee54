//! GitHub's REST API behind [`Forge`]: github.com (`https://api.github.com`) or a GitHub
//! Enterprise server by its `api_url` (`https://HOST/api/v3`), one repository `OWNER/REPO`.
//! Every request carries `Accept: application/vnd.github+json`, `X-GitHub-Api-Version:
//! 2022-11-28`, a `User-Agent`, and the token as `Authorization: Bearer` when its source has
//! one (a public repository is read without). Lists are read page by page (`per_page=100`,
//! `page=N`) until a page comes back short, at most [`MAX_PAGES`] pages.
//!
//! GitHub's standing of a person maps onto [`AccessLevel`] (GitLab's scale) so that callers
//! compare one way on both forges: a review's or comment's `author_association` `OWNER` is
//! [`AccessLevel::OWNER`], `MEMBER` (of the owning organisation) and `COLLABORATOR` are
//! [`AccessLevel::DEVELOPER`], anything else (`CONTRIBUTOR`, `FIRST_TIMER`, `NONE`, ...) no
//! member; a collaborator's permission `admin`/`maintain`/`write`/`triage`/`read` is
//! owner/maintainer/developer/reporter/guest.

mod api;
mod wire;

pub use api::GitHubApi;

use hmac::{Hmac, Mac};
use serde_json::json;
use sha2::Sha256;

use crate::Forge;
use crate::error::{Error, Result};
use crate::token::TokenSource;
use crate::types::{
    AccessLevel, ChangeRequest, Comment, DraftRequest, ForgeIssue, ReviewFeedback, ReviewThread,
};
use crate::webhook::{VerifiedDelivery, WebhookDelivery};

/// The most pages read of one list: 100 pages of 100 is more than any list airlock asks for,
/// and a bound on a misbehaving server.
pub const MAX_PAGES: u32 = 100;

/// Items per page asked for (GitHub's maximum).
const PER_PAGE: usize = 100;

/// A GitHub repository through the REST API.
#[derive(Clone)]
pub struct GitHub {
    api: GitHubApi,
    owner: String,
    repo: String,
}

impl std::fmt::Debug for GitHub {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GitHub")
            .field("api", &self.api)
            .field("repository", &format_args!("{}/{}", self.owner, self.repo))
            .finish()
    }
}

/// An issue as [`GitHub::read_issue`] found it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GitHubIssue {
    /// The issue with the comments read (none for a pull request).
    pub issue: ForgeIssue,
    /// Whether the number names a pull request (GitHub numbers both alike).
    pub pull_request: bool,
}

/// A comment [`GitHub::post_comment`] posted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PostedComment {
    /// The comment as GitHub recorded it.
    pub comment: Comment,
    /// Where a person reads it (`html_url`).
    pub web_url: String,
}

/// Why an `X-Hub-Signature-256` header does not prove a delivery.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum SignatureFault {
    /// No `X-Hub-Signature-256` header.
    #[error("missing X-Hub-Signature-256 header: configure the webhook's secret on GitHub")]
    Missing,
    /// The header is not `sha256=` and 64 hex digits.
    #[error("malformed X-Hub-Signature-256 header: expected sha256= and 64 hex digits")]
    Malformed,
    /// The HMAC does not match.
    #[error(
        "X-Hub-Signature-256 does not match the body under the configured secret (wrong secret, or the body was altered)"
    )]
    Mismatch,
}

/// Check `header` (the `X-Hub-Signature-256` value) against the HMAC-SHA256 of `body` under
/// `secret`, in constant time (`hmac`'s `verify_slice`).
pub fn check_signature(
    secret: &[u8],
    header: Option<&str>,
    body: &[u8],
) -> std::result::Result<(), SignatureFault> {
    let header = header.ok_or(SignatureFault::Missing)?;
    let hex_digest = header
        .trim()
        .strip_prefix("sha256=")
        .ok_or(SignatureFault::Malformed)?;
    let expected = hex::decode(hex_digest).map_err(|_| SignatureFault::Malformed)?;
    if expected.len() != 32 {
        return Err(SignatureFault::Malformed);
    }
    let mut mac = Hmac::<Sha256>::new_from_slice(secret).map_err(|_| SignatureFault::Mismatch)?;
    mac.update(body);
    mac.verify_slice(&expected)
        .map_err(|_| SignatureFault::Mismatch)
}

/// GitHub's `author_association` on [`AccessLevel`]'s scale (see the module's documentation);
/// `None` for someone who is no owner, member or collaborator.
pub fn access_of_association(association: Option<&str>) -> Option<AccessLevel> {
    match association? {
        "OWNER" => Some(AccessLevel::OWNER),
        "MEMBER" | "COLLABORATOR" => Some(AccessLevel::DEVELOPER),
        _ => None,
    }
}

impl GitHub {
    /// A client of `owner/repo` at `api_url` (`https://api.github.com`, or a GitHub Enterprise
    /// `https://HOST/api/v3`), taking its token from `token` at each request.
    pub fn new(
        api_url: &str,
        owner: &str,
        repo: &str,
        token: Box<dyn TokenSource>,
    ) -> Result<GitHub> {
        GitHubApi::new(api_url, token)?.repository(owner, repo)
    }

    /// A client of `slug` (`OWNER/REPO`) at `api_url`.
    pub fn from_slug(api_url: &str, slug: &str, token: Box<dyn TokenSource>) -> Result<GitHub> {
        let Some((owner, repo)) = slug.split_once('/') else {
            return Err(Error::Config {
                problem: format!("{slug:?} is not a GitHub repository OWNER/REPO"),
            });
        };
        GitHub::new(api_url, owner, repo, token)
    }

    /// The same client sending `user_agent` (each airlock binary names itself).
    #[must_use]
    pub fn with_user_agent(mut self, user_agent: &'static str) -> GitHub {
        self.api = self.api.with_user_agent(user_agent);
        self
    }

    /// The same client, saying `hint` where an answer asks for a token it did not send.
    #[must_use]
    pub fn with_token_hint(mut self, hint: &str) -> GitHub {
        self.api = self.api.with_token_hint(hint);
        self
    }

    /// The API this repository is read and written through.
    pub fn api(&self) -> &GitHubApi {
        &self.api
    }

    /// `OWNER/REPO`.
    pub fn slug(&self) -> String {
        format!("{}/{}", self.owner, self.repo)
    }

    fn repo_path(&self, tail: &str) -> String {
        format!("/repos/{}/{}{tail}", self.owner, self.repo)
    }

    /// The issue `number` with at most `max_comments` of its comments (`0` reads none), oldest
    /// first; a comment `keep` refuses is left out (and still counts against the pages read).
    /// A pull request is reported as one, without comments; an answer about another number
    /// is an error.
    pub fn read_issue(
        &self,
        number: u64,
        max_comments: usize,
        keep: &dyn Fn(&Comment) -> bool,
    ) -> Result<GitHubIssue> {
        let path = self.repo_path(&format!("/issues/{number}"));
        let mut v: wire::Issue = self.api.get_json(&path)?;
        let pull_request = v.is_pull_request();
        if !pull_request && v.number != number {
            return Err(Error::Shape {
                method: "GET",
                url: self.api.url(&path),
                problem: "the answer is not the issue asked for (its `number` differs)".to_owned(),
            });
        }
        let mut comments = Vec::new();
        if !pull_request && max_comments > 0 && v.comments.unwrap_or(1) > 0 {
            let mut page = 1;
            while comments.len() < max_comments {
                let list_path = self.repo_path(&format!(
                    "/issues/{number}/comments?per_page={PER_PAGE}&page={page}"
                ));
                let items: Vec<wire::IssueComment> = self.api.get_json(&list_path)?;
                let full = items.len() >= PER_PAGE;
                for c in items.into_iter().take(max_comments - comments.len()) {
                    let c = c.into_comment();
                    if keep(&c) {
                        comments.push(c);
                    }
                }
                if !full || page >= MAX_PAGES {
                    break;
                }
                page += 1;
            }
        }
        let labels = v.label_names();
        let author = v.author();
        Ok(GitHubIssue {
            issue: ForgeIssue {
                number: v.number,
                title: v.title,
                body: v.body.unwrap_or_default(),
                state: v.state.unwrap_or_default(),
                author,
                labels,
                web_url: v.html_url.unwrap_or_default(),
                comments,
            },
            pull_request,
        })
    }

    /// Post `body` on issue (or pull request) `number`: `POST .../issues/N/comments`.
    pub fn post_comment(&self, number: u64, body: &str) -> Result<PostedComment> {
        let path = self.repo_path(&format!("/issues/{number}/comments"));
        let posted: wire::IssueComment = self.api.post_json(&path, &json!({ "body": body }))?;
        let Some(web_url) = posted.html_url.clone() else {
            return Err(Error::Shape {
                method: "POST",
                url: self.api.url(&path),
                problem: "reply has no html_url".to_owned(),
            });
        };
        Ok(PostedComment {
            comment: posted.into_comment(),
            web_url,
        })
    }

    /// The first pull request whose head is `branch` of this repository's owner, open ones
    /// only or (`any_state`) closed and merged ones too:
    /// `GET .../pulls?state=open|all&head=OWNER:BRANCH`.
    pub fn find_pull(&self, branch: &str, any_state: bool) -> Result<Option<ChangeRequest>> {
        let state = if any_state { "all" } else { "open" };
        let head = percent_encode(&format!("{}:{branch}", self.owner));
        let path = self.repo_path(&format!("/pulls?state={state}&head={head}"));
        let pulls: Vec<wire::Pull> = self.api.get_json(&path)?;
        // GitHub filters by `head`; a server that did not is not believed.
        Ok(pulls
            .into_iter()
            .find(|p| p.head() == branch)
            .map(wire::Pull::into_change))
    }
}

/// `text` with every byte but unreserved ones (RFC 3986) as `%XX`, for a query value or a
/// path segment.
fn percent_encode(text: &str) -> String {
    text.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
                char::from(b).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

impl Forge for GitHub {
    /// Every comment, at most [`MAX_PAGES`] pages of them; a pull request's number is refused.
    fn issue(&self, number: u64) -> Result<ForgeIssue> {
        let read = self.read_issue(number, usize::MAX, &|_| true)?;
        if read.pull_request {
            return Err(Error::Reference {
                given: format!("{}#{number}", self.slug()),
                problem: "that is a pull request, not an issue".to_owned(),
            });
        }
        Ok(read.issue)
    }

    /// `GET /repos/O/R`'s `default_branch`, refused when it could not name a branch.
    fn default_branch(&self) -> Result<String> {
        let path = self.repo_path("");
        let repository: wire::Repository = self.api.get_json(&path)?;
        match repository.default_branch {
            Some(b) if !b.is_empty() && !b.starts_with('-') && !b.contains("..") => Ok(b),
            _ => Err(Error::Shape {
                method: "GET",
                url: self.api.url(&path),
                problem: "no usable `default_branch`".to_owned(),
            }),
        }
    }

    /// `GET .../issues?state=open&labels=L`, pull requests left out.
    fn open_issues_labelled(&self, label: &str) -> Result<Vec<u64>> {
        let path = self.repo_path(&format!(
            "/issues?state=open&labels={}",
            percent_encode(label)
        ));
        let items: Vec<wire::IssueNumber> = self.api.get_all(&path)?;
        let mut numbers: Vec<u64> = items
            .iter()
            .filter(|i| !i.is_pull_request())
            .filter_map(|i| i.number)
            .collect();
        numbers.sort_unstable();
        numbers.dedup();
        Ok(numbers)
    }

    /// `POST .../issues/N/labels` with `{"labels": [label]}`.
    fn add_label(&self, number: u64, label: &str) -> Result<()> {
        let path = self.repo_path(&format!("/issues/{number}/labels"));
        let _: serde::de::IgnoredAny = self.api.post_json(&path, &json!({ "labels": [label] }))?;
        Ok(())
    }

    /// `DELETE .../issues/N/labels/L`; GitHub's 404 for a label the issue lacks is no error.
    fn remove_label(&self, number: u64, label: &str) -> Result<()> {
        let path = self.repo_path(&format!(
            "/issues/{number}/labels/{}",
            percent_encode(label)
        ));
        match self.api.delete(&path) {
            Ok(_) | Err(Error::Status { status: 404, .. }) => Ok(()),
            Err(e) => Err(e),
        }
    }

    fn comment_on_issue(&self, number: u64, body: &str) -> Result<Comment> {
        self.post_comment(number, body).map(|p| p.comment)
    }

    /// `POST .../pulls` with `draft: true`.
    fn open_draft(&self, request: &DraftRequest) -> Result<ChangeRequest> {
        let path = self.repo_path("/pulls");
        let body = json!({
            "title": request.title,
            "head": request.source_branch,
            "base": request.target_branch,
            "body": request.description,
            "draft": true,
        });
        let pull: wire::Pull = self.api.post_json(&path, &body)?;
        Ok(pull.into_change())
    }

    fn find_change_request(&self, branch: &str) -> Result<Option<ChangeRequest>> {
        self.find_pull(branch, false)
    }

    /// `GET /user/ID` for the login, then `GET .../collaborators/LOGIN/permission`; a user or
    /// collaborator GitHub does not know (404) is no member.
    fn member_access(&self, user_id: u64) -> Result<Option<AccessLevel>> {
        let account: wire::Account = match self.api.get_json(&format!("/user/{user_id}")) {
            Ok(a) => a,
            Err(Error::Status { status: 404, .. }) => return Ok(None),
            Err(e) => return Err(e),
        };
        let path = self.repo_path(&format!(
            "/collaborators/{}/permission",
            percent_encode(&account.login)
        ));
        match self.api.get_json::<wire::Permission>(&path) {
            Ok(p) => Ok(p.access()),
            Err(Error::Status { status: 404, .. }) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Each review (`GET .../pulls/N/reviews`) is a thread: its body, then its line comments
    /// (`GET .../pulls/N/comments`), each author's standing from `author_association`. GitHub's
    /// REST API does not say whether a conversation was resolved: `resolved` is false.
    fn review_feedback(&self, number: u64) -> Result<ReviewFeedback> {
        let reviews: Vec<wire::Review> = self
            .api
            .get_all(&self.repo_path(&format!("/pulls/{number}/reviews")))?;
        let mut comments: Vec<wire::ReviewComment> = self
            .api
            .get_all(&self.repo_path(&format!("/pulls/{number}/comments")))?;
        let mut threads = Vec::new();
        for review in reviews {
            let id = review.id;
            let mut notes: Vec<_> = review.into_note().into_iter().collect();
            let (mine, rest): (Vec<_>, Vec<_>) = comments
                .into_iter()
                .partition(|c| c.pull_request_review_id == Some(id));
            comments = rest;
            notes.extend(mine.into_iter().map(wire::ReviewComment::into_note));
            if !notes.is_empty() {
                threads.push(ReviewThread {
                    id: id.to_string(),
                    resolved: false,
                    notes,
                });
            }
        }
        // Line comments of no review listed: each its own thread.
        for c in comments {
            threads.push(ReviewThread {
                id: c.id.to_string(),
                resolved: false,
                notes: vec![c.into_note()],
            });
        }
        Ok(ReviewFeedback { number, threads })
    }

    /// `X-Hub-Signature-256` (HMAC-SHA256 of the body under `secret`, compared in constant
    /// time); the event from `X-GitHub-Event` and the delivery's id from `X-GitHub-Delivery`.
    fn verify_webhook(
        &self,
        delivery: &WebhookDelivery<'_>,
        secret: &str,
    ) -> Result<VerifiedDelivery> {
        let refuse = |problem: String| Error::Webhook { problem };
        if secret.is_empty() {
            return Err(refuse(
                "no webhook secret is configured: every delivery is refused until one is"
                    .to_owned(),
            ));
        }
        check_signature(
            secret.as_bytes(),
            delivery.header("X-Hub-Signature-256"),
            delivery.body,
        )
        .map_err(|e| refuse(e.to_string()))?;
        let event = delivery
            .header("X-GitHub-Event")
            .filter(|e| !e.trim().is_empty())
            .ok_or_else(|| {
                refuse("no X-GitHub-Event header: not a GitHub webhook delivery".to_owned())
            })?;
        Ok(VerifiedDelivery {
            event: event.trim().to_owned(),
            delivery_id: delivery.header("X-GitHub-Delivery").map(str::to_owned),
        })
    }
}
