//! `airlock watch`: poll GitHub's REST API (`[github] api_url`) for the open issues of one
//! repository, or GitLab's (`[gitlab] api_url`, `--repo gitlab:GROUP/NAME`) for those of one
//! project, that carry a label that starts an agent ([`Routes`]), and work on each with that
//! agent through [`super::worker::Worker`]: triage,
//! claim through the broker, run. Several watchers (on one host or many) may poll the same
//! repository: the broker's claim lets exactly one of them run each issue.

use std::collections::BTreeSet;
use std::time::Duration;

use super::worker::{Job, WorkOutcome, Worker};
use super::{Result, TriggerError};
use crate::agents::{RouteOptions, Routes};
use crate::github::{GithubClient, IssueSource};
use airlock_forge::gitlab::{GitLabIssueRef, ProjectId};
use airlock_protocol::ClaimState;

/// What `airlock watch` was asked.
#[derive(Debug, Clone)]
pub struct WatchOptions {
    /// `OWNER/REPO` on GitHub, or `gitlab:GROUP/.../NAME` (or `gitlab:ID`) on GitLab.
    pub repository: String,
    /// The label that starts the default agent; when absent, the default agent's own trigger
    /// label. Every agent of `[agent] triggered` started by a label is polled too.
    pub label: Option<String>,
    /// The pause between two polls.
    pub interval: Duration,
    /// Poll once, work on what it found, and stop.
    pub once: bool,
    /// Put the ready issues on the broker's shared work queue for `airlock worker` (on any
    /// host) instead of running them here. Only the default agent's label is polled: a worker
    /// runs the default agent.
    pub enqueue: bool,
    /// Poll the checks of the open airlock pull requests too ([`super::checks`]): each failed
    /// check is handed to the broker once per process, which decides on a follow-up.
    pub ci_checks: bool,
}

/// One thing the watcher did, for the operator.
#[derive(Debug, Clone, PartialEq)]
pub enum WatchLine {
    /// A poll found these labelled open issues.
    Polled {
        /// Their numbers, ascending.
        numbers: Vec<u64>,
    },
    /// A poll failed; the next one is tried after the interval.
    PollFailed(String),
    /// Ready issues went to the broker's shared work queue.
    Enqueued {
        /// `OWNER/REPO#N` of each, ascending.
        issues: Vec<String>,
        /// How many were not on the queue already.
        added: usize,
    },
    /// An issue was worked on.
    Worked {
        /// `OWNER/REPO#N`.
        issue: String,
        /// How it ended.
        outcome: WorkOutcome,
    },
}

/// The repository or project a watcher polls.
#[derive(Debug, Clone)]
enum Watched {
    /// `OWNER/REPO` on GitHub.
    GitHub { owner: String, repo: String },
    /// A GitLab project.
    GitLab(ProjectId),
}

impl Watched {
    /// `OWNER/REPO` checked as GitHub spells it, or `gitlab:` and a GitLab project.
    fn parse(repository: &str) -> Result<Watched> {
        if let Some(project) = repository.strip_prefix("gitlab:") {
            return ProjectId::parse(project)
                .map(Watched::GitLab)
                .map_err(|e| TriggerError::Usage(format!("--repo: {e}")));
        }
        match IssueSource::parse(&format!("github:{repository}#1")) {
            Ok(IssueSource::GitHub(r)) => Ok(Watched::GitHub {
                owner: r.owner,
                repo: r.repo,
            }),
            _ => Err(TriggerError::Usage(format!(
                "--repo {:?} is not OWNER/REPO (or gitlab:GROUP/NAME for a GitLab project)",
                repository.escape_debug().to_string()
            ))),
        }
    }

    /// The open issues carrying `label`, ascending.
    fn list(&self, config: &crate::config::Config, label: &str) -> Result<Vec<u64>> {
        match self {
            Watched::GitHub { owner, repo } => Ok(GithubClient::from_config(&config.github)?
                .labelled_open_issues(owner, repo, label, &config.github)?),
            Watched::GitLab(project) => {
                let forge = crate::gitlab::client(&config.gitlab, project.clone())?;
                Ok(airlock_forge::Forge::open_issues_labelled(&forge, label)
                    .map_err(crate::gitlab::GitlabError::from)?)
            }
        }
    }

    /// Issue `n` as a run's source (`None` for a number no reference can carry).
    fn source(&self, n: u64) -> Option<IssueSource> {
        match self {
            Watched::GitHub { owner, repo } => {
                IssueSource::parse(&format!("github:{owner}/{repo}#{n}")).ok()
            }
            Watched::GitLab(project) => Some(IssueSource::GitLab(GitLabIssueRef {
                project: project.clone(),
                number: n,
                web_base: None,
            })),
        }
    }

