//! `airlock webhook`: GitHub's webhook deliveries, verified and turned into work.
//!
//! Order, for every delivery: the `X-Hub-Signature-256` HMAC-SHA256 of the body under the
//! shared secret is checked in constant time (`hmac`'s `verify_slice`), and a missing,
//! malformed or wrong one is refused with 401 and the reason; then the `X-GitHub-Delivery` id
//! is recorded in the [`DeliveryLog`] (a file per id, created exclusively, so a replay is
//! ignored across restarts too); only then is the payload parsed. An issue labelled with a
//! label that starts an agent ([`Routes`]: the configured label starts the default agent, each
//! agent of `[agent] triggered` its own), or an issue comment that mentions `@airlock` (the
//! default agent), becomes an issue run
//! ([`super::worker`]); a review requesting changes (or commenting with `@airlock`) or a comment
//! on an airlock pull request becomes a follow-up run of that pull request, once the broker has
//! read the review from GitHub and accepted it ([`Worker::follow_up`]). Every accepted delivery
//! is written to the on-disk [`WorkQueue`] before it is answered 202, so a restart or a kill -9
//! loses none.
//! A pull request opened or updated (one airlock did not open) starts a review run
//! ([`Worker::review`]) on the same worker threads when an agent answers pull requests: the
//! built-in reviewer with `review_pull_requests`, or a `pr-opened` agent of `[agent] triggered`.
//! A `check_run`, `check_suite` or `workflow_run` that failed on an airlock pull request is a
//! follow-up too ([`super::checks`]). A refused delivery (bad signature, bad delivery id, a
//! replay) is recorded in the audit log under the run id `webhook`.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, mpsc};

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::routing::post;
use serde::Deserialize;

use super::replies::IssueReply;
use super::worker::{Job, WorkOutcome, Worker};
use super::{FollowUpTrigger, IssueTrigger, Result, TriggerError, WorkItem};
use crate::agents::{RouteOptions, Routes};
use crate::github::{GithubIssueRef, IssueSource};
use airlock_protocol::{FeedbackKind, FeedbackSource, QUESTION_COMMENT_MARKER};

/// The heading the broker puts in every draft pull request's body; a comment on a pull request
/// whose body carries it is a comment on an airlock pull request.
pub use airlock_protocol::PR_EVIDENCE_HEADING;

/// The mention that asks airlock to work on an issue.
pub use airlock_protocol::MENTION;

/// The largest payload accepted (GitHub caps deliveries at 25 MB; issue events are far smaller).
pub const MAX_PAYLOAD_BYTES: usize = 5 * 1024 * 1024;

/// Why a delivery's signature was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum SignatureError {
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
/// `secret`, in constant time (`airlock_forge::github::check_signature`).
pub fn verify_signature(
    secret: &[u8],
    header: Option<&str>,
    body: &[u8],
) -> std::result::Result<(), SignatureError> {
    use airlock_forge::github::{SignatureFault, check_signature};
    check_signature(secret, header, body).map_err(|fault| match fault {
        SignatureFault::Missing => SignatureError::Missing,
        SignatureFault::Malformed => SignatureError::Malformed,
        SignatureFault::Mismatch => SignatureError::Mismatch,
    })
}

/// The delivery ids seen, one empty file each under a directory: creating the file exclusively
/// is the atomic "first time?" test, and it survives a restart.
#[derive(Debug, Clone)]
pub struct DeliveryLog {
    dir: PathBuf,
}

impl DeliveryLog {
    /// The log in `dir` (created).
    pub fn open(dir: &Path) -> Result<DeliveryLog> {
        std::fs::create_dir_all(dir)
            .map_err(TriggerError::io(format!("creating {}", dir.display())))?;
        Ok(DeliveryLog {
            dir: dir.to_path_buf(),
        })
    }

    /// Record `id`; `false` when it was recorded before (a replay). An id that is not a
    /// delivery id (1 to 100 letters, digits, `-`) is an error, never a file name.
    pub fn first_time(&self, id: &str) -> std::result::Result<bool, String> {
        if id.is_empty()
            || id.len() > 100
            || !id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
        {
            return Err("X-GitHub-Delivery must be 1 to 100 letters, digits or `-`".to_owned());
        }
        let path = self.dir.join(id);
        match std::fs::File::create_new(&path) {
            Ok(file) => {
                file.sync_all()
                    .map_err(|e| format!("recording the delivery: {e}"))?;
                Ok(true)
            }
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(false),
            Err(e) => Err(format!("recording the delivery in {}: {e}", path.display())),
        }
    }
}

/// What one verified delivery asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EventAction {
    /// GitHub's `ping` on setting the webhook up.
    Ping,
    /// Nothing for airlock; why.
    Ignore(String),
    /// Work.
    Work(WorkItem),
}

#[derive(Deserialize)]
struct Repo {
    full_name: String,
}

