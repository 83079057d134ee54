//! GitLab's webhook deliveries, for `airlock webhook` (which tells them from GitHub's by their
//! `X-Gitlab-Event` header).
//!
//! Order, for every delivery: the `X-Gitlab-Token` is compared with the shared secret in
//! constant time (`airlock_forge::gitlab::verify_delivery`), and a missing or wrong one is
//! refused with 401; the `X-Gitlab-Event-UUID` is recorded in the same delivery log as
//! GitHub's ids, so a replay is ignored across restarts too (a delivery without one is refused,
//! since it could not be told from its replay); only then is the payload parsed, and one about
//! a project not listed in `[gitlab] projects` is refused with 403. What is left becomes the
//! same typed work GitHub's events become, for the same handling: an `Issue Hook` that adds a
//! label that starts an agent is an issue run; a `Note Hook` on an issue waiting for an answer
//! (`needs-info`) is a reply, one mentioning `@airlock` an issue run, and one on a merge request
//! airlock opened (its source branch `airlock/...`) a follow-up, which the broker reads from
//! GitLab before believing; so is a failed `Pipeline Hook` of such a merge request (its first
//! failed job not allowed to fail). A note on a merge request airlock did not open is ignored
//! and recorded. GitLab repositories are named `gitlab:GROUP/NAME` in the work items.

use axum::http::{HeaderMap, StatusCode};
use serde::Deserialize;

use super::webhook::{AppState, EventAction};
use super::{FollowUpTrigger, IssueTrigger, WorkItem};
use crate::agents::Routes;
use crate::config::GitlabConfig;
use airlock_forge::WebhookDelivery;
use airlock_protocol::{
    FeedbackKind, FeedbackSource, MENTION, NEEDS_INFO_LABEL, QUESTION_COMMENT_MARKER,
    mentions_airlock,
};

/// The prefix of a GitLab project's name in a work item (`gitlab:GROUP/NAME`).
pub const GITLAB_PREFIX: &str = "gitlab:";

/// Why a GitLab delivery was not taken, with the HTTP status it is answered and the rule the
/// audit log records.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    /// The HTTP status.
    pub status: u16,
    /// The audit rule (`bad_token`, `bad_delivery_id`, `unknown_project`).
    pub rule: &'static str,
    /// Why, for the sender and the operator.
    pub reason: String,
}

/// Check a delivery's token and take its id: the event name and the id, or the refusal.
pub fn verify(
    headers: &[(String, String)],
    body: &[u8],
    secret: &[u8],
) -> Result<(String, String), Refusal> {
    let secret = String::from_utf8_lossy(secret);
    let delivery = WebhookDelivery { headers, body };
    let verified =
        airlock_forge::gitlab::verify_delivery(&delivery, &secret).map_err(|e| Refusal {
            status: 401,
            rule: "bad_token",
            reason: e.to_string(),
        })?;
    let id = verified.delivery_id.unwrap_or_default();
    if id.is_empty() {
        return Err(Refusal {
            status: 400,
            rule: "bad_delivery_id",
            reason: "no X-Gitlab-Event-UUID header: a delivery without its id cannot be told \
                     from a replay (GitLab 15.x and later send one)"
                .to_owned(),
        });
    }
    Ok((verified.event, id))
}

#[derive(Deserialize)]
struct Project {
    #[serde(default)]
    id: Option<u64>,
    #[serde(default)]
    path_with_namespace: Option<String>,
}

#[derive(Deserialize)]
struct User {
    #[serde(default)]
    id: Option<u64>,
    #[serde(default)]
    username: Option<String>,
}

#[derive(Deserialize)]
struct Label {
    title: String,
}

#[derive(Deserialize, Default)]
struct LabelChange {
    #[serde(default)]
    previous: Vec<Label>,
    #[serde(default)]
    current: Vec<Label>,
}

#[derive(Deserialize, Default)]
struct Changes {
    #[serde(default)]
    labels: Option<LabelChange>,
}

