//! GitLab's REST API v4 behind [`Forge`]: gitlab.com or a self-managed instance by its
//! `api_url` (`https://HOST/api/v4`), one project by numeric id or `group/subgroup/name` path.
//! The token goes in the `PRIVATE-TOKEN` header, read from its source for each request. Lists
//! are read page by page (`per_page=100`, following `X-Next-Page`).

mod mr;
mod reference;
mod wire;

pub use mr::{Job, JobTrace, MAX_TRACE_BYTES, MergeRequestRefs, OpenMergeRequest};
pub use reference::{GitLabIssueRef, ProjectId};

use std::collections::BTreeMap;
use std::time::Duration;

use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use crate::Forge;
use crate::error::{Error, Result};
use crate::token::TokenSource;
use crate::types::{
    AccessLevel, ChangeRequest, Comment, DraftRequest, ForgeIssue, ReviewFeedback, ReviewThread,
};
use crate::webhook::{VerifiedDelivery, WebhookDelivery, secrets_match};
use reference::percent_encode;

/// The most pages read of one list: 100 pages of 100 is more than any list airlock asks for.
pub const MAX_PAGES: u32 = 100;

/// The largest answer body read, in bytes.
const MAX_BODY_BYTES: u64 = 16 * 1024 * 1024;

/// The longest note or description GitLab stores, in characters.
pub const MAX_TEXT_CHARS: usize = 1_000_000;

/// GitLab's marker of a draft merge request, in its title.
pub const DRAFT_PREFIX: &str = "Draft: ";

/// A GitLab project through its REST API v4.
pub struct GitLab {
    api: String,
    project: ProjectId,
    token: Box<dyn TokenSource>,
    agent: ureq::Agent,
}

impl std::fmt::Debug for GitLab {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GitLab")
            .field("api", &self.api)
            .field("project", &self.project)
            .field("token", &self.token.describe())
            .finish()
    }
}

#[derive(Clone, Copy)]
enum Method {
    Get,
    Post,
    Put,
}

impl Method {
    fn name(self) -> &'static str {
        match self {
            Method::Get => "GET",
            Method::Post => "POST",
            Method::Put => "PUT",
        }
    }
}

/// One answer: its body and, for a list, the next page GitLab named.
struct Answer {
    text: String,
    next_page: Option<u32>,
}

impl GitLab {
    /// A client of `project` on the instance at `api_url` (`https://HOST/api/v4`), taking its
    /// token from `token` at each request.
    pub fn new(api_url: &str, project: ProjectId, token: Box<dyn TokenSource>) -> Result<GitLab> {
        let api = api_base(api_url)?;
        let config = ureq::Agent::config_builder()
            .timeout_global(Some(Duration::from_secs(60)))
            .http_status_as_error(false)
            .build();
        Ok(GitLab {
            api,
            project,
            token,
            agent: ureq::Agent::new_with_config(config),
        })
    }

    /// The project this client works on.
    pub fn project(&self) -> &ProjectId {
        &self.project
    }

    fn project_path(&self, tail: &str) -> String {
        format!("/projects/{}{tail}", self.project.url_segment())
    }

    /// One request to `{api}{path}`; the answer's body when its status is a success.
    fn send(&self, method: Method, path: &str, body: Option<&Value>) -> Result<Answer> {
        let url = format!("{}{path}", self.api);
        let token = self.token.token()?;
        let result = self.send_with(method, &url, body, token.as_deref());
        // The token lives only for this request; whatever the client said, it is not in it.
        result.map_err(|e| e.redacted(token.as_deref()))
    }

