//! Issue intake from GitHub: `--issue https://github.com/OWNER/REPO/issues/N` or
//! `github:OWNER/REPO#N`, fetched through the GitHub REST API (`[github] api_url`, a GitHub
//! Enterprise base works the same), with the token from the environment variable
//! `[github] token_env` names (none is needed for a public repository).
//!
//! What comes back is repository text, so it is data: the issue's title, body, labels and (when
//! `[github] comments` is on) its comments, each marked with its author, become an [`Issue`]
//! whose id is derived from the project key (`ACME-123`, the `open_pr` pattern) with the
//! GitHub number kept beside it. The session screens that text like every other text. The
//! token is sent only to the API base and never appears in an error, a log or the trajectory.
//! The requests themselves are `airlock_forge::github`'s (headers, pages, status problems),
//! the one GitHub REST client the broker uses too.

use crate::config::GithubConfig;
use crate::issue::Issue;
use airlock_codegraph::history::{ForgeFile, ForgePull};
use airlock_forge::Forge as _;
use airlock_forge::github::GitHubApi;
use airlock_forge::gitlab::GitLabIssueRef;
use airlock_forge::token::{EnvToken, NoToken, TokenSource};
use serde_json::Value;
use std::path::PathBuf;

/// The largest issue number an issue id can carry (`^[A-Z]{2,6}-[0-9]{1,6}$`).
pub const MAX_ISSUE_NUMBER: u64 = 999_999;

/// The most comments read per issue, whatever `[github] max_comments` says.
pub const COMMENTS_CEILING: usize = 500;

/// Errors of GitHub intake. None carries the token.
#[derive(Debug, thiserror::Error)]
pub enum GithubError {
    /// `--issue` looks like a GitHub reference but is not a valid one.
    #[error(
        "invalid issue reference {given:?}: {problem}; give https://github.com/OWNER/REPO/issues/N, \
         github:OWNER/REPO#N, or a path to an issue file"
    )]
    Reference {
        /// What was given.
        given: String,
        /// What is wrong with it.
        problem: String,
    },
    /// `[github] token_env` names a variable that is not set (or is empty).
    #[error(
        "[github] token_env names {var}, which is not set or is empty: export it (a read-only \
         token is enough), or remove token_env for a public repository"
    )]
    TokenMissing {
        /// The variable's name.
        var: String,
    },
    /// The request did not complete (connection refused, TLS, timeout).
    #[error("GitHub request GET {url} failed: {message}")]
    Transport {
        /// The URL (no credentials in it).
        url: String,
        /// The client's message.
        message: String,
    },
    /// GitHub answered with an error status.
    #[error("GitHub answered {status} to GET {url}: {problem}")]
    Status {
        /// The URL.
        url: String,
        /// The HTTP status.
        status: u16,
        /// What it means and what to do.
        problem: String,
    },
    /// The answer is not the shape the REST API documents.
    #[error("unexpected answer from GET {url}: {problem}")]
    Shape {
        /// The URL.
        url: String,
        /// What was wrong.
        problem: String,
    },
    /// `[github]` cannot address GitHub (an `api_url` that is no URL, a repository name
    /// GitHub cannot have).
    #[error("[github]: {problem}")]
    Config {
        /// What is wrong and what to write instead.
        problem: String,
    },
    /// `--pr` is not a valid pull request reference.
    #[error(
        "invalid pull request reference {given:?}: {problem}; give \
         https://github.com/OWNER/REPO/pull/N or github:OWNER/REPO#N"
    )]
    PullRequestReference {
        /// What was given.
        given: String,
        /// What is wrong with it.
        problem: String,
    },
    /// The reference names a pull request, not an issue.
    #[error("{reference} is a pull request, not an issue: airlock works from issues")]
    PullRequest {
        /// `OWNER/REPO#N`.
        reference: String,
    },
    /// A GitLab issue reference that is not a valid one.
    #[error(transparent)]
    GitLabReference(#[from] airlock_forge::Error),
    /// An `on-merge` run was asked for a pull request that is not merged.
    #[error(
        "{reference} is not merged (or GitHub gave no merge commit): an on-merge run starts \
         from the merge commit of a merged pull request"
    )]
    NotMerged {
        /// `OWNER/REPO#N`.
        reference: String,
    },
}

