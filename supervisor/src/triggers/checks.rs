//! The project's CI on airlock's pull requests, as triggers see it: a `check_run`,
//! `check_suite` or `workflow_run` delivery that completed with a failure on a pull request
//! whose head is an `airlock/` branch becomes a follow-up of it ([`check_event`]), and
//! `airlock watch --ci-checks` finds the same failures by polling ([`failed_checks`]) where no
//! webhook reaches. Either way the work item names the check only: the broker reads the check
//! from GitHub with its own token, decides whether it is the agent's to fix, and refuses (and
//! audits) what it does not take.

use serde::Deserialize;

use super::webhook::EventAction;
use super::{FollowUpTrigger, WorkItem};
use airlock_protocol::{FeedbackKind, FeedbackSource};

/// The conclusions that are a failure the agent may fix; the broker decides again from what it
/// reads itself (`cancelled`, `action_required`, `neutral`, `skipped`, `stale` are not).
pub const FAILED_CONCLUSIONS: [&str; 2] = ["failure", "timed_out"];

#[derive(Deserialize)]
struct Repo {
    full_name: String,
}

#[derive(Deserialize)]
struct Head {
    #[serde(rename = "ref")]
    name: String,
}

#[derive(Deserialize)]
struct Pull {
    number: u64,
    head: Head,
}

#[derive(Deserialize)]
struct App {
    #[serde(default)]
    slug: Option<String>,
}

/// The part of a check run, check suite or workflow run a trigger reads.
#[derive(Deserialize)]
struct Check {
    id: u64,
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    conclusion: Option<String>,
    #[serde(default)]
    pull_requests: Vec<Pull>,
    #[serde(default)]
    app: Option<App>,
}

#[derive(Deserialize)]
struct CheckPayload {
    repository: Repo,
    #[serde(default)]
    check_run: Option<Check>,
    #[serde(default)]
    check_suite: Option<Check>,
    #[serde(default)]
    workflow_run: Option<Check>,
}

fn failed(conclusion: Option<&str>) -> bool {
    conclusion.is_some_and(|c| FAILED_CONCLUSIONS.contains(&c))
}

/// What a completed `check_run`, `check_suite` or `workflow_run` delivery asks of airlock: a
/// follow-up of each airlock pull request it failed on (the first, when it names several),
/// or why nothing.
pub fn check_event(event: &str, payload: &[u8], delivery: &str) -> EventAction {
    let p: CheckPayload = match serde_json::from_slice(payload) {
        Ok(p) => p,
        Err(e) => return EventAction::Ignore(format!("the {event} payload does not parse: {e}")),
    };
    let (check, kind) = match event {
        "check_run" => (p.check_run, FeedbackKind::CheckRun),
        "check_suite" => (p.check_suite, FeedbackKind::HeadChecks),
        _ => (p.workflow_run, FeedbackKind::HeadChecks),
    };
    let Some(check) = check else {
        return EventAction::Ignore(format!("a {event} event without its {event}"));
    };
    let name = check.name.as_deref().unwrap_or(event).escape_debug();
    if !failed(check.conclusion.as_deref()) {
        return EventAction::Ignore(format!(
            "{event} {name} concluded {}: only {} start a follow-up",
            check
                .conclusion
                .as_deref()
                .unwrap_or("nothing")
                .escape_debug(),
            FAILED_CONCLUSIONS.join(" and ")
        ));
    }
    let Some(pull) = check
        .pull_requests
        .into_iter()
        .find(|p| p.head.name.starts_with("airlock/"))
    else {
        return EventAction::Ignore(format!(
            "{event} {name} failed on no pull request airlock opened"
        ));
    };
    EventAction::Work(WorkItem::FollowUp {
        repository: p.repository.full_name,
        pull_request: pull.number,
        head_branch: Some(pull.head.name),
        trigger: FollowUpTrigger::CheckFailed,
        author: check.app.and_then(|a| a.slug),
        source: FeedbackSource { kind, id: check.id },
        delivery: delivery.to_owned(),
    })
}

/// One failed check of an open airlock pull request, as a poll found it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FailedCheck {
    /// The pull request's number.
    pub pull_request: u64,
    /// Its head branch.
    pub head_branch: String,
    /// The check run.
    pub check_run: u64,
}