    fn send_with(
        &self,
        method: Method,
        url: &str,
        body: Option<&Value>,
        token: Option<&str>,
    ) -> Result<Answer> {
        let transport = |e: ureq::Error| Error::Transport {
            method: method.name(),
            url: url.to_owned(),
            message: e.to_string(),
        };
        let json_body = body.map(Value::to_string).unwrap_or_default();
        let mut resp = match method {
            Method::Get => {
                let mut r = self.agent.get(url).header("User-Agent", "airlock");
                if let Some(t) = token {
                    r = r.header("PRIVATE-TOKEN", t);
                }
                r.call().map_err(transport)?
            }
            Method::Post | Method::Put => {
                let mut r = match method {
                    Method::Post => self.agent.post(url),
                    _ => self.agent.put(url),
                }
                .header("User-Agent", "airlock")
                .header("Content-Type", "application/json");
                if let Some(t) = token {
                    r = r.header("PRIVATE-TOKEN", t);
                }
                r.send(json_body).map_err(transport)?
            }
        };
        let status = resp.status().as_u16();
        let next_page = resp
            .headers()
            .get("x-next-page")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse().ok());
        let text = resp
            .body_mut()
            .with_config()
            .limit(MAX_BODY_BYTES)
            .read_to_string()
            .map_err(transport)?;
        if !(200..300).contains(&status) {
            return Err(Error::Status {
                method: method.name(),
                url: url.to_owned(),
                status,
                problem: self.status_problem(status, &text),
            });
        }
        Ok(Answer { text, next_page })
    }

    /// What an error status means here, and what to do about it.
    fn status_problem(&self, status: u16, text: &str) -> String {
        let source = self.token.describe();
        let message = serde_json::from_str::<Value>(text)
            .ok()
            .and_then(|v| {
                let m = v.get("message").or_else(|| v.get("error"))?;
                Some(m.as_str().map_or_else(|| m.to_string(), str::to_owned))
            })
            .unwrap_or_else(|| text.chars().take(200).collect());
        let said = message.escape_debug().to_string();
        match status {
            401 => format!(
                "GitLab rejected the token ({source}): expired, revoked, mistyped, or without \
                 the api scope (GitLab said {said:?})"
            ),
            403 => format!(
                "the token ({source}) may not do this in project {}: its role is too low or \
                 its scope read-only (GitLab said {said:?})",
                self.project
            ),
            404 => format!(
                "not found: project {} or what was asked for does not exist, or the token \
                 ({source}) cannot see it (GitLab said {said:?})",
                self.project
            ),
            429 => "GitLab's rate limit is used up; wait for it to reset".to_owned(),
            _ => format!("GitLab said {said:?}"),
        }
    }

    fn parse<T: DeserializeOwned>(&self, method: Method, path: &str, text: &str) -> Result<T> {
        serde_json::from_str(text).map_err(|e| Error::Shape {
            method: method.name(),
            url: format!("{}{path}", self.api),
            problem: e.to_string(),
        })
    }

    fn get<T: DeserializeOwned>(&self, path: &str) -> Result<T> {
        let answer = self.send(Method::Get, path, None)?;
        self.parse(Method::Get, path, &answer.text)
    }

    /// Every page of the list at `path`, in GitLab's order.
    fn get_all<T: DeserializeOwned>(&self, path: &str) -> Result<Vec<T>> {
        let mut all = Vec::new();
        let mut page = 1;
        loop {
            let glue = if path.contains('?') { '&' } else { '?' };
            let paged = format!("{path}{glue}per_page=100&page={page}");
            let answer = self.send(Method::Get, &paged, None)?;
            let items: Vec<T> = self.parse(Method::Get, &paged, &answer.text)?;
            all.extend(items);
            match answer.next_page {
                Some(next) if next > page && next <= MAX_PAGES => page = next,
                Some(next) if next > MAX_PAGES => {
                    return Err(Error::Shape {
                        method: "GET",
                        url: format!("{}{path}", self.api),
                        problem: format!("the list runs past {MAX_PAGES} pages of 100"),
                    });
                }
                _ => return Ok(all),
            }
        }
    }

    fn send_json<T: DeserializeOwned>(
        &self,
        method: Method,
        path: &str,
        body: &Value,
    ) -> Result<T> {
        let answer = self.send(method, path, Some(body))?;
        self.parse(method, path, &answer.text)
    }

    fn change_labels(&self, number: u64, key: &str, label: &str) -> Result<()> {
        if label.contains(',') || label.trim().is_empty() {
            return Err(Error::Label {
                label: label.to_owned(),
                problem: "GitLab separates labels with commas, and an empty label names none"
                    .to_owned(),
            });
        }
        let path = self.project_path(&format!("/issues/{number}"));
        let _: wire::Issue = self.send_json(Method::Put, &path, &json!({ key: label }))?;
        Ok(())
    }
}