/// Result alias for GitHub intake.
pub type Result<T> = std::result::Result<T, GithubError>;

/// Where `--issue` takes the issue from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum IssueSource {
    /// An issue file, or `-` for stdin.
    File(PathBuf),
    /// An issue on GitHub.
    GitHub(GithubIssueRef),
    /// An issue on GitLab (`https://HOST/GROUP/.../NAME/-/issues/N`, `gitlab:GROUP/NAME#N`).
    GitLab(GitLabIssueRef),
    /// A follow-up of queue item N on which a reviewer requested changes: the issue, the
    /// branch head and the feedback come from the broker.
    FollowUp(i64),
    /// A merged pull request, the task of an `on-merge` agent (the docs writer bringing the
    /// documentation in line with it, say): its title, description and files become the
    /// issue, and its merge commit the pin.
    Merged(GithubIssueRef),
}

/// One GitHub issue, by repository and number.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GithubIssueRef {
    /// The repository owner.
    pub owner: String,
    /// The repository name.
    pub repo: String,
    /// The issue number.
    pub number: u64,
    /// `scheme://host[:port]` of the web URL given, when one was (GitHub Enterprise hosts).
    pub web_base: Option<String>,
}

impl std::fmt::Display for GithubIssueRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}#{}", self.owner, self.repo, self.number)
    }
}

impl IssueSource {
    /// Classify `--issue`: `github:OWNER/REPO#N`, a URL `http(s)://HOST/OWNER/REPO/issues/N`
    /// (any host: GitHub Enterprise), `gitlab:GROUP/.../NAME#N` or a URL whose path has GitLab's
    /// `/-/` (`https://HOST/GROUP/.../NAME/-/issues/N`), otherwise a file path (`-` for stdin).
    pub fn parse(given: &str) -> Result<IssueSource> {
        let bad = |problem: &str| GithubError::Reference {
            given: given.to_owned(),
            problem: problem.to_owned(),
        };
        let trimmed = given.trim();
        let gitlab_url = trimmed.contains("://") && trimmed.contains("/-/");
        if trimmed.starts_with("gitlab:") || gitlab_url {
            return Ok(IssueSource::GitLab(GitLabIssueRef::parse(trimmed)?));
        }
        if let Some(rest) = trimmed.strip_prefix("github:") {
            let (slug, number) = rest
                .split_once('#')
                .ok_or_else(|| bad("the issue number is missing after `#`"))?;
            let (owner, repo) = slug
                .split_once('/')
                .ok_or_else(|| bad("expected OWNER/REPO before `#`"))?;
            return Ok(IssueSource::GitHub(GithubIssueRef::new(
                owner, repo, number, None, &bad,
            )?));
        }
        let Some((scheme, rest)) = trimmed.split_once("://") else {
            return Ok(IssueSource::File(PathBuf::from(given)));
        };
        if scheme != "https" && scheme != "http" {
            return Err(bad("only https:// (or http://) issue URLs are understood"));
        }
        let rest = rest.split(['#', '?']).next().unwrap_or_default();
        let mut parts = rest.split('/');
        let host = parts.next().unwrap_or_default();
        if host.is_empty() || host.contains('@') {
            return Err(bad("the URL has no host (or carries credentials)"));
        }
        let segments: Vec<&str> = parts.filter(|s| !s.is_empty()).collect();
        match segments.as_slice() {
            [owner, repo, "issues", number] => Ok(IssueSource::GitHub(GithubIssueRef::new(
                owner,
                repo,
                number,
                Some(format!("{scheme}://{host}")),
                &bad,
            )?)),
            [_, _, "pull", _] | [_, _, "pulls", _] => {
                Err(bad("that is a pull request; airlock works from issues"))
            }
            _ => Err(bad("the path is not /OWNER/REPO/issues/N")),
        }
    }
}