    /// Issue `n` as the operator reads it: `OWNER/REPO#N`, `gitlab:GROUP/NAME#N`.
    fn name(&self, n: u64) -> String {
        match self {
            Watched::GitHub { owner, repo } => format!("{owner}/{repo}#{n}"),
            Watched::GitLab(project) => format!("gitlab:{project}#{n}"),
        }
    }
}

/// Poll and work until stopped (or once, with `once`). An issue this watcher has finished
/// with (run, skipped, or done by another worker) is not looked at again by this process; one
/// another worker holds is, at the next poll, so a dead worker's issue is taken up once its
/// claim lapses.
pub fn watch(
    options: &WatchOptions,
    worker: &Worker,
    report: &mut dyn FnMut(WatchLine),
) -> Result<()> {
    let watched = Watched::parse(&options.repository)?;
    if options
        .label
        .as_deref()
        .is_some_and(|l| l.trim().is_empty())
    {
        return Err(TriggerError::Usage("--label must not be empty".to_owned()));
    }
    let config = worker.load_config()?;
    let routes = Routes::build(RouteOptions {
        default_agent: config.agent.definition.as_deref(),
        label: options.label.as_deref(),
        triggered: &config.agent.triggered,
        review_pull_requests: false,
    })?;
    let default_agent = config
        .agent
        .definition
        .clone()
        .unwrap_or_else(|| crate::agents::DEFAULT_AGENT.to_owned());
    let labels: Vec<String> = routes
        .labels()
        .into_iter()
        .filter(|l| !options.enqueue || routes.for_label(l) == Some(default_agent.as_str()))
        .collect();
    if labels.is_empty() {
        return Err(TriggerError::Usage(
            "no label starts an agent: pass --label, or list agents with `on = \"issue-labeled\"` \
             in [agent] triggered"
                .to_owned(),
        ));
    }
    let mut finished: BTreeSet<u64> = BTreeSet::new();
    let mut checks_seen: BTreeSet<u64> = BTreeSet::new();
    loop {
        let config = worker.load_config()?;
        match (options.ci_checks, &watched) {
            (true, Watched::GitHub { owner, repo }) => {
                poll_checks(owner, repo, &config, worker, &mut checks_seen, report);
            }
            (true, Watched::GitLab(project)) => {
                poll_jobs(project, &config, worker, &mut checks_seen, report);
            }
            (false, _) => {}
        }
        // Replies to the questions the broker keeps for this repository, for deployments
        // without webhooks: an answer starts the next run here, any other reply is recorded.
        if config.questions.enabled && !options.enqueue {
            match worker.poll_replies(&config, &|n| watched.source(n)) {
                Ok(done) => {
                    for (n, outcome) in done {
                        report(WatchLine::Worked {
                            issue: watched.name(n),
                            outcome,
                        });
                    }
                }
                Err(e) => report(WatchLine::PollFailed(format!("replies: {e}"))),
            }
        }
        let listed = (|| -> Result<Vec<(u64, String)>> {
            let mut found: Vec<(u64, String)> = Vec::new();
            for label in &labels {
                for n in watched.list(&config, label)? {
                    if !found.iter().any(|(m, _)| *m == n) {
                        found.push((n, label.clone()));
                    }
                }
            }
            found.sort();
            Ok(found)
        })();
        match listed {
            Err(e) if options.once => return Err(e),
            Err(e) => report(WatchLine::PollFailed(e.to_string())),
            Ok(found) => {
                let numbers: Vec<u64> = found.iter().map(|(n, _)| *n).collect();
                report(WatchLine::Polled {
                    numbers: numbers.clone(),
                });
                let todo: Vec<(u64, String)> = found
                    .into_iter()
                    .filter(|(n, _)| !finished.contains(n))
                    .collect();
                if options.enqueue {
                    let ready = enqueue_ready(&todo, &watched, &config, report)?;
                    finished.extend(todo.iter().map(|(n, _)| *n));
                    if !ready.is_empty() {
                        let added = worker.enqueue(&config, &ready)?;
                        report(WatchLine::Enqueued {
                            issues: ready.iter().map(|k| watched.name(k.issue_number)).collect(),
                            added,
                        });
                    }
                    if options.once {
                        return Ok(());
                    }
                    std::thread::sleep(options.interval);
                    continue;
                }
                for (n, label) in todo {
                    let Some(issue) = watched.source(n) else {
                        continue;
                    };
                    let outcome = worker.work_on(&Job {
                        issue,
                        repo: None,
                        commit: None,
                        agent: routes.for_label(&label).map(str::to_owned),
                        answer: None,
                    });
                    let again = matches!(
                        outcome,
                        WorkOutcome::Failed { .. }
                            | WorkOutcome::ClaimedElsewhere {
                                state: ClaimState::Held,
                                ..
                            }
                    );
                    if !again {
                        finished.insert(n);
                    }
                    report(WatchLine::Worked {
                        issue: watched.name(n),
                        outcome,
                    });
                }
            }
        }
        if options.once {
            return Ok(());
        }
        std::thread::sleep(options.interval);
    }
}