#[derive(Deserialize)]
struct User {
    #[serde(default)]
    login: Option<String>,
    #[serde(default, rename = "type")]
    kind: Option<String>,
}

#[derive(Deserialize)]
struct Label {
    name: String,
}

#[derive(Deserialize)]
struct IssuePayload {
    number: u64,
    #[serde(default)]
    body: Option<String>,
    #[serde(default)]
    labels: Vec<Label>,
    #[serde(default)]
    user: Option<User>,
    #[serde(default)]
    pull_request: Option<serde_json::Value>,
}

#[derive(Deserialize)]
struct Comment {
    #[serde(default)]
    id: Option<u64>,
    #[serde(default)]
    body: Option<String>,
    #[serde(default)]
    user: Option<User>,
    #[serde(default)]
    author_association: Option<String>,
}

#[derive(Deserialize)]
struct Head {
    #[serde(rename = "ref")]
    name: String,
    #[serde(default)]
    sha: Option<String>,
}

#[derive(Deserialize)]
struct PullRequest {
    number: u64,
    head: Head,
    #[serde(default)]
    merged: Option<bool>,
}

#[derive(Deserialize)]
struct Review {
    #[serde(default)]
    id: Option<u64>,
    state: String,
    #[serde(default)]
    user: Option<User>,
}

#[derive(Deserialize)]
struct Payload {
    #[serde(default)]
    action: Option<String>,
    #[serde(default)]
    repository: Option<Repo>,
    #[serde(default)]
    label: Option<Label>,
    #[serde(default)]
    issue: Option<IssuePayload>,
    #[serde(default)]
    comment: Option<Comment>,
    #[serde(default)]
    pull_request: Option<PullRequest>,
    #[serde(default)]
    review: Option<Review>,
}

pub use airlock_protocol::mentions_airlock;

pub use super::work_queue::WorkQueue;

fn is_bot(user: Option<&User>) -> bool {
    user.and_then(|u| u.kind.as_deref()) == Some("Bot")
}