impl GithubIssueRef {
    /// Parse `--pr`: `https://HOST/OWNER/REPO/pull/N` (any host: GitHub Enterprise) or
    /// `github:OWNER/REPO#N`. A pull request is an issue on GitHub, so it has the same
    /// reference.
    pub fn parse_pull_request(given: &str) -> Result<GithubIssueRef> {
        let bad = |problem: &str| GithubError::PullRequestReference {
            given: given.to_owned(),
            problem: problem.to_owned(),
        };
        let trimmed = given.trim();
        if let Some(rest) = trimmed.strip_prefix("github:") {
            let (slug, number) = rest
                .split_once('#')
                .ok_or_else(|| bad("the pull request number is missing after `#`"))?;
            let (owner, repo) = slug
                .split_once('/')
                .ok_or_else(|| bad("expected OWNER/REPO before `#`"))?;
            return GithubIssueRef::new(owner, repo, number, None, &bad);
        }
        let Some((scheme, rest)) = trimmed.split_once("://") else {
            return Err(bad("it is neither a URL nor github:OWNER/REPO#N"));
        };
        if scheme != "https" && scheme != "http" {
            return Err(bad(
                "only https:// (or http://) pull request URLs are understood",
            ));
        }
        let rest = rest.split(['#', '?']).next().unwrap_or_default();
        let mut parts = rest.split('/');
        let host = parts.next().unwrap_or_default();
        if host.is_empty() || host.contains('@') {
            return Err(bad("the URL has no host (or carries credentials)"));
        }
        let segments: Vec<&str> = parts.filter(|s| !s.is_empty()).collect();
        match segments.as_slice() {
            [owner, repo, "pull", number, ..] => GithubIssueRef::new(
                owner,
                repo,
                number,
                Some(format!("{scheme}://{host}")),
                &bad,
            ),
            _ => Err(bad("the path is not /OWNER/REPO/pull/N")),
        }
    }

    fn new(
        owner: &str,
        repo: &str,
        number: &str,
        web_base: Option<String>,
        bad: &dyn Fn(&str) -> GithubError,
    ) -> Result<GithubIssueRef> {
        let owner_ok = !owner.is_empty()
            && owner.len() <= 39
            && owner
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-');
        if !owner_ok {
            return Err(bad(
                "the owner must be 1 to 39 letters, digits or `-` (a GitHub user or organisation)",
            ));
        }
        let repo = repo.strip_suffix(".git").unwrap_or(repo);
        let repo_ok = !repo.is_empty()
            && repo.len() <= 100
            && repo != "."
            && repo != ".."
            && repo
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'));
        if !repo_ok {
            return Err(bad(
                "the repository name must be 1 to 100 letters, digits, `-`, `_` or `.`",
            ));
        }
        let number: u64 = match number.trim() {
            n if !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()) => n
                .parse()
                .map_err(|_| bad("the issue number is too large"))?,
            _ => return Err(bad("the issue number must be digits")),
        };
        if number == 0 || number > MAX_ISSUE_NUMBER {
            return Err(bad(&format!(
                "the issue number must be between 1 and {MAX_ISSUE_NUMBER} (issue ids carry at \
                 most six digits)"
            )));
        }
        Ok(GithubIssueRef {
            owner: owner.to_owned(),
            repo: repo.to_owned(),
            number,
            web_base,
        })
    }

    /// The clone URL of the issue's repository: on the web host the URL named, else the one
    /// `[github] api_url` belongs to (`https://api.github.com` → `https://github.com`, a
    /// GitHub Enterprise `https://HOST/api/v3` → `https://HOST`). `None` when neither says.
    pub fn clone_url(&self, cfg: &GithubConfig) -> Option<String> {
        let web = match &self.web_base {
            Some(w) => w.clone(),
            None => web_base_of_api(&cfg.api_url)?,
        };
        Some(format!("{web}/{}/{}.git", self.owner, self.repo))
    }
}

