//! One issue, start to end, for every trigger: read it, triage it (an issue that is not ready
//! is skipped with the reason, unclaimed), claim it through the broker when it is a GitHub
//! issue, run it with [`crate::runner::run_issue`] (the code path of `airlock run`) while the
//! claim's lease is renewed, and release the claim: done when the run ended (a queued pull
//! request, an escalation), abandoned when it failed, so another worker may try.

use std::path::PathBuf;
use std::time::Duration;

use airlock_protocol::{ClaimEnd, ClaimState, ForgeMark, IssueKey};
use serde::Serialize;

use super::claims::{ClaimClient, ClaimOutcome, Lease};
use super::{Result, TriggerError};
use crate::config::Config;
use crate::github::{GithubClient, GithubIssueRef, IssueSource};
use crate::issue::Issue;
use crate::progress::ProgressMode;
use crate::runner::{self, Overrides, RunArgs, RunReport};
use crate::session::RunEnd;
use crate::transport::BrokerEndpoint;
use crate::triage::{self, Triage, TriageState};

/// What every run of a trigger shares.
#[derive(Debug, Clone)]
pub struct Worker {
    /// `airlock.toml` (else `$AIRLOCK_CONFIG`, `./airlock.toml`, the defaults).
    pub config: Option<PathBuf>,
    /// Model spec; `[model] spec` when absent.
    pub model: Option<String>,
    /// The `airlock` executable (re-executed as reader workers).
    pub exe: PathBuf,
    /// The repository to clone for GitHub issues (a URL or a path); the issue's own
    /// repository on its forge when absent.
    pub clone: Option<String>,
    /// How each run's progress is shown on stderr.
    pub progress: ProgressMode,
    /// This worker's claim holder id.
    pub holder: String,
    /// The claim's lease.
    pub lease: Duration,
    /// The broker every run, claim and lease of this worker goes to, replacing where
    /// `[broker]` says it is (`airlock worker --broker URL`).
    pub broker: Option<String>,
}

/// One issue to work on.
#[derive(Debug, Clone)]
pub struct Job {
    /// Where the issue comes from.
    pub issue: IssueSource,
    /// The repository (`--repo` of the run); the worker's `clone` when absent.
    pub repo: Option<String>,
    /// The revision to pin (the batch's one pin); the default branch's head when absent.
    pub commit: Option<String>,
    /// The agent its trigger chose (a built-in name or a definition's path); `[agent]
    /// definition`, else the issue fixer, when absent.
    pub agent: Option<String>,
    /// The reply that answered an earlier run's question on the issue, given to this run as
    /// data (`crate::questions`).
    pub answer: Option<crate::questions::Answer>,
}

/// How a run that started ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RunResult {
    /// A pull request is queued for a human.
    PrQueued,
    /// The run escalated.
    Escalated,
    /// The run's own triage found the issue not ready.
    NotReady,
    /// A budget stopped the run and it parked: its claim is done (no other worker starts the
    /// issue afresh), and the operator continues it with `airlock resume`.
    Parked,
    /// A review run queued its review of a pull request for an approver.
    ReviewQueued,
}

/// What became of one issue.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum WorkOutcome {
    /// Triage found it not ready: skipped, not claimed, no model call.
    Skipped {
        /// The triage and its reason.
        triage: Triage,
    },
    /// Another worker holds it, or its run is done.
    ClaimedElsewhere {
        /// Who holds (or held) it.
        holder: String,
        /// Held or done.
        state: ClaimState,
    },
    /// A run started and ended.
    Ran {
        /// The run id.
        run_id: String,
        /// How it ended.
        result: RunResult,
        /// The outcome's summary (the model's words: shown escaped), or the triage reason.
        summary: String,
        /// `outcome.json`.
        outcome_path: PathBuf,
        /// The run's model cost, when the outcome records it.
        #[serde(skip_serializing_if = "Option::is_none")]
        cost_usd: Option<f64>,
        /// The label the broker put on the issue, when it was claimed.
        #[serde(skip_serializing_if = "Option::is_none")]
        label: Option<ForgeMark>,
        /// Set when another worker took the claim over while the run went on.
        #[serde(skip_serializing_if = "Option::is_none")]
        claim_lost: Option<String>,
    },
    /// Reading, claiming or running it failed.
    Failed {
        /// What went wrong.
        error: String,
    },
    /// A reply on an issue that starts nothing (no open question, or a replier who may not
    /// answer it); recorded.
    Ignored {
        /// Why.
        reason: String,
    },
}