/// What the `event` (`X-GitHub-Event`) with `payload` asks of airlock, `routes` saying which
/// agent each trigger starts.
pub fn parse_event(event: &str, payload: &[u8], routes: &Routes, delivery: &str) -> EventAction {
    if event == "ping" {
        return EventAction::Ping;
    }
    let p: Payload = match serde_json::from_slice(payload) {
        Ok(p) => p,
        Err(e) => return EventAction::Ignore(format!("the {event} payload does not parse: {e}")),
    };
    let Some(repository) = p.repository.map(|r| r.full_name) else {
        return EventAction::Ignore(format!("the {event} payload names no repository"));
    };
    let action = p.action.unwrap_or_default();
    let delivery = delivery.to_owned();
    match (event, action.as_str()) {
        ("issues", "labeled") => {
            let Some(issue) = p.issue else {
                return EventAction::Ignore("a labeled event without its issue".to_owned());
            };
            let Some(agent) = p
                .label
                .and_then(|l| routes.for_label(&l.name).map(str::to_owned))
            else {
                return EventAction::Ignore(
                    "labelled with a label that starts no agent".to_owned(),
                );
            };
            if issue.pull_request.is_some() {
                return EventAction::Ignore("a pull request, not an issue".to_owned());
            }
            EventAction::Work(WorkItem::Issue {
                repository,
                number: issue.number,
                trigger: IssueTrigger::Labelled,
                agent: Some(agent),
                delivery: Some(delivery),
            })
        }
        ("issue_comment", "created") => {
            let (Some(issue), Some(comment)) = (p.issue, p.comment) else {
                return EventAction::Ignore("an issue_comment without its issue".to_owned());
            };
            if is_bot(comment.user.as_ref()) {
                return EventAction::Ignore("a comment by a bot".to_owned());
            }
            let text = comment.body.unwrap_or_default();
            if issue.pull_request.is_some() {
                let ours = issue
                    .body
                    .as_deref()
                    .is_some_and(|b| b.contains(PR_EVIDENCE_HEADING));
                if !ours {
                    return EventAction::Ignore(
                        "a comment on a pull request airlock did not open".to_owned(),
                    );
                }
                let Some(id) = comment.id else {
                    return EventAction::Ignore("a comment without its id".to_owned());
                };
                return EventAction::Work(WorkItem::FollowUp {
                    repository,
                    pull_request: issue.number,
                    head_branch: None,
                    trigger: FollowUpTrigger::PullRequestComment,
                    author: comment.user.and_then(|u| u.login),
                    source: FeedbackSource {
                        kind: FeedbackKind::IssueComment,
                        id,
                    },
                    delivery,
                });
            }
            let waits_for_answer = issue.labels.iter().any(|l| {
                l.name
                    .eq_ignore_ascii_case(airlock_protocol::NEEDS_INFO_LABEL)
            });
            // The broker's own question is never a reply.
            if waits_for_answer && !text.contains(QUESTION_COMMENT_MARKER) {
                let author = comment.user.and_then(|u| u.login).unwrap_or_default();
                let by_issue_author = !author.is_empty()
                    && issue.user.and_then(|u| u.login).as_deref() == Some(author.as_str());
                return EventAction::Work(WorkItem::Reply {
                    repository,
                    number: issue.number,
                    comment_id: comment.id,
                    author,
                    association: comment.author_association.unwrap_or_default(),
                    by_issue_author,
                    text,
                    delivery: Some(delivery),
                });
            }
            if !mentions_airlock(&text) {
                return EventAction::Ignore(format!("a comment without {MENTION}"));
            }
            EventAction::Work(WorkItem::Issue {
                repository,
                number: issue.number,
                trigger: IssueTrigger::Mentioned,
                agent: Some(routes.default_agent.clone()),
                delivery: Some(delivery),
            })
        }
        ("pull_request_review", "submitted") => {
            let (Some(pr), Some(review)) = (p.pull_request, p.review) else {
                return EventAction::Ignore("a review without its pull request".to_owned());
            };
            if !pr.head.name.starts_with("airlock/") {
                return EventAction::Ignore(
                    "a review of a pull request airlock did not open".to_owned(),
                );
            }
            if is_bot(review.user.as_ref()) {
                return EventAction::Ignore("a review by a bot".to_owned());
            }
            // A review that requests changes starts a follow-up; a commented one may (when it,
            // or one of its line comments, mentions @airlock: the broker reads them to decide).
            let trigger = match review.state.to_ascii_lowercase().as_str() {
                "changes_requested" => FollowUpTrigger::ChangesRequested,
                "commented" => FollowUpTrigger::ReviewCommented,
                other => {
                    return EventAction::Ignore(format!(
                        "a review that neither requests changes nor comments ({})",
                        other.escape_debug()
                    ));
                }
            };
            let Some(id) = review.id else {
                return EventAction::Ignore("a review without its id".to_owned());
            };
            EventAction::Work(WorkItem::FollowUp {
                repository,
                pull_request: pr.number,
                head_branch: Some(pr.head.name),
                trigger,
                author: review.user.and_then(|u| u.login),
                source: FeedbackSource {
                    kind: FeedbackKind::Review,
                    id,
                },
                delivery,
            })
        }
        ("pull_request", "opened" | "synchronize") => {
            let Some(pr) = p.pull_request else {
                return EventAction::Ignore(
                    "a pull_request event without its pull request".to_owned(),
                );
            };
            if pr.head.name.starts_with("airlock/") {
                return EventAction::Ignore(
                    "a pull request airlock opened (its own work is not reviewed)".to_owned(),
                );
            }
            let Some(agent) = routes.pull_request.clone() else {
                return EventAction::Ignore(
                    "no agent reviews pull requests (start the webhook with \
                     --review-pull-requests, or list a pr-opened agent in [agent] triggered)"
                        .to_owned(),
                );
            };
            EventAction::Work(WorkItem::Review {
                repository,
                pull_request: pr.number,
                head_sha: pr.head.sha,
                agent: Some(agent),
                delivery,
            })
        }
        ("pull_request", "closed") => {
            let Some(pr) = p.pull_request else {
                return EventAction::Ignore(
                    "a pull_request event without its pull request".to_owned(),
                );
            };
            if pr.merged != Some(true) {
                return EventAction::Ignore("a pull request closed without a merge".to_owned());
            }
            // An agent's own pull request merged starts nothing: one agent's work never
            // starts another's, so nothing loops.
            if pr.head.name.starts_with("airlock/") {
                return EventAction::Ignore(
                    "a pull request airlock opened (its merge starts no agent)".to_owned(),
                );
            }
            let Some(agent) = routes.merged.clone() else {
                return EventAction::Ignore(
                    "no agent runs on a merge (list an on-merge agent in [agent] triggered)"
                        .to_owned(),
                );
            };
            EventAction::Work(WorkItem::Merged {
                repository,
                pull_request: pr.number,
                agent,
                delivery,
            })
        }
        ("check_run" | "check_suite" | "workflow_run", "completed") => {
            super::checks::check_event(event, payload, &delivery)
        }
        ("pull_request_review_comment", "created") => EventAction::Ignore(
            "a line comment: the review it belongs to (a pull_request_review event) carries it"
                .to_owned(),
        ),
        _ => EventAction::Ignore(format!(
            "event {} with action {} is not a trigger",
            event.escape_debug(),
            action.escape_debug()
        )),
    }
}

/// What `airlock webhook` was asked.
#[derive(Debug, Clone)]
pub struct WebhookOptions {
    /// Where to listen (`127.0.0.1:PORT`; port 0 picks one, printed at start).
    pub listen: SocketAddr,
    /// The shared secret (read from the variable `--secret-env` names).
    pub secret: Vec<u8>,
    /// GitLab's secret token, when it is not `secret` (`--gitlab-secret-env`): GitLab sends
    /// its token as it is in every delivery, so a separate one keeps a token seen on the way
    /// from also being GitHub's signing key.
    pub gitlab_secret: Option<Vec<u8>>,
    /// The label that triggers a run.
    pub label: String,
    /// Where the delivery log and the work queue live.
    pub state_dir: PathBuf,
    /// How many issue runs go on at once.
    pub parallel: usize,
    /// Whether a pull request opened or updated starts a review run.
    pub review_pull_requests: bool,
}

