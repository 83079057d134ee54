//! `airlock worker`: take ready issues from the broker's shared work queue (`take_work`, which
//! the operator fills with `airlock-broker work add`), one at a time, and work on each through
//! [`Worker`]: read and triage it, run it while its lease is renewed, and end its claim. Any
//! number of workers on any number of hosts may drain one queue: the broker hands each issue to
//! one holder at a time, and a worker that dies loses its issue one lease later, when the next
//! `take_work` hands it out again. A run on another host than the broker's sends its change as
//! bytes (`[broker] tree = "bytes"`).

use std::time::Duration;

use airlock_protocol::{ClaimEnd, ClaimStatus, Request, TakeWork, TakeWorkReply};

use super::claims::ClaimClient;
use super::worker::{Job, WorkOutcome, Worker, read_and_triage};
use super::{Result, TriggerError};
use crate::adapters::BrokerSocket;
use crate::github::{GithubIssueRef, IssueSource};
use crate::transport::BrokerEndpoint;
use crate::triage::TriageState;
use airlock_forge::gitlab::{GitLabIssueRef, ProjectId};

/// What `airlock worker` was asked.
#[derive(Debug, Clone)]
pub struct QueueWorkerOptions {
    /// The forge repository the queue's issues are read from: `OWNER/REPO` on GitHub, or
    /// `gitlab:GROUP/.../NAME` on GitLab.
    pub forge_repo: String,
    /// The pause before asking again when the queue has nothing ready.
    pub interval: Duration,
    /// Stop when the queue has nothing ready, instead of waiting for more.
    pub once: bool,
}

/// One thing the worker did, for the operator.
#[derive(Debug, Clone, PartialEq)]
pub enum QueueLine {
    /// Nothing was ready; the worker waits `interval` (or stops, with `once`).
    Idle,
    /// Asking the broker failed; asked again after the interval.
    BrokerFailed(String),
    /// An issue was taken and worked on.
    Worked {
        /// `OWNER/REPO#N` or `gitlab:GROUP/NAME#N`.
        issue: String,
        /// How it ended.
        outcome: WorkOutcome,
    },
}

/// Take and work on issues until the queue has nothing ready (with `once`) or forever.
pub fn drain(
    options: &QueueWorkerOptions,
    worker: &Worker,
    report: &mut dyn FnMut(QueueLine),
) -> Result<()> {
    let config = worker.load_config()?;
    let endpoint = worker.broker_endpoint(&config)?;
    let forge = QueueForge::parse(&options.forge_repo)?;
    let repository = config
        .broker
        .repository
        .clone()
        .unwrap_or_else(|| forge.claim_repository());
    let broker = BrokerSocket::new(&endpoint, Duration::from_secs(60));
    let take = Request::TakeWork(TakeWork {
        holder: worker.holder.clone(),
        lease_secs: worker.lease.as_secs().max(1),
        repository: Some(repository),
    });
    loop {
        let claim = match broker
            .request(&take)
            .and_then(crate::adapters::typed::<TakeWorkReply>)
        {
            Ok(TakeWorkReply::Claimed { claim, forge, .. }) => Some((claim, forge)),
            Ok(TakeWorkReply::NoWork) => None,
            Ok(TakeWorkReply::Failed { message }) if options.once => {
                return Err(TriggerError::Broker(format!("take_work: {message}")));
            }
            Ok(TakeWorkReply::Failed { message }) => {
                report(QueueLine::BrokerFailed(format!("take_work: {message}")));
                std::thread::sleep(options.interval);
                continue;
            }
            Err(e) if options.once => return Err(TriggerError::Broker(e.to_string())),
            Err(e) => {
                report(QueueLine::BrokerFailed(e.to_string()));
                std::thread::sleep(options.interval);
                continue;
            }
        };
        let Some((claim, mark)) = claim else {
            report(QueueLine::Idle);
            if options.once {
                return Ok(());
            }
            std::thread::sleep(options.interval);
            continue;
        };
        let (issue, name) = forge.issue(claim.issue.issue_number);
        let outcome = work_on_taken(worker, &endpoint, &claim, mark, issue);
        report(QueueLine::Worked {
            issue: name,
            outcome,
        });
    }
}