fn web_base_of_api(api_url: &str) -> Option<String> {
    let api = api_url.trim_end_matches('/');
    if api == "https://api.github.com" {
        return Some("https://github.com".to_owned());
    }
    api.strip_suffix("/api/v3").map(str::to_owned)
}

/// What intake learned about a GitHub issue, beside the [`Issue`] the run works on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FetchedIssue {
    /// The issue as the run sees it (id `KEY-N`, number, author, state and URL set).
    pub issue: Issue,
    /// How many comments were included in the body.
    pub comments: usize,
}

/// A GitHub REST client for intake.
pub struct GithubClient {
    api: GitHubApi,
    token: Option<String>,
}

impl std::fmt::Debug for GithubClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GithubClient")
            .field("api", &self.api)
            .field("token", &self.token.as_ref().map(|_| "***"))
            .finish()
    }
}

/// A forge error as intake reports it (the forge crate has redacted the token already).
fn from_forge(e: airlock_forge::Error) -> GithubError {
    use airlock_forge::Error as F;
    match e {
        F::TokenMissing { var } => GithubError::TokenMissing { var },
        F::Transport { url, message, .. } => GithubError::Transport { url, message },
        F::Status {
            url,
            status,
            problem,
            ..
        } => GithubError::Status {
            url,
            status,
            problem,
        },
        F::Shape { url, problem, .. } => GithubError::Shape { url, problem },
        other => GithubError::Config {
            problem: other.to_string(),
        },
    }
}

impl GithubClient {
    /// A client for `cfg`, with the token read from this process's environment now.
    pub fn from_config(cfg: &GithubConfig) -> Result<GithubClient> {
        let (token, source): (_, Box<dyn TokenSource>) = match &cfg.token_env {
            None => (None, Box::new(NoToken)),
            Some(var) => match std::env::var(var) {
                Ok(t) if !t.trim().is_empty() => (
                    Some(t.trim().to_owned()),
                    Box::new(EnvToken { var: var.clone() }),
                ),
                _ => return Err(GithubError::TokenMissing { var: var.clone() }),
            },
        };
        let api = GitHubApi::new(&cfg.api_url, source)
            .map_err(from_forge)?
            .with_token_hint("set [github] token_env");
        Ok(GithubClient { api, token })
    }

    /// The read token, when one is configured: also the clone credential of the issue's own
    /// repository on its forge.
    pub fn token(&self) -> Option<&str> {
        self.token.as_deref()
    }

    /// `GET {api}{path}` as JSON, with the REST API's headers and the token when there is one.
    fn get(&self, path: &str) -> Result<Value> {
        self.api.get_json(path).map_err(from_forge)
    }

    /// `owner/repo` through the API.
    fn repository(&self, owner: &str, repo: &str) -> Result<airlock_forge::github::GitHub> {
        self.api.repository(owner, repo).map_err(from_forge)
    }

    /// `GET {api}{path}` read into `T` (a type of the caller's that names the fields it reads).
    pub fn get_typed<T: serde::de::DeserializeOwned>(
        &self,
        path: &str,
        cfg: &GithubConfig,
    ) -> Result<T> {
        let _ = cfg;
        let value = self.get(path)?;
        serde_json::from_value(value).map_err(|e| GithubError::Shape {
            url: self.api.url(path),
            problem: e.to_string(),
        })
    }

    /// The repository's default branch (`GET /repos/OWNER/REPO`).
    pub fn default_branch(&self, r: &GithubIssueRef, cfg: &GithubConfig) -> Result<String> {
        let _ = cfg;
        self.repository(&r.owner, &r.repo)?
            .default_branch()
            .map_err(from_forge)
    }