/// The REST API base `api_url` names, checked: `http(s)://HOST[/PATH]/api/v4` without
/// credentials, trailing `/` dropped. A bad one is an error saying what to write instead.
pub fn api_base(api_url: &str) -> Result<String> {
    let api = api_url.trim().trim_end_matches('/');
    let Some((scheme, rest)) = api.split_once("://") else {
        return Err(Error::Config {
            problem: format!("api_url {api:?} is not a URL; give https://HOST/api/v4"),
        });
    };
    if !matches!(scheme, "https" | "http") || rest.is_empty() || rest.contains('@') {
        return Err(Error::Config {
            problem: format!("api_url {api:?} must be https://HOST/api/v4 (no credentials in it)"),
        });
    }
    if !api.ends_with("/api/v4") {
        return Err(Error::Config {
            problem: format!("api_url {api:?} does not end in /api/v4 (REST API v4)"),
        });
    }
    Ok(api.to_owned())
}

/// Check a GitLab webhook delivery: its `X-Gitlab-Token` equals `secret` (compared in
/// constant time) and it names its event; the event and the delivery's id
/// (`X-Gitlab-Event-UUID`, else `Idempotency-Key`) when it does. Needs no project or token:
/// a listener checks deliveries before it knows which project one is about.
pub fn verify_delivery(delivery: &WebhookDelivery<'_>, secret: &str) -> Result<VerifiedDelivery> {
    let refuse = |problem: &str| Error::Webhook {
        problem: problem.to_owned(),
    };
    if secret.is_empty() {
        return Err(refuse(
            "no webhook secret is configured: every delivery is refused until one is",
        ));
    }
    let given = delivery.header("X-Gitlab-Token").ok_or_else(|| {
        refuse("no X-Gitlab-Token header: set the webhook's secret token on GitLab")
    })?;
    if !secrets_match(given.as_bytes(), secret.as_bytes()) {
        return Err(refuse(
            "X-Gitlab-Token does not match the configured webhook secret",
        ));
    }
    let event = delivery
        .header("X-Gitlab-Event")
        .filter(|e| !e.trim().is_empty())
        .ok_or_else(|| refuse("no X-Gitlab-Event header: not a GitLab webhook delivery"))?;
    let delivery_id = delivery
        .header("X-Gitlab-Event-UUID")
        .or_else(|| delivery.header("Idempotency-Key"))
        .map(str::to_owned);
    Ok(VerifiedDelivery {
        event: event.trim().to_owned(),
        delivery_id,
    })
}

/// Nothing when GitLab would store `text` whole; an error naming `what` otherwise.
fn within_limit(what: &'static str, text: &str) -> Result<()> {
    let chars = text.chars().count();
    if chars > MAX_TEXT_CHARS {
        return Err(Error::TooLong {
            what,
            chars,
            limit: MAX_TEXT_CHARS,
        });
    }
    Ok(())
}

impl Forge for GitLab {
    fn issue(&self, number: u64) -> Result<ForgeIssue> {
        let issue: wire::Issue = self.get(&self.project_path(&format!("/issues/{number}")))?;
        let notes: Vec<wire::Note> = self.get_all(&self.project_path(&format!(
            "/issues/{number}/notes?sort=asc&order_by=created_at"
        )))?;
        Ok(issue.into_issue(notes))
    }

    fn default_branch(&self) -> Result<String> {
        let path = self.project_path("");
        let project: wire::Project = self.get(&path)?;
        match project.default_branch {
            Some(b) if !b.is_empty() && !b.starts_with('-') && !b.contains("..") => Ok(b),
            _ => Err(Error::Shape {
                method: "GET",
                url: format!("{}{path}", self.api),
                problem: "no usable `default_branch` (an empty project has none)".to_owned(),
            }),
        }
    }

    fn open_issues_labelled(&self, label: &str) -> Result<Vec<u64>> {
        let path = self.project_path(&format!(
            "/issues?labels={}&state=opened",
            percent_encode(label)
        ));
        let issues: Vec<wire::IssueNumber> = self.get_all(&path)?;
        let mut numbers: Vec<u64> = issues.into_iter().map(|i| i.iid).collect();
        numbers.sort_unstable();
        numbers.dedup();
        Ok(numbers)
    }