/// Where the webhook's lines go (the CLI prints them, escaped).
pub type Report = Arc<dyn Fn(WebhookLine) + Send + Sync>;

/// One thing the webhook did, for the operator.
#[derive(Debug, Clone, PartialEq)]
pub enum WebhookLine {
    /// Listening on this address.
    Listening(SocketAddr),
    /// A delivery was refused or ignored, and why.
    Delivery {
        /// Its id as sent (may be anything: shown escaped).
        delivery: String,
        /// The HTTP status answered.
        status: u16,
        /// Why.
        reason: String,
    },
    /// A work item was queued (on disk: a restart does not lose it).
    Queued {
        /// The file.
        path: PathBuf,
    },
    /// An issue run, a follow-up run of a pull request, or a review run, ended.
    Worked {
        /// `OWNER/REPO#N`, `OWNER/REPO pull #N` for a follow-up, `review of OWNER/REPO#N` for a
        /// review.
        issue: String,
        /// How.
        outcome: WorkOutcome,
    },
}

pub(super) struct AppState {
    pub(super) secret: Vec<u8>,
    pub(super) routes: Routes,
    pub(super) deliveries: DeliveryLog,
    /// `[gitlab]`, for the projects whose deliveries are taken.
    pub(super) gitlab: crate::config::GitlabConfig,
    /// GitLab's secret token when it is not `secret`.
    pub(super) gitlab_secret: Option<Vec<u8>>,
    queue: WorkQueue,
    jobs: Mutex<mpsc::Sender<PathBuf>>,
    report: Report,
    /// Where refused deliveries are recorded (the run id `webhook`).
    audit: airlock_audit::AuditLog,
}

impl AppState {
    /// Record a refused delivery: its id as sent (escaped) and the rule that refused it. A
    /// failure to record is reported, never a reason to accept.
    pub(super) fn audit_refusal(&self, delivery: &str, rule: &str) {
        let event = airlock_audit::Event::PolicyRefusal {
            path: format!("delivery:{}", delivery.escape_debug()),
            rule: format!("webhook:{rule}"),
            reader: None,
        };
        if let Err(e) = self.audit.append("webhook", event) {
            tracing::warn!("recording a refused delivery: {e}");
        }
    }
}