impl WorkOutcome {
    /// The exit code `airlock run` would have given this issue: 0 queued, 3 escalated, 4 not
    /// ready (skipped, or claimed by another worker), 2 failed.
    pub fn exit_code(&self) -> u8 {
        match self {
            WorkOutcome::Ran {
                result: RunResult::PrQueued | RunResult::ReviewQueued,
                ..
            } => crate::EXIT_PR_QUEUED,
            WorkOutcome::Ran {
                result: RunResult::Escalated,
                ..
            } => crate::EXIT_ESCALATED,
            WorkOutcome::Ran {
                result: RunResult::Parked,
                ..
            } => crate::EXIT_PARKED,
            WorkOutcome::Ran {
                result: RunResult::NotReady,
                ..
            }
            | WorkOutcome::Skipped { .. }
            | WorkOutcome::Ignored { .. }
            | WorkOutcome::ClaimedElsewhere { .. } => crate::EXIT_NOT_READY,
            WorkOutcome::Failed { .. } => crate::EXIT_ERROR,
        }
    }

    /// How bad it is, for "the worst outcome" of many: queued < not ready < parked (waiting for
    /// the operator's `airlock resume`) < escalated < error.
    pub fn severity(&self) -> u8 {
        match self.exit_code() {
            crate::EXIT_PR_QUEUED => 0,
            crate::EXIT_NOT_READY => 1,
            crate::EXIT_PARKED => 2,
            crate::EXIT_ESCALATED => 3,
            _ => 4,
        }
    }
}

/// An issue read and triaged, before any claim.
#[derive(Debug, Clone)]
pub struct Triaged {
    /// The issue as read.
    pub issue: Issue,
    /// Its triage.
    pub triage: Triage,
}

/// Read the issue of `source` (a GitHub issue through `[github]`, or a file) and triage it.
pub fn read_and_triage(source: &IssueSource, config: &Config) -> Result<Triaged> {
    let issue = match source {
        IssueSource::File(path) => Issue::read(path)?,
        IssueSource::GitHub(reference) => {
            GithubClient::from_config(&config.github)?
                .fetch_issue(reference, &config.github)?
                .issue
        }
        IssueSource::GitLab(reference) => {
            let forge = crate::gitlab::client_for(reference, &config.gitlab)?;
            crate::gitlab::fetch_issue(&forge, reference, &config.gitlab)?.issue
        }
        IssueSource::Merged(reference) => {
            let client = GithubClient::from_config(&config.github)?;
            client
                .fetch_pull(reference, &config.github)?
                .merged_task(reference, &config.github)?
        }
        IssueSource::FollowUp(n) => {
            return Err(TriggerError::Usage(format!(
                "follow-up of queue item {n}: a follow-up is no new issue to triage or claim; \
                 run it with `airlock run --follow-up {n}`"
            )));
        }
    };
    let triage = triage::classify(&issue);
    Ok(Triaged { issue, triage })
}

impl Worker {
    /// The configuration every run of this worker loads.
    pub fn load_config(&self) -> Result<Config> {
        Ok(runner::load_config(self.config.as_deref())?.0)
    }

    /// The broker's key of a GitHub issue: `[broker] repository`, else `OWNER/REPO`.
    pub fn claim_key(config: &Config, reference: &GithubIssueRef) -> IssueKey {
        IssueKey {
            repository: config
                .broker
                .repository
                .clone()
                .unwrap_or_else(|| format!("{}/{}", reference.owner, reference.repo)),
            issue_number: reference.number,
        }
    }