/// Hand each failed check of an open airlock pull request not handed over before to the
/// broker, which reads it and decides on a follow-up run.
fn poll_checks(
    owner: &str,
    repo: &str,
    config: &crate::config::Config,
    worker: &Worker,
    seen: &mut BTreeSet<u64>,
    report: &mut dyn FnMut(WatchLine),
) {
    let found = GithubClient::from_config(&config.github)
        .and_then(|client| super::checks::failed_checks(&client, owner, repo, &config.github));
    let found = match found {
        Ok(found) => found,
        Err(e) => return report(WatchLine::PollFailed(format!("checks: {e}"))),
    };
    let repository = format!("{owner}/{repo}");
    let found = found.into_iter().map(|c| (c.pull_request, c.check_run));
    hand_over(&repository, "pull #", found, worker, seen, report);
}

/// Hand each failed check `(number, check)` of `repository` not handed over before to the
/// broker (`pr_feedback` as a check run), reporting each as `repository PREFIXnumber`.
fn hand_over(
    repository: &str,
    prefix: &str,
    found: impl IntoIterator<Item = (u64, u64)>,
    worker: &Worker,
    seen: &mut BTreeSet<u64>,
    report: &mut dyn FnMut(WatchLine),
) {
    for (number, check) in found {
        if !seen.insert(check) {
            continue;
        }
        let source = airlock_protocol::FeedbackSource {
            kind: airlock_protocol::FeedbackKind::CheckRun,
            id: check,
        };
        let outcome = worker.follow_up(repository, number, source);
        report(WatchLine::Worked {
            issue: format!("{repository} {prefix}{number}"),
            outcome,
        });
    }
}

/// GitLab's [`poll_checks`]: each failed job (not allowed to fail) of the newest pipelines on
/// the head of an open merge request from an `airlock/` branch, not handed over before, goes
/// to the broker as a check run, which it reads from GitLab and decides on.
fn poll_jobs(
    project: &ProjectId,
    config: &crate::config::Config,
    worker: &Worker,
    seen: &mut BTreeSet<u64>,
    report: &mut dyn FnMut(WatchLine),
) {
    let found = crate::gitlab::client(&config.gitlab, project.clone()).and_then(|gitlab| {
        let mut found = Vec::new();
        for mr in gitlab.open_merge_requests("airlock/")? {
            for job in gitlab.failed_jobs_on(&mr.head_sha, PIPELINES_PER_HEAD)? {
                if job.failed() {
                    found.push((mr.number, job.id));
                }
            }
        }
        Ok(found)
    });
    let found = match found {
        Ok(found) => found,
        Err(e) => return report(WatchLine::PollFailed(format!("pipelines: {e}"))),
    };
    let repository = format!("gitlab:{project}");
    hand_over(&repository, "merge request !", found, worker, seen, report);
}

/// How many of a head's pipelines (newest first) `watch --ci-checks` reads on GitLab.
const PIPELINES_PER_HEAD: usize = 5;

/// The issues of `todo` that triage finds ready, as the broker's keys; the others are reported
/// skipped with the reason (a failure to read one is reported too, and it is not queued).
fn enqueue_ready(
    todo: &[(u64, String)],
    watched: &Watched,
    config: &crate::config::Config,
    report: &mut dyn FnMut(WatchLine),
) -> Result<Vec<airlock_protocol::IssueKey>> {
    let mut ready = Vec::new();
    for (n, _) in todo {
        let Some(source) = watched.source(*n) else {
            continue;
        };
        match super::worker::read_and_triage(&source, config) {
            Ok(t) if t.triage.state == crate::triage::TriageState::ReadyForAgent => {
                ready.extend(Worker::claim_key_of(config, &source));
            }
            Ok(t) => report(WatchLine::Worked {
                issue: watched.name(*n),
                outcome: WorkOutcome::Skipped { triage: t.triage },
            }),
            Err(e) => report(WatchLine::Worked {
                issue: watched.name(*n),
                outcome: WorkOutcome::Failed {
                    error: e.to_string(),
                },
            }),
        }
    }
    Ok(ready)
}