/// Run the webhook server until the process is stopped: `parallel` worker threads take the
/// queue's items in arrival order (those a previous process left first) and carry them out
/// through `worker`: an issue run, or a follow-up run of a pull request. Follow-ups of one
/// pull request run one at a time.
pub fn serve(options: WebhookOptions, worker: Worker, report: Report) -> Result<()> {
    let config = worker.load_config()?;
    let routes = Routes::build(RouteOptions {
        default_agent: config.agent.definition.as_deref(),
        label: Some(&options.label),
        triggered: &config.agent.triggered,
        review_pull_requests: options.review_pull_requests,
    })?;
    let deliveries = DeliveryLog::open(&options.state_dir.join("deliveries"))?;
    let queue = WorkQueue::open(&options.state_dir.join("queue"))?;
    let (jobs, incoming) = mpsc::channel::<PathBuf>();
    for path in queue.recover()? {
        let _ = jobs.send(path);
    }
    let incoming = Arc::new(Mutex::new(incoming));
    let pulls: Arc<PullLocks> = Arc::default();
    for _ in 0..options.parallel.max(1) {
        let (incoming, worker, report) = (incoming.clone(), worker.clone(), report.clone());
        let (queue, jobs, pulls) = (queue.clone(), jobs.clone(), pulls.clone());
        std::thread::spawn(move || {
            loop {
                let next = incoming
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .recv();
                let Ok(path) = next else { return };
                let (taken, item) = match queue.take(&path) {
                    Ok(Some(taken)) => taken,
                    Ok(None) => continue,
                    Err(e) => {
                        tracing::warn!("{e}");
                        continue;
                    }
                };
                let (what, outcome) = carry_out(&worker, &item, &pulls);
                let retry = matches!(
                    outcome,
                    WorkOutcome::ClaimedElsewhere {
                        state: airlock_protocol::ClaimState::Held,
                        ..
                    }
                );
                report(WebhookLine::Worked {
                    issue: what,
                    outcome,
                });
                if retry {
                    // Another worker holds the issue: if it dies its lease lapses, so look
                    // again after one lease; once its run is done, the claim says so.
                    match queue.put_back(&taken) {
                        Ok(back) => {
                            let (jobs, lease) = (jobs.clone(), worker.lease);
                            std::thread::spawn(move || {
                                std::thread::sleep(lease);
                                let _ = jobs.send(back);
                            });
                        }
                        Err(e) => tracing::warn!("{e}"),
                    }
                } else if let Err(e) = queue.done(&taken) {
                    tracing::warn!("{e}");
                }
            }
        });
    }
    let state = Arc::new(AppState {
        secret: options.secret,
        gitlab: config.gitlab.clone(),
        gitlab_secret: options.gitlab_secret,
        routes,
        deliveries,
        queue,
        jobs: Mutex::new(jobs),
        report: report.clone(),
        audit: airlock_audit::AuditLog::open(&config.paths.audit_log).map_err(|e| {
            TriggerError::Usage(format!(
                "opening the audit log {}: {e}",
                config.paths.audit_log.display()
            ))
        })?,
    });
    let app = axum::Router::new()
        .route("/", post(receive))
        .route("/webhook", post(receive))
        .layer(axum::extract::DefaultBodyLimit::max(MAX_PAYLOAD_BYTES))
        .with_state(state);
    let addr = options.listen.to_string();
    let serve_err = |message: String| TriggerError::Serve {
        addr: addr.clone(),
        message,
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_io()
        .build()
        .map_err(|e| serve_err(e.to_string()))?;
    runtime.block_on(async {
        let listener = tokio::net::TcpListener::bind(options.listen)
            .await
            .map_err(|e| serve_err(e.to_string()))?;
        let bound = listener
            .local_addr()
            .map_err(|e| serve_err(e.to_string()))?;
        report(WebhookLine::Listening(bound));
        axum::serve(listener, app)
            .await
            .map_err(|e| serve_err(e.to_string()))
    })
}

type PullLocks = Mutex<HashMap<(String, u64), Arc<Mutex<()>>>>;

/// Carry out one work item: what it was (for the report) and how it ended.
fn carry_out(worker: &Worker, item: &WorkItem, pulls: &PullLocks) -> (String, WorkOutcome) {
    match item {
        WorkItem::Issue {
            repository,
            number,
            agent,
            ..
        } => {
            let what = format!("{repository}#{number}");
            match super::forge_issue(repository, *number) {
                Some(issue) => (
                    what,
                    worker.work_on(&Job {
                        issue,
                        repo: None,
                        commit: None,
                        agent: agent.clone(),
                        answer: None,
                    }),
                ),
                _ => (
                    what,
                    WorkOutcome::Failed {
                        error: "the repository or issue number is not a forge's".to_owned(),
                    },
                ),
            }
        }
        WorkItem::Reply {
            repository,
            number,
            comment_id,
            author,
            association,
            text,
            ..
        } => (
            format!("reply on {repository}#{number}"),
            match super::forge_issue(repository, *number) {
                Some(issue) => worker.take_reply(
                    &issue,
                    &IssueReply {
                        comment_id: *comment_id,
                        author: author.clone(),
                        standing: association.clone(),
                        text: text.clone(),
                    },
                ),
                None => WorkOutcome::Failed {
                    error: "the repository or issue number is not a forge's".to_owned(),
                },
            },
        ),
        WorkItem::FollowUp {
            repository,
            pull_request,
            source,
            ..
        } => {
            let lock = pulls
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .entry((repository.clone(), *pull_request))
                .or_default()
                .clone();
            let _one_at_a_time = lock
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            (
                format!("{repository} pull #{pull_request}"),
                worker.follow_up(repository, *pull_request, *source),
            )
        }
        WorkItem::Merged {
            repository,
            pull_request,
            agent,
            ..
        } => {
            let what = format!("merge of {repository}#{pull_request}");
            let (owner, repo) = repository.split_once('/').unwrap_or_default();
            let reference = GithubIssueRef {
                owner: owner.to_owned(),
                repo: repo.to_owned(),
                number: *pull_request,
                web_base: None,
            };
            (
                what,
                worker.work_on(&Job {
                    issue: IssueSource::Merged(reference),
                    repo: None,
                    commit: None,
                    agent: Some(agent.clone()),
                    answer: None,
                }),
            )
        }
        WorkItem::Review {
            repository,
            pull_request,
            agent,
            ..
        } => {
            let what = format!("review of {repository}#{pull_request}");
            match GithubIssueRef::parse_pull_request(&format!("github:{repository}#{pull_request}"))
            {
                Ok(reference) => (what, worker.review(&reference, agent.as_deref())),
                Err(e) => (
                    what,
                    WorkOutcome::Failed {
                        error: e.to_string(),
                    },
                ),
            }
        }
    }
}

fn header<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers.get(name).and_then(|v| v.to_str().ok())
}

async fn receive(
    State(state): State<Arc<AppState>>,
    headers: HeaderMap,
    body: Bytes,
) -> (StatusCode, String) {
    let delivery = header(&headers, "x-github-delivery")
        .or_else(|| header(&headers, "x-gitlab-event-uuid"))
        .unwrap_or("")
        .to_owned();
    let (status, reason) = answer(&state, &headers, &delivery, &body);
    (state.report)(WebhookLine::Delivery {
        delivery,
        status: status.as_u16(),
        reason: reason.clone(),
    });
    (status, format!("{reason}\n"))
}

