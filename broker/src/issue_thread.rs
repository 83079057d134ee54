//! An issue as the forge has it now, for deciding on a question's replies: whether it still
//! exists, whether it is open, who opened it, and its comments with each author's standing on
//! the forge. The broker reads it with its own token (a delivery's claims about who wrote a
//! comment are never believed). The types are the same whichever forge answers; GitHub's
//! REST reading is here, a GitLab implementation of [`crate::publish::Forge::issue_thread`]
//! fills the same types from its notes and member access levels.

use airlock_forge::github::GitHubApi;

use crate::error::{Error, Result};

/// Most comments read from one issue (100 a page): a thread longer than that is read to here.
const MAX_COMMENT_PAGES: u32 = 20;

/// An issue as the forge answered for it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum IssueThread {
    /// The forge has no such issue any more (GitHub answers 404 or 410 for a deleted one).
    Gone,
    /// The issue.
    Present(ThreadState),
}

/// An existing issue's state and comments.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ThreadState {
    /// The forge's name as records prefix its logins (`github`, `gitlab`).
    pub forge: &'static str,
    /// Whether it is open.
    pub open: bool,
    /// Its author's login.
    pub author: String,
    /// Its comments, oldest first.
    pub comments: Vec<ThreadComment>,
}

/// One comment, with its author's standing as the forge says it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ThreadComment {
    /// The forge's id of the comment.
    pub id: u64,
    /// The author's login.
    pub by: String,
    /// The standing as the forge names it (GitHub's `author_association`, GitLab's access
    /// level).
    pub standing: String,
    /// Whether the forge counts the author a member of the project (GitHub `OWNER`, `MEMBER`,
    /// `COLLABORATOR`; on GitLab a member of the project).
    pub member: bool,
    /// The text: a person's words, data.
    pub body: String,
}

#[derive(serde::Deserialize)]
struct GhIssue {
    state: String,
    #[serde(default)]
    user: Option<GhLogin>,
}

#[derive(serde::Deserialize)]
struct GhLogin {
    login: String,
}

#[derive(serde::Deserialize)]
struct GhComment {
    id: u64,
    #[serde(default)]
    body: Option<String>,
    #[serde(default)]
    user: Option<GhLogin>,
    #[serde(default)]
    author_association: Option<String>,
}

/// What a GET answered: its JSON, or that the resource is gone.
enum Got<T> {
    Found(T),
    Gone,
}

/// `GET` of `path` through the forge crate's GitHub client; 404 and 410 are "gone".
fn get<T: serde::de::DeserializeOwned>(api: &GitHubApi, path: &str) -> Result<Got<T>> {
    match api.get_json(path) {
        Ok(found) => Ok(Got::Found(found)),
        Err(airlock_forge::Error::Status {
            status: 404 | 410, ..
        }) => Ok(Got::Gone),
        Err(e) => Err(Error::Forge(e.to_string())),
    }
}

/// Issue `number` of `slug` through `api` (the broker's token in it): the issue, then its
/// comments page by page.
pub fn github_issue_thread(api: &GitHubApi, slug: &str, number: u64) -> Result<IssueThread> {
    let issue: GhIssue = match get(api, &format!("/repos/{slug}/issues/{number}"))? {
        Got::Found(issue) => issue,
        Got::Gone => return Ok(IssueThread::Gone),
    };
    let mut comments = Vec::new();
    for page in 1..=MAX_COMMENT_PAGES {
        let path = format!("/repos/{slug}/issues/{number}/comments?per_page=100&page={page}");
        let batch: Vec<GhComment> = match get(api, &path)? {
            Got::Found(batch) => batch,
            Got::Gone => return Ok(IssueThread::Gone),
        };
        let full = batch.len() == 100;
        comments.extend(batch.into_iter().map(|c| {
            let standing = c.author_association.unwrap_or_else(|| "NONE".to_owned());
            ThreadComment {
                id: c.id,
                by: c.user.map(|u| u.login).unwrap_or_default(),
                member: matches!(standing.as_str(), "OWNER" | "MEMBER" | "COLLABORATOR"),
                standing,
                body: c.body.unwrap_or_default(),
            }
        }));
        if !full {
            break;
        }
    }
    Ok(IssueThread::Present(ThreadState {
        forge: "github",
        open: issue.state.eq_ignore_ascii_case("open"),
        author: issue.user.map(|u| u.login).unwrap_or_default(),
        comments,
    }))
}