#[derive(Deserialize)]
struct Attributes {
    #[serde(default)]
    iid: Option<u64>,
    #[serde(default)]
    id: Option<u64>,
    #[serde(default)]
    action: Option<String>,
    #[serde(default)]
    note: Option<String>,
    #[serde(default)]
    noteable_type: Option<String>,
    /// `DiffNote` (on a line of the diff) or `DiscussionNote` (in a thread); none for a note
    /// on its own.
    #[serde(default, rename = "type")]
    kind: Option<String>,
    #[serde(default)]
    system: Option<bool>,
    /// A pipeline's status (`success`, `failed`, ...).
    #[serde(default)]
    status: Option<String>,
}

/// One job of a pipeline, as a `Pipeline Hook` lists it.
#[derive(Deserialize)]
struct Build {
    id: u64,
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    status: Option<String>,
    #[serde(default)]
    allow_failure: bool,
}

#[derive(Deserialize)]
struct NotedIssue {
    iid: u64,
    #[serde(default)]
    author_id: Option<u64>,
    #[serde(default)]
    labels: Vec<Label>,
}

#[derive(Deserialize)]
struct NotedMergeRequest {
    iid: u64,
    source_branch: String,
}

#[derive(Deserialize)]
struct Payload {
    #[serde(default)]
    project: Option<Project>,
    #[serde(default)]
    user: Option<User>,
    #[serde(default)]
    object_attributes: Option<Attributes>,
    #[serde(default)]
    labels: Vec<Label>,
    #[serde(default)]
    changes: Option<Changes>,
    #[serde(default)]
    issue: Option<NotedIssue>,
    #[serde(default)]
    merge_request: Option<NotedMergeRequest>,
    #[serde(default)]
    builds: Vec<Build>,
}

/// Why a note on a merge request starts nothing: it is ignored, and recorded.
const FOREIGN_MERGE_REQUEST: &str = "a note on a merge request airlock did not open";

/// Answer one GitLab delivery of `airlock webhook` (`delivery`: its `X-Gitlab-Event-UUID` as
/// sent): verified, recorded, parsed, and its work queued like GitHub's. Every refusal, and a
/// note on a merge request airlock did not open, is recorded in the audit log.
pub(super) fn answer(
    state: &AppState,
    headers: &HeaderMap,
    delivery: &str,
    body: &[u8],
) -> (StatusCode, String) {
    let pairs: Vec<(String, String)> = headers
        .iter()
        .filter_map(|(k, v)| Some((k.as_str().to_owned(), v.to_str().ok()?.to_owned())))
        .collect();
    let refuse = |refusal: Refusal| {
        state.audit_refusal(delivery, &format!("gitlab_{}", refusal.rule));
        (
            StatusCode::from_u16(refusal.status).unwrap_or(StatusCode::BAD_REQUEST),
            format!("refused: {}", refusal.reason),
        )
    };
    // The id GitLab's own headers give (`X-Gitlab-Event-UUID`, else `Idempotency-Key`) is the
    // one recorded, whatever else the request carries.
    let secret = state.gitlab_secret.as_deref().unwrap_or(&state.secret);
    let (event, id) = match verify(&pairs, body, secret) {
        Ok(verified) => verified,
        Err(refusal) => return refuse(refusal),
    };
    let delivery = id.as_str();
    match state.deliveries.first_time(delivery) {
        Ok(true) => {}
        Ok(false) => {
            state.audit_refusal(delivery, "gitlab_replay");
            return (
                StatusCode::OK,
                "ignored: this delivery was received before (a replay)".to_owned(),
            );
        }
        Err(e) if e.starts_with("X-GitHub-Delivery") => {
            return refuse(Refusal {
                status: 400,
                rule: "bad_delivery_id",
                reason: "X-Gitlab-Event-UUID must be 1 to 100 letters, digits or `-`".to_owned(),
            });
        }
        Err(e) => return (StatusCode::INTERNAL_SERVER_ERROR, e),
    }
    match parse_event(&event, body, &state.routes, &state.gitlab, delivery) {
        Err(refusal) => refuse(refusal),
        Ok(EventAction::Ping) => (StatusCode::OK, "pong".to_owned()),
        Ok(EventAction::Ignore(why)) => {
            if why == FOREIGN_MERGE_REQUEST {
                state.audit_refusal(delivery, "gitlab_foreign_merge_request");
            }
            (StatusCode::OK, format!("ignored: {why}"))
        }
        Ok(EventAction::Work(item)) => super::webhook::queue(state, delivery, item),
    }
}

