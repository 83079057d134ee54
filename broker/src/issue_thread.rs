//! An issue as the forge has it now, for deciding on a question's replies: whether it still
//! exists, whether it is open, who opened it, and its comments with each author's standing on
//! the forge. The broker reads it with its own token (a delivery's claims about who wrote a
//! comment are never believed). The types are the same whichever forge answers; GitHub's
//! REST reading is here, a GitLab implementation of [`crate::publish::Forge::issue_thread`]
//! fills the same types from its notes and member access levels.

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

fn get<T: serde::de::DeserializeOwned>(
    agent: &ureq::Agent,
    url: &str,
    token: &str,
) -> Result<Got<T>> {
    let mut resp = agent
        .get(url)
        .header("Authorization", &format!("Bearer {token}"))
        .header("Accept", "application/vnd.github+json")
        .header("X-GitHub-Api-Version", "2022-11-28")
        .header("User-Agent", "airlock-broker")
        .call()
        .map_err(|e| Error::Forge(format!("GET {url}: {e}")))?;
    let status = resp.status().as_u16();
    if status == 404 || status == 410 {
        return Ok(Got::Gone);
    }
    let text = resp
        .body_mut()
        .read_to_string()
        .map_err(|e| Error::Forge(format!("GET {url}: {e}")))?;
    if !(200..300).contains(&status) {
        return Err(Error::Forge(format!(
            "GET {url} answered {status}: {}",
            text.chars().take(300).collect::<String>()
        )));
    }
    serde_json::from_str(&text)
        .map(Got::Found)
        .map_err(|e| Error::Forge(format!("GET {url}: the reply does not parse: {e}")))
}

/// Issue `number` of `slug` on GitHub's REST API at `api`, read with `token`: the issue, then
/// its comments page by page. The caller redacts the token from errors.
pub fn github_issue_thread(
    agent: &ureq::Agent,
    api: &str,
    slug: &str,
    token: &str,
    number: u64,
) -> Result<IssueThread> {
    let api = api.trim_end_matches('/');
    let issue: GhIssue = match get(agent, &format!("{api}/repos/{slug}/issues/{number}"), token)? {
        Got::Found(issue) => issue,
        Got::Gone => return Ok(IssueThread::Gone),
    };
    let mut comments = Vec::new();
    for page in 1..=MAX_COMMENT_PAGES {
        let url = format!("{api}/repos/{slug}/issues/{number}/comments?per_page=100&page={page}");
        let batch: Vec<GhComment> = match get(agent, &url, token)? {
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