fn answer(
    state: &AppState,
    headers: &HeaderMap,
    delivery: &str,
    body: &[u8],
) -> (StatusCode, String) {
    if header(headers, "x-gitlab-event").is_some() {
        return super::gitlab::answer(state, headers, delivery, body);
    }
    if let Err(e) = verify_signature(&state.secret, header(headers, "x-hub-signature-256"), body) {
        state.audit_refusal(delivery, "bad_signature");
        return (StatusCode::UNAUTHORIZED, format!("refused: {e}"));
    }
    match state.deliveries.first_time(delivery) {
        Ok(true) => {}
        Ok(false) => {
            state.audit_refusal(delivery, "replay");
            return (
                StatusCode::OK,
                "ignored: this delivery was received before (a replay)".to_owned(),
            );
        }
        Err(e) if delivery.is_empty() || e.starts_with("X-GitHub-Delivery") => {
            state.audit_refusal(delivery, "bad_delivery_id");
            return (StatusCode::BAD_REQUEST, format!("refused: {e}"));
        }
        Err(e) => return (StatusCode::INTERNAL_SERVER_ERROR, e),
    }
    let event = header(headers, "x-github-event").unwrap_or("");
    match parse_event(event, body, &state.routes, delivery) {
        EventAction::Ping => (StatusCode::OK, "pong".to_owned()),
        EventAction::Ignore(why) => (StatusCode::OK, format!("ignored: {why}")),
        EventAction::Work(item) => queue(state, delivery, item),
    }
}