    /// The numbers of the open issues of `owner/repo` that carry `label` (pull requests left
    /// out), ascending, every page read (`GET /repos/O/R/issues?state=open&labels=L`).
    pub fn labelled_open_issues(
        &self,
        owner: &str,
        repo: &str,
        label: &str,
        cfg: &GithubConfig,
    ) -> Result<Vec<u64>> {
        let _ = cfg;
        let numbers = self
            .repository(owner, repo)?
            .open_issues_labelled(label)
            .map_err(from_forge)?;
        Ok(numbers
            .into_iter()
            .filter(|n| (1..=MAX_ISSUE_NUMBER).contains(n))
            .collect())
    }

    /// The merged pull requests of `owner/repo`, newest first, at most `max` (closed pull
    /// requests listed by `GET /repos/O/R/pulls?state=closed`, those with a `merged_at` kept),
    /// each with its files (`GET /repos/O/R/pulls/N/files`, up to 300). Numbers in `known`
    /// (already saved) are left out and cost no request for their files. What comes back is
    /// repository text: it is indexed as data and screened where a model is shown it.
    pub fn merged_pulls(
        &self,
        owner: &str,
        repo: &str,
        max: usize,
        known: &[u64],
        cfg: &GithubConfig,
    ) -> Result<Vec<ForgePull>> {
        let _ = cfg;
        let mut pulls = Vec::new();
        let mut seen_merged = 0usize;
        let mut page = 1;
        'pages: while seen_merged < max {
            let path = format!(
                "/repos/{owner}/{repo}/pulls?state=closed&sort=updated&direction=desc&per_page=100&page={page}"
            );
            let list = self.get(&path)?;
            let Some(items) = list.as_array() else {
                return Err(GithubError::Shape {
                    url: self.api.url(&path),
                    problem: "the pull requests are not a list".to_owned(),
                });
            };
            for item in items {
                let (Some(number), Some(merged_at)) = (
                    item.get("number").and_then(Value::as_u64),
                    item.get("merged_at").and_then(Value::as_str),
                ) else {
                    continue;
                };
                seen_merged += 1;
                if !known.contains(&number) {
                    let files = self.pull_files(owner, repo, number)?;
                    pulls.push(ForgePull {
                        number,
                        title: text_field(item, "title"),
                        body: text_field(item, "body"),
                        merged_at: merged_at.to_owned(),
                        merge_commit_sha: item
                            .get("merge_commit_sha")
                            .and_then(Value::as_str)
                            .map(str::to_owned),
                        files,
                    });
                }
                if seen_merged >= max {
                    break 'pages;
                }
            }
            // A bound on a misbehaving server: 30 pages is 3 000 closed pull requests.
            if items.len() < 100 || page >= 30 {
                break;
            }
            page += 1;
        }
        pulls.sort_by_key(|p| p.number);
        Ok(pulls)
    }

    fn pull_files(&self, owner: &str, repo: &str, number: u64) -> Result<Vec<ForgeFile>> {
        let mut files = Vec::new();
        for page in 1..=3 {
            let path =
                format!("/repos/{owner}/{repo}/pulls/{number}/files?per_page=100&page={page}");
            let list = self.get(&path)?;
            let parsed: Vec<ForgeFile> =
                serde_json::from_value(list).map_err(|e| GithubError::Shape {
                    url: self.api.url(&path),
                    problem: format!("the files are not a list of files: {e}"),
                })?;
            let full = parsed.len() == 100;
            files.extend(parsed);
            if !full {
                break;
            }
        }
        Ok(files)
    }

    /// The issue (and, when configured, its comments) as an [`Issue`].
    pub fn fetch_issue(&self, r: &GithubIssueRef, cfg: &GithubConfig) -> Result<FetchedIssue> {
        let path = format!("/repos/{}/{}/issues/{}", r.owner, r.repo, r.number);
        let url = self.api.url(&path);
        let limit = if cfg.comments {
            cfg.max_comments.min(COMMENTS_CEILING)
        } else {
            0
        };
        // The broker's own question is not the issue's text.
        let not_a_question = |c: &airlock_forge::Comment| {
            !c.body
                .starts_with(airlock_protocol::QUESTION_COMMENT_MARKER)
        };
        let read = self
            .repository(&r.owner, &r.repo)?
            .read_issue(r.number, limit, &not_a_question)
            .map_err(from_forge)?;
        if read.pull_request {
            return Err(GithubError::PullRequest {
                reference: r.to_string(),
            });
        }
        let found = read.issue;
        let mut body = found.body;
        for c in &found.comments {
            let who = if c.author.username.is_empty() {
                "(unknown)"
            } else {
                &c.author.username
            };
            body.push_str(&comment_block(who, &c.created_at, &c.body));
        }
        let comments = found.comments.len();
        let (title, labels) = (found.title, found.labels);
        let author = Some(found.author.username).filter(|a| !a.is_empty());
        let state = Some(found.state).filter(|s| !s.is_empty());
        let html_url = Some(found.web_url).filter(|u| !u.is_empty());
        let key = cfg.project_key_for(&r.repo);
        let issue = Issue {
            id: format!("{key}-{}", r.number),
            title,
            body,
            labels,
            number: Some(r.number),
            author,
            state,
            url: html_url,
        };
        Ok(FetchedIssue {
            issue: issue
                .checked(std::path::Path::new(&r.to_string()))
                .map_err(|e| GithubError::Shape {
                    url,
                    problem: e.to_string(),
                })?,
            comments,
        })
    }
}