#[derive(Deserialize)]
struct OpenPull {
    number: u64,
    head: OpenHead,
}

#[derive(Deserialize)]
struct OpenHead {
    #[serde(rename = "ref")]
    name: String,
    sha: String,
}

#[derive(Deserialize)]
struct CheckRuns {
    #[serde(default)]
    check_runs: Vec<Check>,
}

/// The failed checks on the heads of the open pull requests of `owner/repo` whose head is an
/// `airlock/` branch (`GET /repos/O/R/pulls?state=open`, then
/// `GET /repos/O/R/commits/SHA/check-runs` of each), by pull request and check run.
pub fn failed_checks(
    client: &crate::github::GithubClient,
    owner: &str,
    repo: &str,
    cfg: &crate::config::GithubConfig,
) -> crate::github::Result<Vec<FailedCheck>> {
    let pulls: Vec<OpenPull> = client.get_typed(
        &format!("/repos/{owner}/{repo}/pulls?state=open&per_page=100"),
        cfg,
    )?;
    let mut found = Vec::new();
    for pull in pulls
        .into_iter()
        .filter(|p| p.head.name.starts_with("airlock/"))
    {
        if pull.head.sha.len() != 40 || !pull.head.sha.bytes().all(|b| b.is_ascii_hexdigit()) {
            continue;
        }
        let runs: CheckRuns = client.get_typed(
            &format!(
                "/repos/{owner}/{repo}/commits/{}/check-runs?per_page=100",
                pull.head.sha
            ),
            cfg,
        )?;
        for run in runs
            .check_runs
            .into_iter()
            .filter(|r| failed(r.conclusion.as_deref()))
        {
            found.push(FailedCheck {
                pull_request: pull.number,
                head_branch: pull.head.name.clone(),
                check_run: run.id,
            });
        }
    }
    found.sort_by_key(|f| (f.pull_request, f.check_run));
    Ok(found)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failed_checks_on_airlock_pull_requests_become_follow_ups() {
        let run = |conclusion: &str, head: &str| {
            format!(
                r#"{{"action":"completed","repository":{{"full_name":"acme/calc"}},
                "check_run":{{"id":77,"name":"test","conclusion":"{conclusion}",
                "app":{{"slug":"github-actions"}},
                "pull_requests":[{{"number":1,"head":{{"ref":"{head}","sha":"abc"}}}}]}}}}"#
            )
        };
        assert_eq!(
            check_event(
                "check_run",
                run("failure", "airlock/CALC-7-1").as_bytes(),
                "d1"
            ),
            EventAction::Work(WorkItem::FollowUp {
                repository: "acme/calc".to_owned(),
                pull_request: 1,
                head_branch: Some("airlock/CALC-7-1".to_owned()),
                trigger: FollowUpTrigger::CheckFailed,
                author: Some("github-actions".to_owned()),
                source: FeedbackSource {
                    kind: FeedbackKind::CheckRun,
                    id: 77,
                },
                delivery: "d1".to_owned(),
            })
        );
        for conclusion in ["success", "cancelled", "neutral"] {
            assert!(matches!(
                check_event("check_run", run(conclusion, "airlock/CALC-7-1").as_bytes(), "d2"),
                EventAction::Ignore(why) if why.contains("only failure and timed_out")
            ));
        }
        assert!(matches!(
            check_event("check_run", run("failure", "feature/x").as_bytes(), "d3"),
            EventAction::Ignore(why) if why.contains("no pull request airlock opened")
        ));
        let suite = br#"{"action":"completed","repository":{"full_name":"acme/calc"},
            "workflow_run":{"id":9,"name":"CI","conclusion":"timed_out",
            "pull_requests":[{"number":4,"head":{"ref":"airlock/X-3","sha":"abc"}}]}}"#;
        assert!(matches!(
            check_event("workflow_run", suite, "d4"),
            EventAction::Work(WorkItem::FollowUp {
                pull_request: 4,
                source: FeedbackSource {
                    kind: FeedbackKind::HeadChecks,
                    id: 9
                },
                ..
            })
        ));
    }
}