/// What a verified GitLab delivery of `event` with `payload` asks of airlock, `routes` saying
/// which agent a label starts; a refusal for a project `config` does not list.
pub fn parse_event(
    event: &str,
    payload: &[u8],
    routes: &Routes,
    config: &GitlabConfig,
    delivery: &str,
) -> Result<EventAction, Refusal> {
    let ignore = |why: &str| Ok(EventAction::Ignore(why.to_owned()));
    let p: Payload = match serde_json::from_slice(payload) {
        Ok(p) => p,
        Err(e) => {
            return Ok(EventAction::Ignore(format!(
                "the {} payload does not parse: {e}",
                event.escape_debug()
            )));
        }
    };
    let Some(project) = p.project else {
        return ignore("the payload names no project");
    };
    let path = project.path_with_namespace.unwrap_or_default();
    if !config.knows_project(Some(&path), project.id) {
        return Err(Refusal {
            status: 403,
            rule: "unknown_project",
            reason: format!(
                "project {:?} is not one of [gitlab] projects in airlock.toml: add it there to \
                 take its deliveries",
                path.escape_debug().to_string()
            ),
        });
    }
    if path.is_empty() {
        return ignore("the payload names its project by id only; airlock needs its path");
    }
    let repository = format!("{GITLAB_PREFIX}{path}");
    let Some(attributes) = p.object_attributes else {
        return ignore("the payload has no object_attributes");
    };
    let delivery = delivery.to_owned();
    match event {
        "Issue Hook" => {
            let Some(number) = attributes.iid else {
                return ignore("an issue event without the issue's iid");
            };
            let added: Vec<String> = match (p.changes.and_then(|c| c.labels), &attributes.action) {
                (Some(change), _) => change
                    .current
                    .into_iter()
                    .map(|l| l.title)
                    .filter(|t| !change.previous.iter().any(|p| &p.title == t))
                    .collect(),
                // An issue opened with its labels reports no change of them.
                (None, Some(action)) if action == "open" => {
                    p.labels.into_iter().map(|l| l.title).collect()
                }
                (None, _) => Vec::new(),
            };
            let Some(agent) = added
                .iter()
                .find_map(|l| routes.for_label(l).map(str::to_owned))
            else {
                return ignore("no label that starts an agent was added");
            };
            Ok(EventAction::Work(WorkItem::Issue {
                repository,
                number,
                trigger: IssueTrigger::Labelled,
                agent: Some(agent),
                delivery: Some(delivery),
            }))
        }
        // A failed pipeline of a merge request airlock opened: a follow-up on its first job
        // that failed and was not allowed to (the broker reads the job from GitLab before
        // believing it), or on the head's failed jobs when the payload lists none.
        "Pipeline Hook" => {
            let status = attributes.status.as_deref().unwrap_or("nothing");
            if status != "failed" {
                return ignore(&format!(
                    "a pipeline that is {}: only a failed one starts a follow-up",
                    status.escape_debug()
                ));
            }
            let Some(mr) = p.merge_request else {
                return ignore(
                    "a failed pipeline of no merge request (a branch pipeline): only a merge \
                     request pipeline names the merge request airlock opened; run the \
                     project's pipelines for merge requests to have its failures followed up",
                );
            };
            if !mr.source_branch.starts_with("airlock/") {
                return ignore("a failed pipeline of a merge request airlock did not open");
            }
            let job = p
                .builds
                .iter()
                .filter(|b| b.status.as_deref() == Some("failed") && !b.allow_failure)
                .min_by_key(|b| b.id);
            let source = match job {
                Some(job) => FeedbackSource {
                    kind: FeedbackKind::CheckRun,
                    id: job.id,
                },
                None => FeedbackSource {
                    kind: FeedbackKind::HeadChecks,
                    id: attributes.id.unwrap_or_default(),
                },
            };
            Ok(EventAction::Work(WorkItem::FollowUp {
                repository,
                pull_request: mr.iid,
                head_branch: Some(mr.source_branch),
                trigger: FollowUpTrigger::CheckFailed,
                author: job.and_then(|j| j.name.clone()),
                source,
                delivery,
            }))
        }
        "Note Hook" => {
            if attributes.system == Some(true) {
                return ignore("a system note");
            }
            let text = attributes.note.unwrap_or_default();
            match attributes.noteable_type.as_deref() {
                Some("Issue") => {
                    let Some(issue) = p.issue else {
                        return ignore("a note without its issue");
                    };
                    let waits = issue
                        .labels
                        .iter()
                        .any(|l| l.title.eq_ignore_ascii_case(NEEDS_INFO_LABEL));
                    // The broker's own question is never a reply.
                    if waits && !text.contains(QUESTION_COMMENT_MARKER) {
                        let (user_id, author) = p
                            .user
                            .map(|u| (u.id, u.username.unwrap_or_default()))
                            .unwrap_or_default();
                        return Ok(EventAction::Work(WorkItem::Reply {
                            repository,
                            number: issue.iid,
                            comment_id: attributes.id,
                            author,
                            // The broker judges standing from GitLab's own answer (the
                            // member's access level), never from the delivery.
                            association: String::new(),
                            by_issue_author: user_id.is_some() && user_id == issue.author_id,
                            text,
                            delivery: Some(delivery),
                        }));
                    }
                    if !mentions_airlock(&text) {
                        return Ok(EventAction::Ignore(format!("a note without {MENTION}")));
                    }
                    Ok(EventAction::Work(WorkItem::Issue {
                        repository,
                        number: issue.iid,
                        trigger: IssueTrigger::Mentioned,
                        agent: Some(routes.default_agent.clone()),
                        delivery: Some(delivery),
                    }))
                }
                Some("MergeRequest") => {
                    let Some(mr) = p.merge_request else {
                        return ignore("a note without its merge request");
                    };
                    if !mr.source_branch.starts_with("airlock/") {
                        return ignore(FOREIGN_MERGE_REQUEST);
                    }
                    let Some(id) = attributes.id else {
                        return ignore("a note without its id");
                    };
                    // A note in a thread (on a line of the diff, or a reply) is review feedback:
                    // the broker reads its thread; one on its own is a comment, read alone.
                    let threaded = matches!(
                        attributes.kind.as_deref(),
                        Some("DiffNote" | "DiscussionNote")
                    );
                    let (trigger, kind) = if threaded {
                        (FollowUpTrigger::ReviewCommented, FeedbackKind::Review)
                    } else {
                        (
                            FollowUpTrigger::PullRequestComment,
                            FeedbackKind::IssueComment,
                        )
                    };
                    Ok(EventAction::Work(WorkItem::FollowUp {
                        repository,
                        pull_request: mr.iid,
                        head_branch: Some(mr.source_branch),
                        trigger,
                        author: p.user.and_then(|u| u.username),
                        source: FeedbackSource { kind, id },
                        delivery,
                    }))
                }
                _ => ignore("a note on neither an issue nor a merge request"),
            }
        }
        other => Ok(EventAction::Ignore(format!(
            "GitLab event {} is not a trigger",
            other.escape_debug()
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agents::RouteOptions;
    use serde_json::json;

    fn routes() -> Routes {
        Routes::build(RouteOptions {
            label: Some("airlock"),
            ..RouteOptions::default()
        })
        .unwrap()
    }

    fn config() -> GitlabConfig {
        GitlabConfig {
            projects: vec!["plat/calc".into()],
            ..GitlabConfig::default()
        }
    }

    fn parse(event: &str, payload: &serde_json::Value) -> Result<EventAction, Refusal> {
        parse_event(
            event,
            payload.to_string().as_bytes(),
            &routes(),
            &config(),
            "u-1",
        )
    }

    const PROJECT: &str = "plat/calc";

    fn labelled(previous: &[&str], current: &[&str], path: &str) -> serde_json::Value {
        let labels = |ls: &[&str]| ls.iter().map(|l| json!({"title": l})).collect::<Vec<_>>();
        json!({"object_kind": "issue", "project": {"id": 9, "path_with_namespace": path},
            "user": {"id": 3, "username": "alice"},
            "object_attributes": {"iid": 7, "action": "update"},
            "labels": labels(current),
            "changes": {"labels": {"previous": labels(previous), "current": labels(current)}}})
    }

    #[test]
    fn a_label_added_that_starts_an_agent_is_an_issue_run_and_others_are_not() {
        assert_eq!(
            parse(
                "Issue Hook",
                &labelled(&["bug"], &["bug", "airlock"], PROJECT)
            ),
            Ok(EventAction::Work(WorkItem::Issue {
                repository: "gitlab:plat/calc".into(),
                number: 7,
                trigger: IssueTrigger::Labelled,
                agent: Some("issue-fixer".into()),
                delivery: Some("u-1".into()),
            }))
        );
        // Already there before: an edit of the title is no new trigger.
        assert!(matches!(
            parse("Issue Hook", &labelled(&["airlock"], &["airlock", "bug"], PROJECT)),
            Ok(EventAction::Ignore(why)) if why.contains("no label")
        ));
        let refused = parse("Issue Hook", &labelled(&[], &["airlock"], "plat/other")).unwrap_err();
        assert_eq!((refused.status, refused.rule), (403, "unknown_project"));
        assert!(refused.reason.contains("[gitlab] projects"), "{refused:?}");
    }

    fn note(noteable: &str, body: &str, extra: serde_json::Value) -> serde_json::Value {
        let mut payload = json!({"object_kind": "note",
            "project": {"id": 9, "path_with_namespace": PROJECT},
            "user": {"id": 3, "username": "alice"},
            "object_attributes": {"id": 55, "note": body, "noteable_type": noteable}});
        for (k, v) in extra.as_object().unwrap() {
            payload[k] = v.clone();
        }
        payload
    }

    #[test]
    fn notes_become_replies_mentions_or_follow_ups_and_a_foreign_merge_request_is_ignored() {
        let waiting = json!({"issue": {"iid": 7, "author_id": 3,
            "labels": [{"title": "needs-info"}]}});
        match parse(
            "Note Hook",
            &note("Issue", "It should raise.", waiting.clone()),
        ) {
            Ok(EventAction::Work(WorkItem::Reply {
                repository,
                number,
                comment_id,
                by_issue_author,
                text,
                ..
            })) => {
                assert_eq!((repository.as_str(), number), ("gitlab:plat/calc", 7));
                assert_eq!(comment_id, Some(55));
                assert!(by_issue_author);
                assert_eq!(text, "It should raise.");
            }
            other => panic!("{other:?}"),
        }
        let question = format!("{QUESTION_COMMENT_MARKER}\nWhich?");
        assert!(matches!(
            parse("Note Hook", &note("Issue", &question, waiting)),
            Ok(EventAction::Ignore(_))
        ));
        let plain = json!({"issue": {"iid": 8, "labels": []}});
        assert!(matches!(
            parse(
                "Note Hook",
                &note("Issue", "@airlock please", plain.clone())
            ),
            Ok(EventAction::Work(WorkItem::Issue {
                number: 8,
                trigger: IssueTrigger::Mentioned,
                ..
            }))
        ));
        assert!(matches!(
            parse("Note Hook", &note("Issue", "me too", plain)),
            Ok(EventAction::Ignore(_))
        ));
        let ours = json!({"merge_request": {"iid": 4, "source_branch": "airlock/CALC-7-1"}});
        assert_eq!(
            parse("Note Hook", &note("MergeRequest", "Rename it.", ours)),
            Ok(EventAction::Work(WorkItem::FollowUp {
                repository: "gitlab:plat/calc".into(),
                pull_request: 4,
                head_branch: Some("airlock/CALC-7-1".into()),
                trigger: FollowUpTrigger::PullRequestComment,
                author: Some("alice".into()),
                source: FeedbackSource {
                    kind: FeedbackKind::IssueComment,
                    id: 55,
                },
                delivery: "u-1".into(),
            }))
        );
        let mut on_a_line = note(
            "MergeRequest",
            "This raises.",
            json!({"merge_request": {"iid": 4, "source_branch": "airlock/CALC-7-1"}}),
        );
        on_a_line["object_attributes"]["type"] = json!("DiffNote");
        assert!(matches!(
            parse("Note Hook", &on_a_line),
            Ok(EventAction::Work(WorkItem::FollowUp {
                trigger: FollowUpTrigger::ReviewCommented,
                source: FeedbackSource {
                    kind: FeedbackKind::Review,
                    id: 55
                },
                ..
            }))
        ));
        let theirs = json!({"merge_request": {"iid": 5, "source_branch": "feature/x"}});
        assert!(matches!(
            parse("Note Hook", &note("MergeRequest", "@airlock fix", theirs)),
            Ok(EventAction::Ignore(why)) if why.contains("airlock did not open")
        ));
    }

    #[test]
    fn a_failed_pipeline_of_an_airlock_merge_request_is_a_follow_up_on_its_failed_job() {
        let pipeline = |status: &str, mr: serde_json::Value, builds: serde_json::Value| {
            json!({"object_kind": "pipeline",
                "project": {"id": 9, "path_with_namespace": PROJECT},
                "object_attributes": {"id": 31, "status": status, "ref": "airlock/CALC-7-1"},
                "merge_request": mr, "builds": builds})
        };
        let ours = json!({"iid": 4, "source_branch": "airlock/CALC-7-1"});
        let builds = json!([
            {"id": 12, "name": "lint", "status": "failed", "allow_failure": true},
            {"id": 14, "name": "test", "status": "failed", "allow_failure": false},
            {"id": 11, "name": "build", "status": "success", "allow_failure": false}]);
        assert_eq!(
            parse("Pipeline Hook", &pipeline("failed", ours.clone(), builds)),
            Ok(EventAction::Work(WorkItem::FollowUp {
                repository: "gitlab:plat/calc".into(),
                pull_request: 4,
                head_branch: Some("airlock/CALC-7-1".into()),
                trigger: FollowUpTrigger::CheckFailed,
                author: Some("test".into()),
                source: FeedbackSource {
                    kind: FeedbackKind::CheckRun,
                    id: 14,
                },
                delivery: "u-1".into(),
            }))
        );
        // No job listed: the head's failed jobs, as the broker finds them.
        assert!(matches!(
            parse(
                "Pipeline Hook",
                &pipeline("failed", ours.clone(), json!([]))
            ),
            Ok(EventAction::Work(WorkItem::FollowUp {
                source: FeedbackSource {
                    kind: FeedbackKind::HeadChecks,
                    id: 31
                },
                ..
            }))
        ));
        for (status, mr) in [
            ("success", ours.clone()),
            ("running", ours),
            ("failed", serde_json::Value::Null),
            ("failed", json!({"iid": 5, "source_branch": "feature/x"})),
        ] {
            assert!(
                matches!(
                    parse("Pipeline Hook", &pipeline(status, mr.clone(), json!([]))),
                    Ok(EventAction::Ignore(_))
                ),
                "{status} {mr}"
            );
        }
    }

    #[test]
    fn a_delivery_is_taken_only_with_the_right_token_and_its_uuid() {
        let headers = |token: &str, uuid: Option<&str>| {
            let mut h = vec![
                ("X-Gitlab-Event".to_owned(), "Issue Hook".to_owned()),
                ("X-Gitlab-Token".to_owned(), token.to_owned()),
            ];
            if let Some(u) = uuid {
                h.push(("X-Gitlab-Event-UUID".to_owned(), u.to_owned()));
            }
            h
        };
        assert_eq!(
            verify(&headers("s3cret", Some("u-9")), b"{}", b"s3cret"),
            Ok(("Issue Hook".to_owned(), "u-9".to_owned()))
        );
        let wrong = verify(&headers("guess", Some("u-9")), b"{}", b"s3cret").unwrap_err();
        assert_eq!((wrong.status, wrong.rule), (401, "bad_token"));
        let anonymous = verify(&headers("s3cret", None), b"{}", b"s3cret").unwrap_err();
        assert_eq!((anonymous.status, anonymous.rule), (400, "bad_delivery_id"));
    }
}