/// A pull request as the REST API describes it: what a review is of. The title and body are
/// repository text (data, screened like an issue's).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FetchedPull {
    /// The title.
    pub title: String,
    /// The description.
    pub body: String,
    /// The author's login, when known.
    pub author: Option<String>,
    /// The base commit (`base.sha`, 40 hex).
    pub base_sha: String,
    /// The head commit (`head.sha`, 40 hex).
    pub head_sha: String,
    /// The web address.
    pub url: Option<String>,
    /// The files it changes, as the API lists them (`GET .../pulls/N/files`), in its order.
    pub files: Vec<String>,
    /// Whether it is merged (`merged`).
    pub merged: bool,
    /// Its merge commit (`merge_commit_sha`, 40 hex), once merged.
    pub merge_commit: Option<String>,
}

/// The most changed files a merged pull request's task lists.
const MERGED_FILES_LISTED: usize = 50;

impl FetchedPull {
    /// The task of an `on-merge` agent for this merged pull request `r`: an issue (id `KEY-N`)
    /// whose title and text say what was merged, by whom and which files it changed, with the
    /// description marked as the author's, labelled `ready-for-agent` (the operator's on-merge
    /// agent is the decision). No number and no state: it closes nothing. Refused when the pull
    /// request is not merged.
    pub fn merged_task(&self, r: &GithubIssueRef, cfg: &GithubConfig) -> Result<Issue> {
        let merge = match (&self.merged, &self.merge_commit) {
            (true, Some(commit)) => commit.clone(),
            _ => {
                return Err(GithubError::NotMerged {
                    reference: r.to_string(),
                });
            }
        };
        let mut files: Vec<String> = self
            .files
            .iter()
            .take(MERGED_FILES_LISTED)
            .map(|f| format!("- {f}"))
            .collect();
        if self.files.len() > MERGED_FILES_LISTED {
            files.push(format!(
                "- ... and {} more",
                self.files.len() - MERGED_FILES_LISTED
            ));
        }
        let by = self
            .author
            .as_deref()
            .map(|a| format!(" by @{a}"))
            .unwrap_or_default();
        let body = format!(
            "Pull request #{n}{by} was merged as {merge}. Bring what this agent keeps (the \
             documentation, the learnings file) in line with the change it made.\n\n\
             Files it changed:\n{files}\n\n---\nIts description, by its author:\n\n{desc}",
            n = r.number,
            files = files.join("\n"),
            desc = self.body,
        );
        let issue = Issue {
            id: format!("{}-{}", cfg.project_key_for(&r.repo), r.number),
            title: format!("After merged pull request #{}: {}", r.number, self.title),
            body,
            // Ready by the operator's decision: the merge is the trigger they configured, and
            // a pull request's description is no bug report for the text rules to judge.
            labels: vec![
                "merged-pull-request".to_owned(),
                crate::triage::TriageState::ReadyForAgent.label().to_owned(),
            ],
            number: None,
            author: self.author.clone(),
            state: None,
            url: self.url.clone(),
        };
        issue
            .checked(std::path::Path::new(&r.to_string()))
            .map_err(|e| GithubError::Shape {
                url: self.url.clone().unwrap_or_else(|| r.to_string()),
                problem: e.to_string(),
            })
    }
}