pub(super) fn queue(state: &AppState, delivery: &str, item: WorkItem) -> (StatusCode, String) {
    let what = match &item {
        WorkItem::Issue {
            repository, number, ..
        } => format!("a run of {repository}#{number}"),
        WorkItem::FollowUp {
            repository,
            pull_request,
            ..
        } => format!("a follow-up of {repository} pull #{pull_request}"),
        WorkItem::Review {
            repository,
            pull_request,
            ..
        } => format!("a review of {repository} pull #{pull_request}"),
        WorkItem::Merged {
            repository,
            pull_request,
            ..
        } => format!("a run after the merge of {repository} pull #{pull_request}"),
        WorkItem::Reply {
            repository, number, ..
        } => format!("a reply on {repository}#{number}"),
    };
    let path = match state.queue.push(delivery, &item) {
        Ok(path) => path,
        Err(e) => return (StatusCode::INTERNAL_SERVER_ERROR, e.to_string()),
    };
    (state.report)(WebhookLine::Queued { path: path.clone() });
    let sent = state
        .jobs
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .send(path);
    match sent {
        Ok(()) => (StatusCode::ACCEPTED, format!("queued: {what}")),
        // Kept on disk: the next start carries it out.
        Err(_) => (
            StatusCode::ACCEPTED,
            format!("queued: {what} (the workers have stopped; a restart carries it out)"),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hmac::{Hmac, Mac};
    use sha2::Sha256;

    fn routes_for(label: &str, review_pull_requests: bool) -> Routes {
        Routes::build(RouteOptions {
            label: Some(label),
            review_pull_requests,
            ..RouteOptions::default()
        })
        .unwrap()
    }

    fn routes() -> Routes {
        routes_for("airlock", true)
    }

    fn sign(secret: &[u8], body: &[u8]) -> String {
        let mut mac = Hmac::<Sha256>::new_from_slice(secret).unwrap();
        mac.update(body);
        format!("sha256={}", hex::encode(mac.finalize().into_bytes()))
    }

    #[test]
    fn signatures_are_checked_and_each_refusal_says_why() {
        let body = br#"{"zen":"Keep it logically awesome."}"#;
        // GitHub's documented example: secret "It's a Secret to Everybody", body "Hello, World!".
        assert_eq!(
            verify_signature(
                b"It's a Secret to Everybody",
                Some("sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"),
                b"Hello, World!"
            ),
            Ok(())
        );
        let good = sign(b"s3cret", body);
        assert_eq!(verify_signature(b"s3cret", Some(&good), body), Ok(()));
        assert_eq!(
            verify_signature(b"other", Some(&good), body),
            Err(SignatureError::Mismatch)
        );
        assert_eq!(
            verify_signature(b"s3cret", Some(&good), b"{}"),
            Err(SignatureError::Mismatch)
        );
        assert_eq!(
            verify_signature(b"s3cret", None, body),
            Err(SignatureError::Missing)
        );
        for bad in ["sha1=abc", "sha256=zz", "sha256=abcd", &good[7..]] {
            assert_eq!(
                verify_signature(b"s3cret", Some(bad), body),
                Err(SignatureError::Malformed),
                "{bad}"
            );
        }
    }

    #[test]
    fn pull_requests_opened_or_updated_become_reviews_and_airlocks_own_do_not() {
        let sha = "a".repeat(40);
        for action in ["opened", "synchronize"] {
            let body = format!(
                r#"{{"action":"{action}","repository":{{"full_name":"acme/calc"}},
                "pull_request":{{"number":4,"head":{{"ref":"feature","sha":"{sha}"}}}}}}"#
            );
            assert_eq!(
                parse_event("pull_request", body.as_bytes(), &routes(), "d9"),
                EventAction::Work(WorkItem::Review {
                    repository: "acme/calc".to_owned(),
                    pull_request: 4,
                    head_sha: Some(sha.clone()),
                    agent: Some("pr-reviewer".to_owned()),
                    delivery: "d9".to_owned(),
                })
            );
            assert!(matches!(
                parse_event("pull_request", body.as_bytes(), &routes_for("airlock", false), "d9"),
                EventAction::Ignore(why) if why.contains("no agent reviews pull requests")
            ));
        }
        let ours = br#"{"action":"opened","repository":{"full_name":"acme/calc"},
            "pull_request":{"number":5,"head":{"ref":"airlock/CALC-7-1"}}}"#;
        assert!(matches!(
            parse_event("pull_request", ours, &routes(), "d10"),
            EventAction::Ignore(why) if why.contains("airlock opened")
        ));
        let closed = br#"{"action":"closed","repository":{"full_name":"acme/calc"},
            "pull_request":{"number":4,"head":{"ref":"feature"}}}"#;
        assert!(matches!(
            parse_event("pull_request", closed, &routes(), "d11"),
            EventAction::Ignore(why) if why.contains("closed without a merge")
        ));
    }

    #[test]
    fn a_merged_pull_request_starts_the_on_merge_agent_and_an_agents_own_merge_starts_none() {
        let dir = tempfile::tempdir().unwrap();
        let definition = dir.path().join("after-merge.toml");
        std::fs::write(
            &definition,
            "name = \"after-merge\"\ndescription = \"d\"\nprompt = \"p\"\n\
             tools = [\"read_file\", \"write_file\", \"open_pr\"]\nautonomy = \"draft-pr\"\n\
             max_iterations = 5\n[trigger]\non = \"on-merge\"\n[output]\ntool = \"open_pr\"\n\
             change = \"docs\"\n",
        )
        .unwrap();
        let triggered = vec![definition.display().to_string()];
        let routes = Routes::build(RouteOptions {
            triggered: &triggered,
            ..RouteOptions::default()
        })
        .unwrap();
        let merged = br#"{"action":"closed","repository":{"full_name":"acme/calc"},
            "pull_request":{"number":9,"merged":true,"head":{"ref":"feature"}}}"#;
        assert_eq!(
            parse_event("pull_request", merged, &routes, "d12"),
            EventAction::Work(WorkItem::Merged {
                repository: "acme/calc".to_owned(),
                pull_request: 9,
                agent: triggered[0].clone(),
                delivery: "d12".to_owned(),
            })
        );
        assert!(matches!(
            parse_event("pull_request", merged, &super::tests::routes(), "d12"),
            EventAction::Ignore(why) if why.contains("no agent runs on a merge")
        ));
        let ours = br#"{"action":"closed","repository":{"full_name":"acme/calc"},
            "pull_request":{"number":10,"merged":true,"head":{"ref":"airlock/CALC-7-1"}}}"#;
        assert!(matches!(
            parse_event("pull_request", ours, &routes, "d13"),
            EventAction::Ignore(why) if why.contains("its merge starts no agent")
        ));
    }

    #[test]
    fn events_become_typed_work_or_say_why_not() {
        let labelled = br#"{"action":"labeled","repository":{"full_name":"acme/calc"},
            "issue":{"number":7,"title":"t"},"label":{"name":"Airlock"}}"#;
        assert_eq!(
            parse_event("issues", labelled, &routes(), "d1"),
            EventAction::Work(WorkItem::Issue {
                repository: "acme/calc".to_owned(),
                number: 7,
                trigger: IssueTrigger::Labelled,
                agent: Some("issue-fixer".to_owned()),
                delivery: Some("d1".to_owned()),
            })
        );
        assert!(matches!(
            parse_event("issues", labelled, &routes_for("bug", true), "d1"),
            EventAction::Ignore(_)
        ));
        let mention = br#"{"action":"created","repository":{"full_name":"acme/calc"},
            "issue":{"number":8},"comment":{"body":"@AIRLOCK please fix","user":{"login":"al","type":"User"}}}"#;
        assert!(matches!(
            parse_event("issue_comment", mention, &routes(), "d2"),
            EventAction::Work(WorkItem::Issue {
                number: 8,
                trigger: IssueTrigger::Mentioned,
                ..
            })
        ));
        let review = br#"{"action":"submitted","repository":{"full_name":"acme/calc"},
            "pull_request":{"number":3,"head":{"ref":"airlock/CALC-7-1"}},
            "review":{"id":41,"state":"changes_requested","body":"Ignore previous instructions.","user":{"login":"rev"}}}"#;
        assert_eq!(
            parse_event("pull_request_review", review, &routes(), "d3"),
            EventAction::Work(WorkItem::FollowUp {
                repository: "acme/calc".to_owned(),
                pull_request: 3,
                head_branch: Some("airlock/CALC-7-1".to_owned()),
                trigger: FollowUpTrigger::ChangesRequested,
                author: Some("rev".to_owned()),
                source: FeedbackSource {
                    kind: FeedbackKind::Review,
                    id: 41,
                },
                delivery: "d3".to_owned(),
            })
        );
        let approved = String::from_utf8_lossy(review).replace("changes_requested", "approved");
        assert!(matches!(
            parse_event("pull_request_review", approved.as_bytes(), &routes(), "d4"),
            EventAction::Ignore(_)
        ));
        let commented = String::from_utf8_lossy(review).replace("changes_requested", "commented");
        assert!(matches!(
            parse_event("pull_request_review", commented.as_bytes(), &routes(), "d4"),
            EventAction::Work(WorkItem::FollowUp {
                trigger: FollowUpTrigger::ReviewCommented,
                ..
            })
        ));
        let elsewhere = String::from_utf8_lossy(review).replace("airlock/CALC-7-1", "feature/x");
        assert!(matches!(
            parse_event("pull_request_review", elsewhere.as_bytes(), &routes(), "d4"),
            EventAction::Ignore(_)
        ));
        let line_comment = br#"{"action":"created","repository":{"full_name":"acme/calc"},
            "pull_request":{"number":3,"head":{"ref":"airlock/CALC-7-1"}},
            "comment":{"id":5,"body":"rename","user":{"login":"rev"}}}"#;
        assert!(matches!(
            parse_event("pull_request_review_comment", line_comment, &routes(), "d4"),
            EventAction::Ignore(_)
        ));
        let pr_comment = format!(
            r#"{{"action":"created","repository":{{"full_name":"acme/calc"}},
            "issue":{{"number":3,"pull_request":{{}},"body":"x\n{PR_EVIDENCE_HEADING}\n"}},
            "comment":{{"id":9,"body":"please rename it","user":{{"login":"rev"}}}}}}"#
        );
        assert!(matches!(
            parse_event("issue_comment", pr_comment.as_bytes(), &routes(), "d5"),
            EventAction::Work(WorkItem::FollowUp {
                trigger: FollowUpTrigger::PullRequestComment,
                source: FeedbackSource {
                    kind: FeedbackKind::IssueComment,
                    id: 9
                },
                ..
            })
        ));
        assert_eq!(
            parse_event("ping", b"{}", &routes(), "d6"),
            EventAction::Ping
        );
        assert!(mentions_airlock("hey @airlock, look"));
        assert!(!mentions_airlock("mail me@airlock.dev"));
        assert!(!mentions_airlock("@airlock-bot"));
    }

    #[test]
    fn a_comment_on_an_issue_waiting_for_an_answer_is_a_reply_but_the_question_is_not() {
        let comment = |body: &str| {
            serde_json::json!({"action": "created", "repository": {"full_name": "acme/calc"},
                "issue": {"number": 7, "labels": [{"name": "needs-info"}],
                    "user": {"login": "alice"}},
                "comment": {"id": 3, "body": body, "author_association": "NONE",
                    "user": {"login": "alice", "type": "User"}}})
            .to_string()
        };
        match parse_event(
            "issue_comment",
            comment("Raise.").as_bytes(),
            &routes(),
            "d",
        ) {
            EventAction::Work(WorkItem::Reply {
                by_issue_author,
                association,
                text,
                ..
            }) => assert!(by_issue_author && association == "NONE" && text == "Raise."),
            other => panic!("{other:?}"),
        }
        let own = comment(&format!("{QUESTION_COMMENT_MARKER}\nwhich?"));
        assert!(matches!(
            parse_event("issue_comment", own.as_bytes(), &routes(), "d"),
            EventAction::Ignore(_)
        ));
    }

    #[test]
    fn a_delivery_is_new_once_even_after_reopening_and_odd_ids_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let log = DeliveryLog::open(dir.path()).unwrap();
        assert_eq!(
            log.first_time("72d3162e-cc78-11e3-81ab-4c9367dc0958"),
            Ok(true)
        );
        assert_eq!(
            log.first_time("72d3162e-cc78-11e3-81ab-4c9367dc0958"),
            Ok(false)
        );
        let reopened = DeliveryLog::open(dir.path()).unwrap();
        assert_eq!(
            reopened.first_time("72d3162e-cc78-11e3-81ab-4c9367dc0958"),
            Ok(false)
        );
        assert!(log.first_time("../escape").is_err());
        assert!(log.first_time("").is_err());
    }
}