    /// The broker's key of a forge issue: `[broker] repository`, else the forge's name of its
    /// repository (`OWNER/REPO`, a GitLab project's `GROUP/NAME`); `None` for an issue that is
    /// on no forge (a file, a follow-up), which is not claimed.
    pub fn claim_key_of(config: &Config, source: &IssueSource) -> Option<IssueKey> {
        match source {
            IssueSource::GitHub(reference) | IssueSource::Merged(reference) => {
                Some(Self::claim_key(config, reference))
            }
            IssueSource::GitLab(reference) => Some(IssueKey {
                repository: config
                    .broker
                    .repository
                    .clone()
                    .unwrap_or_else(|| reference.project.to_string()),
                issue_number: reference.number,
            }),
            IssueSource::File(_) | IssueSource::FollowUp(_) => None,
        }
    }

    /// Work on one issue: triage, claim, run, release. Never an error: what went wrong is
    /// the outcome.
    pub fn work_on(&self, job: &Job) -> WorkOutcome {
        self.try_work_on(job)
            .unwrap_or_else(|e| WorkOutcome::Failed {
                error: e.to_string(),
            })
    }

    fn try_work_on(&self, job: &Job) -> Result<WorkOutcome> {
        let config = self.load_config()?;
        let mut triaged = read_and_triage(&job.issue, &config)?;
        if let Some(answer) = &job.answer {
            triaged.issue = crate::questions::answered_issue(triaged.issue, answer);
            triaged.triage = triage::classify(&triaged.issue);
        }
        if triaged.triage.state != TriageState::ReadyForAgent {
            return Ok(WorkOutcome::Skipped {
                triage: triaged.triage,
            });
        }
        self.claim_and_run(job, &config)
    }

    /// The broker this worker talks to: `--broker`, else where `[broker]` says.
    pub fn broker_endpoint(&self, config: &Config) -> Result<BrokerEndpoint> {
        let mut config = config.clone();
        if let Some(url) = &self.broker {
            config
                .broker
                .point_at(url)
                .map_err(|e| TriggerError::Usage(format!("--broker: {e}")))?;
        }
        broker_endpoint(&config, "claims")
    }

    /// Put `issues` on the broker's shared work queue; returns how many were new there.
    pub fn enqueue(&self, config: &Config, issues: &[IssueKey]) -> Result<usize> {
        let endpoint = self.broker_endpoint(config)?;
        let request = airlock_protocol::Request::EnqueueWork(airlock_protocol::EnqueueWork {
            by: self.holder.clone(),
            issues: issues.to_vec(),
        });
        match crate::adapters::BrokerSocket::new(&endpoint, Duration::from_secs(60))
            .request(&request)
            .and_then(crate::adapters::typed)
            .map_err(|e| TriggerError::Broker(e.to_string()))?
        {
            airlock_protocol::EnqueueReply::Enqueued { added } => Ok(added),
            airlock_protocol::EnqueueReply::Failed { message } => {
                Err(TriggerError::Broker(format!("enqueue_work: {message}")))
            }
        }
    }

    /// Claim (for a forge issue) and run an issue already triaged ready.
    pub fn claim_and_run(&self, job: &Job, config: &Config) -> Result<WorkOutcome> {
        let Some(key) = Self::claim_key_of(config, &job.issue) else {
            return Ok(self.run(job, None));
        };
        let endpoint = self.broker_endpoint(config)?;
        let client = ClaimClient::new(&endpoint, &self.holder);
        let forge = match client.claim(&key, self.lease)? {
            ClaimOutcome::Taken(claim) => {
                return Ok(WorkOutcome::ClaimedElsewhere {
                    holder: claim.holder,
                    state: claim.state,
                });
            }
            ClaimOutcome::Claimed { forge, .. } => forge,
        };
        Ok(self.run_claimed(job, &endpoint, &key, forge))
    }