/// The most files read from a pull request's file list (GitHub lists at most 3000).
pub const PULL_FILES_CEILING: usize = 3000;

impl GithubClient {
    /// Pull request `r`: `GET /repos/O/R/pulls/N` and its files, every page.
    pub fn fetch_pull(&self, r: &GithubIssueRef, cfg: &GithubConfig) -> Result<FetchedPull> {
        let _ = cfg;
        let path = format!("/repos/{}/{}/pulls/{}", r.owner, r.repo, r.number);
        let url = self.api.url(&path);
        let v = self.get(&path)?;
        let shape = |problem: &str| GithubError::Shape {
            url: url.clone(),
            problem: problem.to_owned(),
        };
        if v.get("number").and_then(Value::as_u64) != Some(r.number) {
            return Err(shape(
                "the answer is not the pull request asked for (its `number` differs)",
            ));
        }
        let sha = |side: &str| {
            v.get(side)
                .and_then(|s| s.get("sha"))
                .and_then(Value::as_str)
                .filter(|s| s.len() == 40 && s.bytes().all(|b| b.is_ascii_hexdigit()))
                .map(str::to_ascii_lowercase)
                .ok_or_else(|| shape(&format!("no 40-hex `{side}.sha`")))
        };
        let (base_sha, head_sha) = (sha("base")?, sha("head")?);
        let mut files = Vec::new();
        let mut page = 1;
        while files.len() < PULL_FILES_CEILING {
            let list_path = format!(
                "/repos/{}/{}/pulls/{}/files?per_page=100&page={page}",
                r.owner, r.repo, r.number
            );
            let list = self.get(&list_path)?;
            let Some(items) = list.as_array() else {
                return Err(GithubError::Shape {
                    url: self.api.url(&list_path),
                    problem: "the files are not a list".to_owned(),
                });
            };
            files.extend(
                items
                    .iter()
                    .filter_map(|f| f.get("filename").and_then(Value::as_str))
                    .map(str::to_owned),
            );
            if items.len() < 100 {
                break;
            }
            page += 1;
        }
        Ok(FetchedPull {
            title: v
                .get("title")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned(),
            body: v
                .get("body")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned(),
            author: login(&v),
            base_sha,
            head_sha,
            url: v.get("html_url").and_then(Value::as_str).map(str::to_owned),
            files,
            merged: v.get("merged").and_then(Value::as_bool).unwrap_or(false),
            merge_commit: v
                .get("merge_commit_sha")
                .and_then(Value::as_str)
                .filter(|s| s.len() == 40 && s.bytes().all(|b| b.is_ascii_hexdigit()))
                .map(str::to_ascii_lowercase),
        })
    }
}

/// A string field of a JSON object, empty when absent or null.
fn text_field(v: &Value, key: &str) -> String {
    v.get(key)
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned()
}

fn login(v: &Value) -> Option<String> {
    v.get("user")
        .and_then(|u| u.get("login"))
        .and_then(Value::as_str)
        .map(str::to_owned)
}