    fn add_label(&self, number: u64, label: &str) -> Result<()> {
        self.change_labels(number, "add_labels", label)
    }

    fn remove_label(&self, number: u64, label: &str) -> Result<()> {
        self.change_labels(number, "remove_labels", label)
    }

    fn comment_on_issue(&self, number: u64, body: &str) -> Result<Comment> {
        within_limit("the note", body)?;
        let path = self.project_path(&format!("/issues/{number}/notes"));
        let note: wire::Note = self.send_json(Method::Post, &path, &json!({ "body": body }))?;
        Ok(note.into_comment())
    }

    fn open_draft(&self, request: &DraftRequest) -> Result<ChangeRequest> {
        within_limit("the merge request's description", &request.description)?;
        let path = self.project_path("/merge_requests");
        // The create endpoint has no draft parameter: the title's prefix is GitLab's flag.
        let title = if request.title.starts_with("Draft:") {
            request.title.clone()
        } else {
            format!("{DRAFT_PREFIX}{}", request.title)
        };
        let body = json!({
            "source_branch": request.source_branch,
            "target_branch": request.target_branch,
            "title": title,
            "description": request.description,
            "remove_source_branch": false,
        });
        let mr: wire::MergeRequest = self.send_json(Method::Post, &path, &body)?;
        let change = mr.into_change();
        if !change.draft {
            return Err(Error::Shape {
                method: "POST",
                url: format!("{}{path}", self.api),
                problem: format!(
                    "merge request !{} was opened but GitLab does not mark it a draft",
                    change.number
                ),
            });
        }
        Ok(change)
    }

    fn find_change_request(&self, branch: &str) -> Result<Option<ChangeRequest>> {
        let path = self.project_path(&format!(
            "/merge_requests?source_branch={}&state=opened",
            percent_encode(branch)
        ));
        let list: Vec<wire::MergeRequest> = self.get_all(&path)?;
        Ok(list
            .into_iter()
            .find(|mr| mr.source_branch == branch)
            .map(wire::MergeRequest::into_change))
    }

    /// `GET /projects/:id/members/all/:user_id` (inherited memberships included); `404` is
    /// no member.
    fn member_access(&self, user_id: u64) -> Result<Option<AccessLevel>> {
        let path = self.project_path(&format!("/members/all/{user_id}"));
        match self.get::<wire::Member>(&path) {
            Ok(m) => Ok(Some(AccessLevel(m.access_level))),
            Err(Error::Status { status: 404, .. }) => Ok(None),
            Err(e) => Err(e),
        }
    }

    fn review_feedback(&self, number: u64) -> Result<ReviewFeedback> {
        let path = self.project_path(&format!("/merge_requests/{number}/discussions"));
        let discussions: Vec<wire::Discussion> = self.get_all(&path)?;
        let mut levels: BTreeMap<u64, Option<AccessLevel>> = BTreeMap::new();
        let mut threads = Vec::new();
        for discussion in discussions {
            let mut thread = ReviewThread {
                id: discussion.id,
                resolved: false,
                notes: Vec::new(),
            };
            let resolvable: Vec<&wire::Note> =
                discussion.notes.iter().filter(|n| n.resolvable).collect();
            thread.resolved =
                !resolvable.is_empty() && resolvable.iter().all(|n| n.resolved == Some(true));
            for note in discussion.notes.into_iter().filter(|n| !n.system) {
                let access = match levels.get(&note.author.id) {
                    Some(level) => *level,
                    None => {
                        let level = self.member_access(note.author.id)?;
                        levels.insert(note.author.id, level);
                        level
                    }
                };
                thread.notes.push(note.into_review_note(access));
            }
            if !thread.notes.is_empty() {
                threads.push(thread);
            }
        }
        Ok(ReviewFeedback { number, threads })
    }

    fn verify_webhook(
        &self,
        delivery: &WebhookDelivery<'_>,
        secret: &str,
    ) -> Result<VerifiedDelivery> {
        verify_delivery(delivery, secret)
    }
}