    /// Run an issue this worker holds the claim on, renewing its lease meanwhile, and end the
    /// claim: done when the run ended, abandoned when it failed (another worker may take it).
    pub fn run_claimed(
        &self,
        job: &Job,
        endpoint: &BrokerEndpoint,
        key: &IssueKey,
        forge: ForgeMark,
    ) -> WorkOutcome {
        let client = ClaimClient::new(endpoint, &self.holder);
        let lease = Lease::keep(endpoint, &self.holder, key, self.lease);
        let mut outcome = self.run(job, Some(forge));
        // An issue whose run asked its question is free again: the `needs-info` label keeps
        // triage off it until a reply answers the question and starts the next run.
        let asked = self.ask_question(job, endpoint, key, &outcome);
        let end = match outcome {
            WorkOutcome::Failed { .. } => ClaimEnd::Abandoned,
            _ if asked => ClaimEnd::Abandoned,
            _ => ClaimEnd::Done,
        };
        // The claim ends while its lease is still renewed, and a release that meets a broker
        // that is away (restarting) is asked again: the issue of a finished run must not lapse
        // and be handed out a second time.
        let released = client.release_patiently(key, end, self.lease.max(Duration::from_secs(30)));
        let lost = lease.stop();
        let lost = match &released {
            // Released as this worker's: whatever the renewer saw after that is the release.
            Ok(_) => None,
            Err(_) => lost,
        };
        if let Err(e) = &released {
            // The lease lapses on its own; the outcome of the run is what matters here.
            tracing::warn!("releasing the claim on #{}: {e}", key.issue_number);
        }
        if let WorkOutcome::Ran { claim_lost, .. } = &mut outcome {
            claim_lost.clone_from(&lost);
        }
        outcome
    }

    /// A reviewer acted on pull request `pull_request` of `repository` (`OWNER/REPO`): the
    /// broker reads the review or comment from GitHub and, when it accepts it, records the
    /// change request; then the follow-up run (the code path of `airlock run --follow-up N`)
    /// starts from the head of the branch the broker pushed. A refusal is the outcome, with the
    /// broker's reason.
    pub fn follow_up(
        &self,
        repository: &str,
        pull_request: u64,
        source: airlock_protocol::FeedbackSource,
    ) -> WorkOutcome {
        self.try_follow_up(repository, pull_request, source)
            .unwrap_or_else(|e| WorkOutcome::Failed {
                error: e.to_string(),
            })
    }

    fn try_follow_up(
        &self,
        repository: &str,
        pull_request: u64,
        source: airlock_protocol::FeedbackSource,
    ) -> Result<WorkOutcome> {
        let config = self.load_config()?;
        let endpoint = self.broker_endpoint(&config)?;
        let brief = crate::adapters::BrokerSocket::new(
            endpoint,
            config.broker.reply_timeout(config.tests.timeout_secs),
        )
        .pr_feedback(airlock_protocol::PrFeedback {
            // The broker knows a GitLab project by its path, as `[repositories."NAME".forge]`
            // names it.
            forge_repo: repository
                .strip_prefix(super::gitlab::GITLAB_PREFIX)
                .unwrap_or(repository)
                .to_owned(),
            pull_request,
            source,
        })
        .map_err(|e| TriggerError::Broker(e.to_string()))?;
        let gitlab_project = repository.strip_prefix(super::gitlab::GITLAB_PREFIX);
        let repo = match (&self.clone, gitlab_project) {
            (Some(clone), _) => clone.clone(),
            (None, Some(project)) => {
                let reference = airlock_forge::gitlab::GitLabIssueRef {
                    project: airlock_forge::gitlab::ProjectId::parse(project)
                        .map_err(|e| TriggerError::Usage(e.to_string()))?,
                    number: pull_request,
                    web_base: None,
                };
                crate::gitlab::clone_url(&reference, &config.gitlab).ok_or_else(|| {
                    TriggerError::Usage(format!(
                        "the clone URL of {repository} cannot be told from its project id; \
                         pass --clone"
                    ))
                })?
            }
            (None, None) => {
                let (owner, repo) = repository.split_once('/').ok_or_else(|| {
                    TriggerError::Usage(format!("{repository:?} is not OWNER/REPO"))
                })?;
                GithubIssueRef {
                    owner: owner.to_owned(),
                    repo: repo.to_owned(),
                    number: pull_request,
                    web_base: None,
                }
                .clone_url(&config.github)
                .ok_or_else(|| {
                    TriggerError::Usage(format!(
                        "the clone URL of {repository} cannot be told from [github] api_url; \
                         pass --clone"
                    ))
                })?
            }
        };
        let job = Job {
            issue: IssueSource::FollowUp(brief.queue_id),
            repo: Some(repo),
            commit: None,
            agent: None,
            answer: None,
        };
        Ok(self.run(&job, None))
    }