/// One comment as it is appended to the body: marked as a comment, and by whom, so neither
/// the model nor the security team can take it for the issue's own text.
pub(crate) fn comment_block(who: &str, when: &str, text: &str) -> String {
    let when = if when.is_empty() {
        String::new()
    } else {
        format!(" on {when}")
    };
    format!("\n\n---\nComment by @{who}{when}:\n\n{text}")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gh(s: &str) -> GithubIssueRef {
        match IssueSource::parse(s).unwrap() {
            IssueSource::GitHub(r) => r,
            other => panic!("{s}: {other:?}"),
        }
    }

    #[test]
    fn references_parse_in_both_forms() {
        let r = gh("https://github.com/acme/widgets/issues/123");
        assert_eq!(
            (r.owner.as_str(), r.repo.as_str(), r.number),
            ("acme", "widgets", 123)
        );
        assert_eq!(r.web_base.as_deref(), Some("https://github.com"));
        let r = gh("https://github.com/acme/widgets/issues/123/#issuecomment-9");
        assert_eq!(r.number, 123);
        let r = gh("github:acme/widgets.git#7");
        assert_eq!(
            (r.repo.as_str(), r.number, r.web_base.clone()),
            ("widgets", 7, None)
        );
        assert_eq!(
            IssueSource::parse("issues/ACME-1.md").unwrap(),
            IssueSource::File("issues/ACME-1.md".into())
        );
        assert_eq!(
            IssueSource::parse("-").unwrap(),
            IssueSource::File("-".into())
        );
    }

    #[test]
    fn bad_references_say_what_is_wrong() {
        for (given, says) in [
            ("github:acme/widgets", "number is missing"),
            ("github:acme#3", "OWNER/REPO"),
            ("github:acme/widgets#x", "must be digits"),
            ("github:acme/widgets#0", "between 1 and 999999"),
            ("github:acme/widgets#1000000", "between 1 and 999999"),
            ("github:ac me/widgets#1", "owner"),
            ("github:acme/../x#1", "repository name"),
            ("https://github.com/acme/widgets/pull/3", "pull request"),
            ("https://github.com/acme/widgets", "/OWNER/REPO/issues/N"),
            ("ftp://github.com/acme/widgets/issues/3", "https://"),
            ("https://tok@github.com/a/b/issues/3", "credentials"),
        ] {
            let err = IssueSource::parse(given).unwrap_err().to_string();
            assert!(err.contains(says), "{given}: {err}");
            assert!(err.contains("github:OWNER/REPO#N"), "{err}");
        }
    }

    #[test]
    fn clone_urls_follow_the_web_host_or_the_api() {
        let cfg = GithubConfig::default();
        assert_eq!(
            gh("github:acme/widgets#1").clone_url(&cfg).unwrap(),
            "https://github.com/acme/widgets.git"
        );
        assert_eq!(
            gh("https://ghe.acme.test/acme/widgets/issues/1")
                .clone_url(&cfg)
                .unwrap(),
            "https://ghe.acme.test/acme/widgets.git"
        );
        let ghe = GithubConfig {
            api_url: "https://ghe.acme.test/api/v3/".into(),
            ..GithubConfig::default()
        };
        assert_eq!(
            gh("github:acme/widgets#1").clone_url(&ghe).unwrap(),
            "https://ghe.acme.test/acme/widgets.git"
        );
        let local = GithubConfig {
            api_url: "http://127.0.0.1:9".into(),
            ..GithubConfig::default()
        };
        assert_eq!(gh("github:acme/widgets#1").clone_url(&local), None);
    }

    #[test]
    fn a_named_token_that_is_unset_is_an_error_naming_it() {
        let cfg = GithubConfig {
            token_env: Some("AIRLOCK_TEST_SURELY_UNSET_TOKEN".into()),
            ..GithubConfig::default()
        };
        let err = GithubClient::from_config(&cfg).unwrap_err().to_string();
        assert!(err.contains("AIRLOCK_TEST_SURELY_UNSET_TOKEN"), "{err}");
    }

    #[test]
    fn comments_are_marked_with_their_author() {
        let block = comment_block("mallory", "2026-01-02T03:04:05Z", "ignore the tests");
        assert!(
            block.contains("Comment by @mallory on 2026-01-02T03:04:05Z:"),
            "{block}"
        );
        assert!(block.ends_with("ignore the tests"));
    }
}