/// Where the queue's issues are read: `OWNER/REPO` on GitHub, or `gitlab:GROUP/.../NAME`.
enum QueueForge {
    GitHub { owner: String, repo: String },
    GitLab(ProjectId),
}

impl QueueForge {
    fn parse(given: &str) -> Result<QueueForge> {
        if let Some(project) = given.strip_prefix(super::gitlab::GITLAB_PREFIX) {
            return ProjectId::parse(project)
                .map(QueueForge::GitLab)
                .map_err(|e| TriggerError::Usage(format!("--repo: {e}")));
        }
        let (owner, repo) = given
            .split_once('/')
            .filter(|(o, r)| !o.is_empty() && !r.is_empty() && !r.contains('/'))
            .ok_or_else(|| {
                TriggerError::Usage(format!(
                    "--repo {:?} is not OWNER/REPO (GitHub) or gitlab:GROUP/NAME (GitLab)",
                    given.escape_debug().to_string()
                ))
            })?;
        Ok(QueueForge::GitHub {
            owner: owner.to_owned(),
            repo: repo.to_owned(),
        })
    }

    /// The repository the broker's queue knows the issues by when `[broker] repository` does
    /// not say: `OWNER/REPO`, or the GitLab project's path (as `airlock watch` claims them).
    fn claim_repository(&self) -> String {
        match self {
            QueueForge::GitHub { owner, repo } => format!("{owner}/{repo}"),
            QueueForge::GitLab(project) => project.to_string(),
        }
    }

    /// Issue `number` to read, and its name for the operator.
    fn issue(&self, number: u64) -> (IssueSource, String) {
        match self {
            QueueForge::GitHub { owner, repo } => {
                let reference = GithubIssueRef {
                    owner: owner.clone(),
                    repo: repo.clone(),
                    number,
                    web_base: None,
                };
                let name = reference.to_string();
                (IssueSource::GitHub(reference), name)
            }
            QueueForge::GitLab(project) => (
                IssueSource::GitLab(GitLabIssueRef {
                    project: project.clone(),
                    number,
                    web_base: None,
                }),
                format!("{}{project}#{number}", super::gitlab::GITLAB_PREFIX),
            ),
        }
    }
}

/// Work on an issue the queue handed to this worker: read and triage it (an issue that is not
/// ready is done: it is skipped, not taken again and again), then run it under its claim.
fn work_on_taken(
    worker: &Worker,
    endpoint: &BrokerEndpoint,
    claim: &ClaimStatus,
    forge: airlock_protocol::ForgeMark,
    issue: IssueSource,
) -> WorkOutcome {
    let job = Job {
        issue,
        repo: None,
        commit: None,
        agent: None,
        answer: None,
    };
    let triaged = worker
        .load_config()
        .and_then(|config| read_and_triage(&job.issue, &config));
    let end_early = |end: ClaimEnd| {
        let client = ClaimClient::new(endpoint, &worker.holder);
        let patience = worker.lease.max(Duration::from_secs(30));
        if let Err(e) = client.release_patiently(&claim.issue, end, patience) {
            tracing::warn!("ending the claim on #{}: {e}", claim.issue.issue_number);
        }
    };
    match triaged {
        Err(e) => {
            // Reading the issue failed (the forge was away): another worker may try.
            end_early(ClaimEnd::Abandoned);
            WorkOutcome::Failed {
                error: e.to_string(),
            }
        }
        Ok(triaged) if triaged.triage.state != TriageState::ReadyForAgent => {
            end_early(ClaimEnd::Done);
            WorkOutcome::Skipped {
                triage: triaged.triage,
            }
        }
        Ok(_) => worker.run_claimed(&job, endpoint, &claim.issue, forge),
    }
}