    /// Review pull request `reference` with the code path of `airlock review` and `agent` (the
    /// built-in reviewer when absent): its review queued with the broker, or why not. A review
    /// takes no claim: it is of one head commit, and a delivery is acted on once.
    pub fn review(&self, reference: &GithubIssueRef, agent: Option<&str>) -> WorkOutcome {
        let args = crate::review::ReviewArgs {
            pr: format!(
                "github:{}/{}#{}",
                reference.owner, reference.repo, reference.number
            ),
            repo: self.clone.clone(),
            model: self.model.clone(),
            agent: agent.map(str::to_owned),
            config: self.config.clone(),
            exe: self.exe.clone(),
            progress: self.progress,
        };
        match crate::review::review_pull_request(&args, Overrides::default()) {
            Ok(report) => {
                let (result, summary) = match &report.end {
                    RunEnd::Reviewed {
                        queue_id: Some(id), ..
                    } => (
                        RunResult::ReviewQueued,
                        format!("review queued as broker item {id}"),
                    ),
                    RunEnd::Reviewed { stop, .. } => (RunResult::Escalated, stop.clone()),
                    _ => (
                        RunResult::Escalated,
                        "the review run ended without a review".to_owned(),
                    ),
                };
                WorkOutcome::Ran {
                    run_id: report.run_id,
                    result,
                    summary,
                    outcome_path: report.outcome_path,
                    cost_usd: Some(report.usage.cost_usd),
                    label: None,
                    claim_lost: None,
                }
            }
            Err(e) => WorkOutcome::Failed {
                error: e.to_string(),
            },
        }
    }

    fn run(&self, job: &Job, label: Option<ForgeMark>) -> WorkOutcome {
        let args = RunArgs {
            repo: job.repo.clone().or_else(|| self.clone.clone()),
            commit: job.commit.clone(),
            issue: job.issue.clone(),
            model: self.model.clone(),
            agent: job.agent.clone(),
            config: self.config.clone(),
            exe: self.exe.clone(),
            fetch: false,
            keep: false,
            progress: self.progress,
        };
        let overrides = Overrides {
            broker: self.broker.clone(),
            answer: job.answer.clone(),
            ..Overrides::default()
        };
        match runner::run_issue(&args, overrides) {
            Ok(report) => ran(&report, label),
            Err(e) => WorkOutcome::Failed {
                error: e.to_string(),
            },
        }
    }
}

fn ran(report: &RunReport, label: Option<ForgeMark>) -> WorkOutcome {
    let (result, summary) = match &report.end {
        RunEnd::NotReady(t) => (RunResult::NotReady, t.reason.clone()),
        RunEnd::Finished {
            outcome,
            pr_queued: true,
            ..
        } => (RunResult::PrQueued, outcome.summary.clone()),
        RunEnd::Finished { outcome, .. } => (RunResult::Escalated, outcome.summary.clone()),
        RunEnd::Parked { outcome, .. } => (RunResult::Parked, outcome.summary.clone()),
        // An issue run never reviews.
        RunEnd::Reviewed { stop, .. } => (RunResult::Escalated, stop.clone()),
    };
    let cost_usd = std::fs::read_to_string(&report.outcome_path)
        .ok()
        .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok())
        .and_then(|v| v["model_usage"]["cost_usd"].as_f64());
    WorkOutcome::Ran {
        run_id: report.run_id.clone(),
        result,
        summary,
        outcome_path: report.outcome_path.clone(),
        cost_usd,
        label,
        claim_lost: None,
    }
}

/// A short timeout for tests and small deployments is fine; a lease under three seconds
/// would renew more often than a second.
pub fn check_lease(lease: Duration) -> Result<Duration> {
    if lease < Duration::from_secs(3) {
        return Err(TriggerError::Usage(format!(
            "--lease must be at least 3s (got {}s)",
            lease.as_secs()
        )));
    }
    Ok(lease)
}

/// Where the broker is, for `what` (claims, follow-ups), which go through it.
fn broker_endpoint(config: &Config, what: &str) -> Result<crate::transport::BrokerEndpoint> {
    config
        .broker
        .endpoint()
        .map_err(|e| TriggerError::Usage(e.to_string()))?
        .ok_or_else(|| {
            TriggerError::Usage(format!(
                "{what} go through the broker: set [broker] socket or url in airlock.toml"
            ))
        })
}
