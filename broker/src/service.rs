//! The broker's request handling: run registration, open_pr intake in the fixed order, decision
//! polling, and the approver's actions. One [`Broker`] serves every connection; intakes of one
//! run are serialised, intakes of different runs proceed in parallel.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

use airlock_audit::Event;
use airlock_schemas::{BrokerError, OpenPr, Review};
use sha2::{Digest, Sha256};

use crate::changes::{self, ChangeSet};
use crate::config::BrokerConfig;
use crate::error::{Error, Result};
use crate::gates::{GateNote, Gates};
use crate::protocol::{
    BrokerReply, ChangeKind, ClaimEnd, ClaimRelease, ClaimRequest, ClaimStatus, ForgeMark,
    IssueKey, Request, ReviewSubmission, RunRegistration, SubmittedChange, TakeWork, TreeTransfer,
};
use crate::publish::{self, Forge};
use crate::rules::Rules;
use crate::store::{
    ClaimAttempt, Decision, IntakeOutcome, IntakeStart, JudgeScore, NewQueueItem, QueueItem,
    QueueStatus, ReviewItem, ReviewQueueing, RunRecord, RunState, Store,
};
use crate::witness::{self, TestExecutor, WitnessPlan};

/// Where audit events go. Production: the tamper-evident log of `airlock-audit`.
pub trait Journal: Send + Sync {
    /// Append `event` for `run_id`.
    fn record(&self, run_id: &str, event: Event) -> Result<()>;
}

/// [`Journal`] over an `airlock-audit` log file.
pub struct AuditJournal {
    log: airlock_audit::AuditLog,
}

impl AuditJournal {
    /// Open (creating if needed) the audit log at `path`.
    pub fn open(path: &Path) -> Result<Self> {
        if let Some(parent) = path.parent()
            && !parent.as_os_str().is_empty()
        {
            std::fs::create_dir_all(parent)
                .map_err(Error::io(format!("creating {}", parent.display())))?;
        }
        let log = airlock_audit::AuditLog::open(path).map_err(|e| Error::Audit(e.to_string()))?;
        Ok(AuditJournal { log })
    }
}

impl Journal for AuditJournal {
    fn record(&self, run_id: &str, event: Event) -> Result<()> {
        self.log
            .append(run_id, event)
            .map(|_| ())
            .map_err(|e| Error::Audit(e.to_string()))
    }
}

/// Unix seconds now.
pub fn unix_now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}

pub use airlock_protocol::request_id_for;

/// The broker service.
pub struct Broker {
    config: BrokerConfig,
    store: Mutex<Box<dyn Store>>,
    rules: Box<dyn Rules>,
    executor: Box<dyn TestExecutor>,
    journal: Box<dyn Journal>,
    forge: Box<dyn Forge>,
    run_locks: Mutex<HashMap<String, Arc<Mutex<()>>>>,
    claim_marks: crate::claims::MarkLimiter,
    witness_slots: witness::WitnessSlots,
    /// The organisation's gates, loaded on first use (`serve` loads them before it listens).
    gates: Mutex<Option<Arc<Gates>>>,
}

fn lock<T: ?Sized>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panicking holder cannot leave the store half-written (SQLite transactions), so the
    // data behind a poisoned lock is still consistent.
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl Broker {
    /// Assemble a broker from its parts.
    pub fn new(
        config: BrokerConfig,
        store: Box<dyn Store>,
        rules: Box<dyn Rules>,
        executor: Box<dyn TestExecutor>,
        journal: Box<dyn Journal>,
        forge: Box<dyn Forge>,
    ) -> Self {
        Broker {
            witness_slots: witness::WitnessSlots::new(config.witness_concurrency),
            config,
            store: Mutex::new(store),
            rules,
            executor,
            journal,
            forge,
            run_locks: Mutex::new(HashMap::new()),
            claim_marks: crate::claims::MarkLimiter::default(),
            gates: Mutex::new(None),
        }
    }

    /// Every repository's gates, loaded and their examples checked the first time they are
    /// needed; a gate that does not load is an error every time, never a gate skipped.
    pub fn gates(&self) -> Result<Arc<Gates>> {
        let mut slot = lock(&self.gates);
        if let Some(gates) = &*slot {
            return Ok(Arc::clone(gates));
        }
        let gates = Arc::new(Gates::load(&self.config)?);
        *slot = Some(Arc::clone(&gates));
        Ok(gates)
    }

    /// Run `repository`'s gates in order on the broker's own change set, recording each
    /// verdict in the audit log. The first deny (a gate's own, or a failure: trap, fuel,
    /// memory, timeout) refuses the diff as POLICY_VIOLATION naming the gate; otherwise the
    /// flags and routes are what the queue item keeps.
    fn run_gates(
        &self,
        run: &RunRegistration,
        call: &OpenPr,
        computed: &airlock_schemas::DiffDigest,
        repo: &git2::Repository,
        pin: git2::Oid,
        changes: &ChangeSet,
    ) -> Result<std::result::Result<Vec<GateNote>, BrokerError>> {
        let gates = self.gates()?;
        let gates = gates.of(&run.repository);
        if gates.is_empty() {
            return Ok(Ok(Vec::new()));
        }
        let request = airlock_gates::GateRequest::for_open_pr(
            &run.repository,
            call,
            computed.clone(),
            crate::gates::gate_files(repo, pin, changes)?,
        );
        let mut notes = Vec::new();
        for gate in gates {
            let outcome = gate.check(&request);
            self.journal.record(
                &run.run_id,
                Event::GateVerdict {
                    gate: gate.name().to_owned(),
                    digest: gate.digest().to_owned(),
                    verdict: outcome.verdict.kind().as_str().to_owned(),
                    message: outcome.verdict.message().map(str::to_owned),
                    failure: outcome.failure.as_ref().map(|f| f.code().to_owned()),
                    fuel_consumed: outcome.fuel_consumed,
                },
            )?;
            match outcome.verdict {
                airlock_gates::Verdict::Allow => {}
                airlock_gates::Verdict::Deny(reason) => {
                    return Ok(Err(BrokerError::gate_denied(
                        gate.name(),
                        gate.digest(),
                        &reason,
                    )));
                }
                verdict => notes.push(GateNote {
                    gate: gate.name().to_owned(),
                    digest: gate.digest().to_owned(),
                    verdict,
                }),
            }
        }
        Ok(Ok(notes))
    }

    /// The configuration.
    pub fn config(&self) -> &BrokerConfig {
        &self.config
    }

    fn store(&self) -> MutexGuard<'_, Box<dyn Store>> {
        lock(&self.store)
    }

    fn run_lock(&self, run_id: &str) -> Arc<Mutex<()>> {
        lock(&self.run_locks)
            .entry(run_id.to_owned())
            .or_insert_with(|| Arc::new(Mutex::new(())))
            .clone()
    }

    /// Answer one protocol request. Operational failures become [`BrokerReply::Failed`].
    pub fn handle(&self, request: Request) -> BrokerReply {
        let result = match request {
            Request::RegisterRun(run) => self
                .register_run(&run)
                .map(|()| BrokerReply::Registered { run_id: run.run_id }),
            Request::OpenPr {
                run_id,
                request_id,
                args,
                change,
                network_blocked,
            } => self.open_pr_reported(
                &run_id,
                &request_id,
                args.get(),
                change.as_deref(),
                &network_blocked,
            ),
            Request::Decision { run_id } => self.decision(&run_id),
            Request::Claim(claim) => self.claim(&claim, false),
            Request::RenewClaim(claim) => self.claim(&claim, true),
            Request::ReleaseClaim(release) => self.release_claim(&release),
            Request::FollowUp { queue_id } => {
                self.follow_up(queue_id).map(|brief| BrokerReply::FollowUp {
                    brief: Box::new(brief),
                })
            }
            Request::PrFeedback(feedback) => {
                self.pr_feedback(&feedback)
                    .map(|brief| BrokerReply::FollowUp {
                        brief: Box::new(brief),
                    })
            }
            Request::SubmitReview(submission) => self.submit_review(&submission),
            Request::TakeWork(take) => self.take_work(&take),
            Request::EnqueueWork(enqueue) => self
                .enqueue_work(&enqueue.issues, &enqueue.by)
                .map(|added| BrokerReply::Enqueued { added }),
        };
        result.unwrap_or_else(|e| BrokerReply::Failed {
            message: e.to_string(),
        })
    }

    /// Claim an issue (`renewal`: only extend a lease the holder has). A newly acquired claim
    /// puts [`crate::claims::CLAIM_LABEL`] on the issue, best effort: the claim is the store's
    /// row, the label only shows it, so a forge failure is reported, not fatal.
    pub fn claim(&self, request: &ClaimRequest, renewal: bool) -> Result<BrokerReply> {
        crate::claims::check_request(
            &self.config,
            &request.issue,
            &request.holder,
            Some(request.lease_secs),
        )?;
        let attempt = if renewal {
            self.store().renew_claim(request, unix_now())?
        } else {
            self.store().claim(request, unix_now())?
        };
        Ok(match attempt {
            ClaimAttempt::Acquired(claim) => {
                let forge = self.mark_claim(&claim.issue, true);
                self.journal_claim(&claim, "acquired", &forge)?;
                BrokerReply::Claimed {
                    claim,
                    acquired: true,
                    forge,
                }
            }
            ClaimAttempt::Renewed(claim) => BrokerReply::Claimed {
                claim,
                acquired: false,
                forge: ForgeMark::Unchanged,
            },
            ClaimAttempt::Taken(claim) => BrokerReply::ClaimTaken { claim },
        })
    }

    /// Take the oldest ready issue of the shared work queue for `take.holder` (a claim with a
    /// lease, labelled on the forge like any claim), or [`BrokerReply::NoWork`].
    pub fn take_work(&self, take: &TakeWork) -> Result<BrokerReply> {
        crate::claims::check_holder(&take.holder, Some(take.lease_secs))?;
        if let Some(repository) = &take.repository
            && !self.config.repositories.contains_key(repository)
        {
            return Err(Error::Claim(format!(
                "repository {repository:?} is not configured in broker.toml"
            )));
        }
        let taken = self.store().take_work(
            &take.holder,
            take.lease_secs,
            take.repository.as_deref(),
            unix_now(),
        )?;
        let Some(claim) = taken else {
            return Ok(BrokerReply::NoWork);
        };
        let forge = self.mark_claim(&claim.issue, true);
        self.journal_claim(&claim, "acquired", &forge)?;
        Ok(BrokerReply::Claimed {
            claim,
            acquired: true,
            forge,
        })
    }

    /// Put issues on the shared work queue (`airlock-broker work add`): each must be an issue
    /// of a repository this broker serves. Returns how many were not queued already.
    pub fn enqueue_work(&self, issues: &[IssueKey], by: &str) -> Result<usize> {
        if issues.len() > MAX_ENQUEUE {
            return Err(Error::Claim(format!(
                "{} issues in one request; queue at most {MAX_ENQUEUE} at a time",
                issues.len()
            )));
        }
        for issue in issues {
            crate::claims::check_request(&self.config, issue, by, None)?;
        }
        let added = self.store().enqueue_work(issues, unix_now())?;
        for issue in issues {
            self.journal.record(
                &format!("claim:{}#{}", issue.repository, issue.issue_number),
                Event::Claim {
                    repository: issue.repository.clone(),
                    issue_number: issue.issue_number,
                    holder: by.to_owned(),
                    change: "enqueued".to_owned(),
                    label: "unchanged".to_owned(),
                },
            )?;
        }
        Ok(added)
    }

    /// The shared work queue, oldest first, each issue with its claim.
    pub fn work(&self) -> Result<Vec<crate::store::WorkEntry>> {
        self.store().work()
    }

    /// End a claim; an abandoned one has its label taken off (a done one keeps it: the issue
    /// was worked on, and its pull request says how).
    pub fn release_claim(&self, release: &ClaimRelease) -> Result<BrokerReply> {
        crate::claims::check_request(&self.config, &release.issue, &release.holder, None)?;
        let claim = self.store().release_claim(release, unix_now())?;
        let (forge, change) = match release.end {
            ClaimEnd::Done => (ForgeMark::Unchanged, "done"),
            ClaimEnd::Abandoned => (self.mark_claim(&claim.issue, false), "abandoned"),
        };
        self.journal_claim(&claim, change, &forge)?;
        Ok(BrokerReply::Released { claim, forge })
    }

    /// The audit log's `claim` record of a change to `claim`.
    fn journal_claim(&self, claim: &ClaimStatus, change: &str, forge: &ForgeMark) -> Result<()> {
        let label = match forge {
            ForgeMark::Posted => "posted".to_owned(),
            ForgeMark::Unchanged => "unchanged".to_owned(),
            ForgeMark::NotConfigured => "not_configured".to_owned(),
            ForgeMark::RateLimited => "rate_limited".to_owned(),
            ForgeMark::Failed { message } => format!("failed: {message}"),
        };
        self.journal.record(
            &format!(
                "claim:{}#{}",
                claim.issue.repository, claim.issue.issue_number
            ),
            Event::Claim {
                repository: claim.issue.repository.clone(),
                issue_number: claim.issue.issue_number,
                holder: claim.holder.clone(),
                change: change.to_owned(),
                label,
            },
        )
    }

    /// Every claim the store holds.
    pub fn claims(&self) -> Result<Vec<ClaimStatus>> {
        self.store().claims()
    }

    fn mark_claim(&self, issue: &IssueKey, claimed: bool) -> ForgeMark {
        let Some(cfg) = self.config.repositories.get(&issue.repository) else {
            return ForgeMark::NotConfigured;
        };
        if cfg.forge_token_env.is_none() {
            return ForgeMark::NotConfigured;
        }
        if !self
            .claim_marks
            .allow(&issue.repository, std::time::Instant::now())
        {
            return ForgeMark::RateLimited;
        }
        match self
            .forge
            .mark_claimed(&issue.repository, cfg, issue.issue_number, claimed)
        {
            Ok(true) => ForgeMark::Posted,
            Ok(false) => ForgeMark::NotConfigured,
            Err(e) => ForgeMark::Failed {
                message: e.to_string(),
            },
        }
    }

    /// What a follow-up run on queue item `queue_id` starts from: the change request a
    /// reviewer made on it, the issue, and the head the follow-up must start from.
    pub fn follow_up(&self, queue_id: i64) -> Result<airlock_protocol::FollowUpBrief> {
        let item = self
            .store()
            .queue_item(queue_id)?
            .ok_or(Error::UnknownQueueItem(queue_id))?;
        let request = self.store().change_request(queue_id)?.ok_or_else(|| {
            Error::Protocol(format!(
                "no change request on queue item {queue_id}: `airlock-broker request-changes \
                 {queue_id} --feedback TEXT` records one"
            ))
        })?;
        let issue = self
            .store()
            .run(&item.run_id)?
            .and_then(|r| r.registration.issue);
        let lineage = self.lineage(&item)?;
        let base_commit = self.follow_up_base(&item, lineage.as_ref())?;
        Ok(airlock_protocol::FollowUpBrief {
            queue_id,
            repository: item.item.repository.clone(),
            issue_id: item.item.issue_id.clone(),
            issue_number: item.issue_number,
            issue,
            base_commit,
            branch: lineage.as_ref().map(|l| l.branch.clone()),
            pr_url: lineage.and_then(|l| l.pr_url),
            feedback: request.feedback,
            requested_by: request.requested_by,
        })
    }

    /// A reviewer acted on pull request `feedback.pull_request` (a webhook saw it): read the
    /// review or comment from the forge, check it, record it as a change request on the pull
    /// request's latest published queue item, and answer what the follow-up starts from.
    ///
    /// Nothing the asker says is believed: the pull request must be one this broker opened (its
    /// queue, not a heading in the pull request's body, says so), the text is the forge's, a
    /// review must request changes, its author's `author_association` must be in the
    /// repository's `feedback_from`, and no follow-up of the same pull request may be waiting
    /// for a decision.
    pub fn pr_feedback(
        &self,
        feedback: &airlock_protocol::PrFeedback,
    ) -> Result<airlock_protocol::FollowUpBrief> {
        let refused = |why: String| Error::FeedbackRefused(why);
        let (name, cfg) = self
            .config
            .repositories
            .iter()
            .find(|(name, cfg)| {
                cfg.forge_slug(name)
                    .eq_ignore_ascii_case(&feedback.forge_repo)
            })
            .ok_or_else(|| {
                refused(format!(
                    "{:?} is no repository of broker.toml (by name or forge_repo)",
                    feedback.forge_repo
                ))
            })?;
        let n = feedback.pull_request;
        let queue = self.store().queue()?;
        let ours = |i: &QueueItem| {
            i.item.repository == *name
                && i.pr_url
                    .as_deref()
                    .and_then(|u| u.trim_end_matches('/').rsplit('/').next())
                    .and_then(|n| n.parse::<u64>().ok())
                    == Some(n)
        };
        let item = queue
            .iter()
            .filter(|i| i.status == QueueStatus::Published && ours(i))
            .max_by_key(|i| i.id)
            .cloned()
            .ok_or_else(|| {
                refused(format!(
                    "pull request #{n} of {} was not opened by this broker",
                    feedback.forge_repo
                ))
            })?;
        for waiting in queue.iter().filter(|i| i.status == QueueStatus::Queued) {
            let parent = self
                .store()
                .run(&waiting.run_id)?
                .and_then(|r| r.registration.follow_up_of);
            if let Some(parent) = parent
                && let Some(parent) = self.store().queue_item(parent)?
                && ours(&parent)
            {
                return Err(refused(format!(
                    "queue item {}, a follow-up of pull request #{n}, waits for a decision: \
                     approve or deny it first",
                    waiting.id
                )));
            }
        }
        let read = self
            .forge
            .read_feedback(name, cfg, n, feedback.source)?
            .ok_or_else(|| {
                refused(format!(
                    "no forge token is configured for {name}: the broker cannot read the review \
                     to check it (set forge_token_env)"
                ))
            })?;
        if feedback.source.kind == airlock_protocol::FeedbackKind::Review
            && read.state.as_deref() != Some("CHANGES_REQUESTED")
            && !airlock_protocol::mentions_airlock(&read.text())
        {
            return Err(refused(format!(
                "review {} is {:?}: only a review that requests changes, or that mentions \
                 @airlock, starts a follow-up",
                feedback.source.id,
                read.state.as_deref().unwrap_or("")
            )));
        }
        if !cfg
            .feedback_from
            .iter()
            .any(|a| a.eq_ignore_ascii_case(&read.association))
        {
            return Err(refused(format!(
                "{:?} is {:?} on {}; follow-ups are taken from {} (feedback_from in broker.toml)",
                read.author,
                read.association,
                feedback.forge_repo,
                cfg.feedback_from.join(", ")
            )));
        }
        let text = read.text();
        let by = format!("github:{}", read.author);
        self.request_changes(item.id, &by, &text)?;
        self.follow_up(item.id)
    }

    /// The pushed branch (and its pull request) a queue item belongs to: its own when it was
    /// published, else the one of the item it follows up, if any.
    fn lineage(&self, item: &QueueItem) -> Result<Option<Lineage>> {
        let mut current = item.clone();
        // Each step goes to an older queue item, so the walk ends; the bound guards a damaged
        // store.
        for _ in 0..1000 {
            if current.status == QueueStatus::Published
                && let Some(branch) = &current.branch
            {
                return Ok(Some(Lineage {
                    branch: branch.clone(),
                    pr_url: current.pr_url.clone(),
                }));
            }
            let parent = self
                .store()
                .run(&current.run_id)?
                .and_then(|r| r.registration.follow_up_of);
            let Some(parent) = parent.filter(|p| *p < current.id) else {
                return Ok(None);
            };
            current = self
                .store()
                .queue_item(parent)?
                .ok_or(Error::UnknownQueueItem(parent))?;
        }
        Ok(None)
    }

    /// For a follow-up's queue item, the branch (and pull request) its commit goes to.
    fn follow_up_lineage(&self, item: &QueueItem) -> Result<Option<Lineage>> {
        let follow_up_of = self
            .store()
            .run(&item.run_id)?
            .and_then(|r| r.registration.follow_up_of);
        match follow_up_of {
            Some(parent) => {
                let parent = self
                    .store()
                    .queue_item(parent)?
                    .ok_or(Error::UnknownQueueItem(parent))?;
                self.lineage(&parent)
            }
            None => Ok(None),
        }
    }

    /// The branch approving `item` pushes: a follow-up's lineage branch, else the item's own.
    pub fn branch_to_push(&self, item: &QueueItem) -> Result<String> {
        Ok(match self.follow_up_lineage(item)? {
            Some(l) => l.branch,
            None => publish::branch_name(&item.item.issue_id, item.id),
        })
    }

    /// The head of `branch` as the broker pushed it: the commit of the latest published item
    /// on it.
    fn branch_head(&self, repository: &str, branch: &str) -> Result<Option<String>> {
        Ok(self
            .store()
            .queue()?
            .into_iter()
            .filter(|i| {
                i.status == QueueStatus::Published
                    && i.item.repository == repository
                    && i.branch.as_deref() == Some(branch)
            })
            .max_by_key(|i| i.id)
            .and_then(|i| i.commit))
    }

    /// Where a follow-up of `item` must start: the head of the branch its lineage was pushed
    /// to, or the item's own pin when nothing was published.
    fn follow_up_base(&self, item: &QueueItem, lineage: Option<&Lineage>) -> Result<String> {
        match lineage {
            Some(l) => self
                .branch_head(&item.item.repository, &l.branch)?
                .ok_or_else(|| {
                    Error::Protocol(format!(
                        "branch {} of queue item {} has no published commit",
                        l.branch, item.id
                    ))
                }),
            None => Ok(item.item.base_commit.clone()),
        }
    }

    /// A follow-up's registration is checked against what the broker did: the queue item
    /// exists, changes were requested on it, it is of the same repository and issue, and the
    /// run starts from the head of the branch the broker pushed.
    fn check_follow_up(&self, run: &RunRegistration, queue_id: i64) -> Result<()> {
        let item = self.store().queue_item(queue_id)?.ok_or_else(|| {
            Error::Registration(format!(
                "follow_up_of names queue item {queue_id}, which does not exist"
            ))
        })?;
        if self.store().change_request(queue_id)?.is_none() {
            return Err(Error::Registration(format!(
                "follow_up_of names queue item {queue_id}, on which no changes were requested"
            )));
        }
        if item.item.repository != run.repository || item.item.issue_id != run.issue_id {
            return Err(Error::Registration(format!(
                "queue item {queue_id} is for {} {}, not {} {}",
                item.item.repository, item.item.issue_id, run.repository, run.issue_id
            )));
        }
        let lineage = self.lineage(&item)?;
        let base = self.follow_up_base(&item, lineage.as_ref())?;
        if run.base_commit != base {
            return Err(Error::Registration(format!(
                "a follow-up of queue item {queue_id} must start from {base}, {}; base_commit {} \
                 is not",
                match &lineage {
                    Some(l) => format!("the head of branch {} the broker pushed", l.branch),
                    None => "the item's pin (nothing was published)".to_owned(),
                },
                run.base_commit
            )));
        }
        Ok(())
    }

    /// Record a reviewer's request for changes on queue item `id`, with their feedback (the
    /// follow-up run's input; a person's text, shown to the agent as data). A queued item is
    /// denied with the feedback as the reason (the run is told APPROVAL_DENIED); a published
    /// one stays published, its branch and pull request waiting for the follow-up's commit.
    pub fn request_changes(&self, id: i64, by: &str, feedback: &str) -> Result<QueueItem> {
        let feedback = feedback.trim();
        if feedback.is_empty() || feedback.chars().count() > MAX_FEEDBACK_CHARS {
            return Err(Error::BadFeedback {
                max: MAX_FEEDBACK_CHARS,
            });
        }
        self.expire()?;
        let item = self
            .store()
            .queue_item(id)?
            .ok_or(Error::UnknownQueueItem(id))?;
        let item = match item.status {
            QueueStatus::Queued => self.deny(id, by, &change_request_reason(feedback))?,
            QueueStatus::Published => {
                self.journal.record(
                    &item.run_id,
                    Event::BrokerDecision {
                        code: "CHANGES_REQUESTED".to_owned(),
                        detail: Some(format!(
                            "queue item {id}, branch {}: {by} requested changes",
                            item.branch.as_deref().unwrap_or("")
                        )),
                    },
                )?;
                item
            }
            other => {
                return Err(Error::WrongState {
                    id,
                    status: other.as_str().to_owned(),
                    action: "request changes".to_owned(),
                });
            }
        };
        self.store()
            .record_change_request(id, by, feedback, unix_now())?;
        Ok(item)
    }

    /// Register a run after checking it against the configuration.
    pub fn register_run(&self, run: &RunRegistration) -> Result<()> {
        if run.run_id.trim().is_empty() || run.run_id.len() > 200 {
            return Err(Error::Registration(
                "run_id must be 1 to 200 characters".to_owned(),
            ));
        }
        let repo_cfg = self
            .config
            .repositories
            .get(&run.repository)
            .ok_or_else(|| {
                Error::Registration(format!(
                    "repository {:?} is not configured in broker.toml",
                    run.repository
                ))
            })?;
        if run.base_commit.len() != 40
            || !run
                .base_commit
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
        {
            return Err(Error::Registration(format!(
                "base_commit {:?} is not a full 40-hex commit id",
                run.base_commit
            )));
        }
        let repo = open_clone(&repo_cfg.clone)?;
        let oid =
            git2::Oid::from_str(&run.base_commit).map_err(Error::git("parsing base_commit"))?;
        if repo.find_commit(oid).is_err() {
            // A run pins the forge's head, which this clone may not have fetched yet (a run on
            // another host): fetch the remote's branches once, then look again.
            let token = publish::forge_token(&run.repository, repo_cfg)
                .ok()
                .flatten();
            let fetched = publish::fetch_branches(repo_cfg, token.as_deref());
            let repo = open_clone(&repo_cfg.clone)?;
            repo.find_commit(oid).map_err(|_| {
                Error::Registration(format!(
                    "base_commit {} is not in the broker's clone {}{}",
                    run.base_commit,
                    repo_cfg.clone.display(),
                    match fetched {
                        Ok(()) => format!(", nor on any branch of its remote {}", repo_cfg.remote),
                        Err(e) => format!(" and fetching its remote failed: {e}"),
                    }
                ))
            })?;
        }
        if run.tree == TreeTransfer::Shared {
            self.worktree_under_root(&run.worktree)?;
        }
        if run.issue_id.trim().is_empty() {
            return Err(Error::Registration(
                "issue_id must name the issue the run works on".to_owned(),
            ));
        }
        if run.test_command.is_empty() || run.test_command[0].trim().is_empty() {
            return Err(Error::Registration(
                "test_command must not be empty".to_owned(),
            ));
        }
        run.test_runner
            .check_command(&run.test_command)
            .map_err(Error::Registration)?;
        self.check_test_env(run, repo_cfg)?;
        if let Some(queue_id) = run.follow_up_of {
            self.check_follow_up(run, queue_id)?;
        }
        self.store().register_run(run, unix_now())
    }

    /// The run's test environment is the operator's, but the broker stays in charge of its own
    /// sandbox: every path it grants must exist and lie under `witness_ro` or the repository's
    /// `allow_ro` in `broker.toml` (after resolving symlinks, so a link cannot reach out).
    fn check_test_env(
        &self,
        run: &RunRegistration,
        repo_cfg: &crate::config::RepositoryConfig,
    ) -> Result<()> {
        run.test_env
            .validate()
            .map_err(|e| Error::Registration(format!("test_env: {e}")))?;
        let net = &run.test_env.network;
        if net.mode > self.config.witness_network {
            return Err(Error::Registration(format!(
                "test_env asks for the {} network, wider than this broker lets a witness use \
                 (witness_network = \"{}\"): raise witness_network in broker.toml, or set \
                 [tests] network in airlock.toml to {} or narrower",
                net.mode, self.config.witness_network, self.config.witness_network
            )));
        }
        if let Some(entry) = net
            .allow
            .iter()
            .find(|e| !self.config.witness_allow.contains(e))
        {
            return Err(Error::Registration(format!(
                "test_env allows {entry} through the egress proxy, which broker.toml does not: \
                 add \"{entry}\" to witness_allow, or remove it from [tests] allow in \
                 airlock.toml"
            )));
        }
        let allowed: Vec<PathBuf> = self
            .config
            .witness_ro
            .iter()
            .chain(repo_cfg.allow_ro.iter())
            .filter_map(|p| p.canonicalize().ok())
            .collect();
        for path in run.test_env.granted_paths() {
            let real = path.canonicalize().map_err(|e| {
                Error::Registration(format!(
                    "test_env grants {}, which the broker cannot resolve: {e}",
                    path.display()
                ))
            })?;
            if !allowed.iter().any(|root| real.starts_with(root)) {
                return Err(Error::Registration(format!(
                    "test_env grants {} ({}), which broker.toml does not allow: add it (or a \
                     parent) to [repositories.{:?}] allow_ro or to witness_ro",
                    path.display(),
                    real.display(),
                    run.repository
                )));
            }
        }
        Ok(())
    }

    fn worktree_under_root(&self, worktree: &str) -> Result<PathBuf> {
        let root = self.config.runs_root.canonicalize().map_err(|e| {
            Error::Registration(format!(
                "runs root {}: {e}",
                self.config.runs_root.display()
            ))
        })?;
        let tree = Path::new(worktree)
            .canonicalize()
            .map_err(|e| Error::Registration(format!("worktree {worktree}: {e}")))?;
        if tree == root || !tree.starts_with(&root) {
            return Err(Error::Registration(format!(
                "worktree {} is not under the runs root {}",
                tree.display(),
                root.display()
            )));
        }
        if !tree.is_dir() {
            return Err(Error::Registration(format!(
                "worktree {} is not a directory",
                tree.display()
            )));
        }
        Ok(tree)
    }

    /// Take in one open_pr call. A request already answered gets its stored reply; a request
    /// whose intake was cut short (the broker died) is evaluated again from the start.
    pub fn open_pr(&self, run_id: &str, request_id: &str, args: &str) -> Result<BrokerReply> {
        self.open_pr_with_change(run_id, request_id, args, None)
    }

    /// [`Broker::open_pr`] for a call that may carry the run's change: a run registered with
    /// [`TreeTransfer::Bytes`] must send it with every call, a run with a shared worktree never.
    /// A call of the wrong shape is refused at the door, before anything is recorded, so it
    /// cannot end the run.
    pub fn open_pr_with_change(
        &self,
        run_id: &str,
        request_id: &str,
        args: &str,
        change: Option<&SubmittedChange>,
    ) -> Result<BrokerReply> {
        self.open_pr_reported(run_id, request_id, args, change, &[])
    }

    /// [`Broker::open_pr_with_change`] with what the run reports its egress proxy refused: it
    /// is stored on the queue item and shown, attributed to the run; nothing is decided on it.
    pub fn open_pr_reported(
        &self,
        run_id: &str,
        request_id: &str,
        args: &str,
        change: Option<&SubmittedChange>,
        network_blocked: &[airlock_policies::network::BlockedAttempt],
    ) -> Result<BrokerReply> {
        let run_lock = self.run_lock(run_id);
        let _serialised = lock(&run_lock);
        let run = self
            .store()
            .run(run_id)?
            .ok_or_else(|| Error::UnknownRun(run_id.to_owned()))?;
        match (run.registration.tree, change) {
            (TreeTransfer::Bytes, None) => {
                return Ok(BrokerReply::Refused {
                    error: BrokerError::policy_violation(
                        "change",
                        "change_with_open_pr",
                        "this run registered tree = bytes: its open_pr must carry the change \
                         (a git patch against the pin), which this one does not",
                    ),
                });
            }
            (TreeTransfer::Shared, Some(_)) => {
                return Ok(BrokerReply::Refused {
                    error: BrokerError::policy_violation(
                        "change",
                        "change_with_open_pr",
                        "this run registered a shared worktree: the broker reads the tree \
                         there, and an open_pr of this run carries no change",
                    ),
                });
            }
            _ => {}
        }
        let start = self
            .store()
            .begin_intake(run_id, request_id, args, unix_now())?;
        let (received_at, resumed) = match start {
            IntakeStart::Completed(reply) => return Ok(reply),
            IntakeStart::Run {
                received_at,
                resumed,
            } => (received_at, resumed),
        };
        let parsed: Option<OpenPr> = serde_json::from_str::<serde_json::Value>(args)
            .ok()
            .and_then(|v| serde_json::from_value(v).ok());
        self.journal.record(
            run_id,
            Event::OpenPrSubmitted {
                args_digest: hex::encode(Sha256::digest(args.as_bytes())),
                title: parsed.as_ref().map(|p| p.title.clone()).unwrap_or_default(),
                files_changed: parsed
                    .as_ref()
                    .map(|p| p.diff_digest.files_changed.clone())
                    .unwrap_or_default(),
            },
        )?;
        let window = run.registration.reconnect_window();
        let late = unix_now().saturating_sub(received_at);
        let outcome = if resumed && u64::try_from(late).is_ok_and(|late| late > window) {
            // The supervisor stopped waiting `window` seconds after it lost the connection,
            // which was after the request arrived: queueing now would put a pull request in
            // the queue that the run's outcome says was never made.
            refuse_policy(
                "open_pr",
                "intake_abandoned",
                &format!(
                    "this open_pr arrived {late} s ago and its intake was cut short (the broker \
                     stopped); the run's reconnect window is {window} s, so its supervisor has \
                     given up and the intake is abandoned instead of queued; start a new run"
                ),
            )
        } else {
            self.evaluate(&run.registration, run.state, args, change, network_blocked)?
        };
        let reply = self
            .store()
            .finish_intake(run_id, request_id, outcome, unix_now())?;
        let (code, detail) = match &reply {
            BrokerReply::Queued { queue_id } => {
                ("QUEUED".to_owned(), Some(format!("queue item {queue_id}")))
            }
            BrokerReply::Refused { error } => {
                (error.code.as_str().to_owned(), Some(error.message.clone()))
            }
            other => ("UNEXPECTED".to_owned(), Some(format!("{other:?}"))),
        };
        self.journal
            .record(run_id, Event::BrokerDecision { code, detail })?;
        Ok(reply)
    }

    /// A reviewer agent's review of a pull request: schema → the pull request as the forge has
    /// it (its head must be the one reviewed) → the diff from the merge base to the head,
    /// computed in the broker's own clone from objects it fetched itself → every comment on a
    /// line of that diff → queued for an approver as an item of kind review. A resent
    /// submission of a run that has its item gets that item's reply.
    pub fn submit_review(&self, submission: &ReviewSubmission) -> Result<BrokerReply> {
        let run_id = submission.run_id.as_str();
        let run_lock = self.run_lock(run_id);
        let _serialised = lock(&run_lock);
        let text = submission.review.get();
        let request_id = request_id_for(run_id, text);
        if let Some(item) = self.store().queue_item_for_run(run_id)? {
            return Ok(match reply_for(&item) {
                BrokerReply::Pending { queue_id } => BrokerReply::Queued { queue_id },
                other => other,
            });
        }
        let pull = &submission.pull;
        self.journal.record(
            run_id,
            Event::BrokerDecision {
                code: "REVIEW_SUBMITTED".to_owned(),
                detail: Some(format!("a review of {pull}")),
            },
        )?;
        let outcome = self.evaluate_review(submission)?;
        let (reply, code, detail) = match outcome {
            ReviewIntake::Refuse(error) => {
                let (code, detail) = (error.code.as_str().to_owned(), error.message.clone());
                (BrokerReply::Refused { error }, code, detail)
            }
            ReviewIntake::Queue(queued) => {
                let (item, review) = *queued;
                // The store checks and queues in one transaction, so two runs reviewing the
                // same head (a redelivered event, a second trigger, another broker) queue one
                // review.
                let queueing =
                    self.store()
                        .queue_review(run_id, &request_id, &item, &review, unix_now())?;
                match queueing {
                    ReviewQueueing::HeadReviewed(earlier) => {
                        let error = one_review_per_head(&earlier, pull);
                        let (code, detail) =
                            (error.code.as_str().to_owned(), error.message.clone());
                        (BrokerReply::Refused { error }, code, detail)
                    }
                    ReviewQueueing::Queued(queued) => (
                        BrokerReply::Queued {
                            queue_id: queued.id,
                        },
                        "QUEUED".to_owned(),
                        format!("queue item {} (a review of {pull})", queued.id),
                    ),
                }
            }
        };
        self.journal.record(
            run_id,
            Event::BrokerDecision {
                code,
                detail: Some(detail),
            },
        )?;
        Ok(reply)
    }

    fn evaluate_review(&self, submission: &ReviewSubmission) -> Result<ReviewIntake> {
        let refuse = |offending: &str, rule: &str, reason: &str| {
            Ok(ReviewIntake::Refuse(BrokerError::policy_violation(
                offending, rule, reason,
            )))
        };
        // 1. Schema.
        let review: Review = match airlock_schemas::parse::<Review>(submission.review.get()) {
            Ok(review) => review,
            Err(err) => {
                let violations = err.violations();
                if violations.is_empty() {
                    return Err(Error::Dependency(err.to_string()));
                }
                let mut refusal = BrokerError::schema_invalid(&violations);
                refusal.message =
                    refusal
                        .message
                        .replacen("open_pr arguments fail", "the review fails", 1);
                return Ok(ReviewIntake::Refuse(refusal));
            }
        };
        // 2. The pull request: a configured repository, and its head now the one reviewed.
        let pull = &submission.pull;
        if !is_commit_id(&pull.head_sha) {
            return refuse(
                "pull.head_sha",
                "head_sha_is_a_commit_id",
                &format!(
                    "{:?} is not a full 40-character lowercase hex commit id",
                    pull.head_sha
                ),
            );
        }
        let slug = format!("{}/{}", pull.owner, pull.repo);
        let Some((repository, cfg)) = self
            .config
            .repositories
            .iter()
            .find(|(name, cfg)| cfg.forge_slug(name).eq_ignore_ascii_case(&slug))
        else {
            return refuse(
                "pull",
                "repository_is_configured",
                &format!(
                    "no repository of broker.toml is the forge repository {slug:?}; add \
                     [repositories.\"{slug}\"] (or set forge_repo = \"{slug}\" on one)"
                ),
            );
        };
        // The token, when this process has it (intake reads a private repository with it; a
        // public one is read without).
        let token = publish::forge_token(repository, cfg).ok().flatten();
        let forge_pull = self
            .forge
            .pull_request(cfg, repository, pull.number, token.as_deref())?;
        if forge_pull.head_sha != pull.head_sha {
            return refuse(
                "pull.head_sha",
                "review_of_the_current_head",
                &format!(
                    "the review is of {} but pull request #{} is now at {}: review the \
                     current head",
                    pull.head_sha, pull.number, forge_pull.head_sha
                ),
            );
        }
        // 3. The diff, from the broker's own objects.
        publish::fetch_pull_request(cfg, pull.number, &forge_pull.base_ref, token.as_deref())?;
        let diff = airlock_policies::diffmap::pull_request_diff(
            &cfg.clone,
            &forge_pull.base_sha,
            &forge_pull.head_sha,
        )
        .map_err(|e| Error::Forge(format!("the diff of pull request #{}: {e}", pull.number)))?;
        // 4. Every comment on a line of the diff.
        let off = diff.line_map().off_diff_comments(&review);
        if let Some(first) = off.first() {
            let all: Vec<String> = off.iter().map(ToString::to_string).collect();
            return refuse(
                &format!("comments[{}]", first.index),
                "review_comment_on_a_diff_line",
                &format!(
                    "{} comment(s) are not on a line of the pull request's diff (RIGHT: an \
                     added or context line of the head; LEFT: a removed or context line of the \
                     base, inside a hunk): {}",
                    off.len(),
                    all.join("; ")
                ),
            );
        }
        let title = format!(
            "Review of {slug}#{}: {} ({})",
            pull.number,
            forge_pull.title,
            review.verdict.github_event()
        );
        Ok(ReviewIntake::Queue(Box::new((
            NewQueueItem {
                repository: repository.clone(),
                base_commit: diff.merge_base.clone(),
                issue_id: format!("{slug}#{}", pull.number),
                title,
                args: submission.review.get().to_owned(),
                diff: diff.text,
                digest: serde_json::json!({}),
                evidence: Vec::new(),
                flags: Vec::new(),
                gates: Vec::new(),
                network_blocked: Vec::new(),
            },
            ReviewItem {
                pull: pull.clone(),
                base_sha: forge_pull.base_sha,
                merge_base: diff.merge_base,
                review,
            },
        ))))
    }

    /// schema -> policy -> digest -> gates -> witness -> queue. Operational failures are errors (the
    /// request stays unanswered and can be retried); verdicts are outcomes.
    fn evaluate(
        &self,
        run: &RunRegistration,
        state: RunState,
        args: &str,
        change: Option<&SubmittedChange>,
        network_blocked: &[airlock_policies::network::BlockedAttempt],
    ) -> Result<IntakeOutcome> {
        // 0. Order: one open_pr per run, whatever its arguments.
        match state {
            RunState::Queued => {
                return Ok(refuse_policy(
                    "second_open_pr",
                    "one_open_pr_per_run",
                    "this run already has an accepted open_pr",
                ));
            }
            RunState::Ended => {
                return Ok(refuse_policy(
                    "run_ended",
                    "final_refusal_ends_run",
                    "an earlier final refusal ended this run",
                ));
            }
            RunState::Active => {}
        }
        // A follow-up still starts from the branch head: nothing was published on the branch
        // since it registered.
        if let Some(queue_id) = run.follow_up_of
            && let Err(e) = self.check_follow_up(run, queue_id)
        {
            return Ok(refuse_policy(
                "base_commit",
                "follow_up_on_branch_head",
                &e.to_string(),
            ));
        }
        // 1. Schema.
        let call: OpenPr = match airlock_schemas::parse::<OpenPr>(args) {
            Ok(call) => call,
            Err(err) => {
                let violations = err.violations();
                if violations.is_empty() {
                    return Err(Error::Dependency(err.to_string()));
                }
                let mut refusal = BrokerError::schema_invalid(&violations);
                self.name_the_weakening(run, change, &violations, &mut refusal);
                return Ok(IntakeOutcome::Refuse(refusal));
            }
        };
        // 2. Policy.
        if !run.issue_id.is_empty() && call.issue_id != run.issue_id {
            return Ok(refuse_policy(
                "issue_id",
                "issue_id_is_the_runs",
                &format!(
                    "issue_id {:?} is not the run's issue {:?}",
                    call.issue_id, run.issue_id
                ),
            ));
        }
        if call.base_commit != run.base_commit {
            return Ok(refuse_policy(
                "base_commit",
                "base_commit_is_the_pin",
                &format!(
                    "base_commit {} is not the run's pinned commit {}",
                    call.base_commit, run.base_commit
                ),
            ));
        }
        let repo_cfg = self
            .config
            .repositories
            .get(&run.repository)
            .ok_or_else(|| {
                Error::Registration(format!(
                    "repository {:?} is no longer configured",
                    run.repository
                ))
            })?;
        let repo = open_clone(&repo_cfg.clone)?;
        let pin = git2::Oid::from_str(&run.base_commit).map_err(Error::git("parsing the pin"))?;
        let tree = match self.intake_tree(run, &repo, pin, change)? {
            Ok(tree) => tree,
            Err(refusal) => return Ok(refusal),
        };
        let worktree = tree.path().to_path_buf();
        let is_test = |p: &str| self.rules.is_test_file(p);
        let changes = changes::collect(&repo, pin, &worktree, &is_test)?;
        let changed: Vec<&str> = changes.files.iter().map(|c| c.path.as_str()).collect();
        if let Some(refusal) = self.rules.check_writes(&run.write_allowlist, &changes)? {
            return Ok(IntakeOutcome::Refuse(BrokerError::policy_violation(
                &refusal.path,
                &refusal.rule,
                &refusal.reason,
            )));
        }
        if let Some(refusal) = shadowing_module(&repo, pin, &changes)? {
            return Ok(IntakeOutcome::Refuse(refusal));
        }
        let test_code = test_code_findings(&repo, pin, &changes, &*self.rules)?;
        if let Some(refusal) = test_code_refusal(&test_code) {
            return Ok(IntakeOutcome::Refuse(refusal));
        }
        if run.change == ChangeKind::Docs
            && let Some(refusal) = docs_change_refusal(&changes, &call)
        {
            return Ok(refusal);
        }
        // 3. Digest.
        let (computed, mut flags) = self.rules.digest(&worktree, &run.base_commit)?;
        let fields = call.diff_digest.mismatched_fields(&computed);
        if !fields.is_empty() {
            let claimed_json = serde_json::to_value(&call.diff_digest).unwrap_or_default();
            let computed_json = serde_json::to_value(&computed).unwrap_or_default();
            for field in &fields {
                self.journal.record(
                    &run.run_id,
                    Event::IntegrityViolation {
                        check: format!("diff_digest.{field}"),
                        claimed: claimed_json
                            .get(field)
                            .map(|v| v.to_string())
                            .unwrap_or_default(),
                        computed: computed_json
                            .get(field)
                            .map(|v| v.to_string())
                            .unwrap_or_default(),
                    },
                )?;
            }
            let mut err = BrokerError::digest_mismatch(&call.diff_digest, &computed);
            name_the_weakenings(&mut err, &flags);
            return Ok(IntakeOutcome::Refuse(err));
        }
        let mut digest_files: Vec<&str> =
            computed.files_changed.iter().map(String::as_str).collect();
        digest_files.sort_unstable();
        digest_files.dedup();
        if digest_files != changed {
            return Err(Error::Witness(format!(
                "the broker's own tree changes {changed:?} but the recomputed digest names {digest_files:?}"
            )));
        }
        // 3b. The organisation's gates: after the digest, before the witness, so a denied diff
        // never costs a test run.
        let gate_notes = match self.run_gates(run, &call, &computed, &repo, pin, &changes)? {
            Ok(notes) => notes,
            Err(refusal) => return Ok(IntakeOutcome::Refuse(refusal)),
        };
        // 4. Witness. The claimed fail-to-pass test must be a test of a test file (a pinned or
        // a newly added one), not a function in a new or changed module the runner is told to
        // collect by naming it. A documentation change claims none: its witness is the full
        // suite, unchanged.
        let fail_to_pass = match run.change {
            ChangeKind::Fix => Some(call.test_evidence.before_failing_test.as_str()),
            ChangeKind::Docs => None,
        };
        if let Some(claimed) = fail_to_pass
            && let Some(refusal) = claimed_test_outside_test_files(
                &repo,
                pin,
                &changes,
                &*self.rules,
                run.test_runner,
                claimed,
            )?
        {
            return Ok(refusal);
        }
        let pinned_tests = pinned_test_files(&repo, pin, &*self.rules)?;
        let plan = WitnessPlan {
            test_command: &run.test_command,
            runner: run.test_runner,
            before_failing_test: fail_to_pass,
            timeout: self.config.witness_timeout,
            test_env: &run.test_env,
        };
        let work_dir = self.config.witness_work_dir();
        // Queued behind `witness_concurrency` other witness runs, so N runs submitting at once
        // do not start N test suites together.
        let slot = self.witness_slots.acquire();
        let report = witness::run_witness(
            &repo,
            pin,
            &changes,
            &pinned_tests,
            &plan,
            &*self.executor,
            &work_dir,
        );
        drop(slot);
        let report = report?;
        for out in &report.outputs {
            let result = match (&out.grade, out.exit_code) {
                (_, None) => airlock_audit::TestResult::TimedOut,
                (airlock_policies::testrun::Grade::Invalid(_), _) => {
                    airlock_audit::TestResult::Error
                }
                (_, Some(0)) => airlock_audit::TestResult::Passed,
                _ => airlock_audit::TestResult::Failed,
            };
            let full = out.expect == "green" || out.expect == "inventory";
            self.journal.record(
                &run.run_id,
                Event::TestRun {
                    selector: (!full).then(|| call.test_evidence.before_failing_test.clone()),
                    scope: if full {
                        airlock_audit::TestScope::Full
                    } else {
                        airlock_audit::TestScope::Narrow
                    },
                    result,
                    witness: true,
                },
            )?;
            if !out.blocked.is_empty() {
                self.journal.record(
                    &run.run_id,
                    Event::NetworkBlocked {
                        command: format!("witness {}", out.step),
                        attempts: out
                            .blocked
                            .iter()
                            .map(|b| airlock_audit::BlockedNetwork {
                                target: b.target(),
                                reason: b.reason.to_string(),
                            })
                            .collect(),
                    },
                )?;
            }
        }
        if !report.green {
            let mut err = BrokerError::policy_violation(
                "witness_run",
                "witness_green",
                &format!(
                    "witness not green: {}{}",
                    report.failure.clone().unwrap_or_default(),
                    set_aside_note(&changes, &flags)
                ),
            );
            if let Some(details) = err.details.as_object_mut() {
                details.insert(
                    "outputs".to_owned(),
                    serde_json::to_value(&report.outputs).unwrap_or_default(),
                );
            }
            return Ok(IntakeOutcome::Refuse(err));
        }
        // 5. Queue.
        flags.extend(test_code_flags(&test_code));
        for url in crate::rules::body_urls(&call.body) {
            flags.push(format!(
                "body-url: the body links to {url:?}; open_pr allows no URL other than the issue \
                 link"
            ));
        }
        if call.test_change_reason != airlock_schemas::TestChangeReason::None {
            flags.push(format!(
                "senior-review: test_change_reason is {}",
                serde_json::to_value(call.test_change_reason).unwrap_or_default()
            ));
        }
        flags.sort();
        Ok(IntakeOutcome::Queue(Box::new(NewQueueItem {
            repository: run.repository.clone(),
            base_commit: run.base_commit.clone(),
            issue_id: call.issue_id.clone(),
            title: call.title.clone(),
            args: args.to_owned(),
            diff: changes.diff.clone(),
            digest: serde_json::to_value(&computed).unwrap_or_default(),
            evidence: report.outputs,
            flags,
            gates: gate_notes,
            network_blocked: network_blocked
                .iter()
                .take(airlock_policies::network::MAX_BLOCKED_ATTEMPTS)
                .cloned()
                .collect(),
        })))
    }

    /// The tree an intake checks: the run's worktree on this host, or, for a run that sends
    /// bytes, the tree rebuilt from its patch in the broker's own clone at the pin (in a
    /// `witness-` folder of the witness work directory, removed when the intake ends, and by
    /// `serve`'s clean-up at start when a kill cut the intake short). A change that is
    /// not on the pin, not base64, too large, not a patch, or that does not apply is refused.
    fn intake_tree(
        &self,
        run: &RunRegistration,
        repo: &git2::Repository,
        pin: git2::Oid,
        change: Option<&SubmittedChange>,
    ) -> Result<std::result::Result<IntakeTree, IntakeOutcome>> {
        let change = match (run.tree, change) {
            (TreeTransfer::Shared, _) => {
                return Ok(Ok(IntakeTree::Shared(
                    self.worktree_under_root(&run.worktree)?,
                )));
            }
            (TreeTransfer::Bytes, Some(change)) => change,
            (TreeTransfer::Bytes, None) => {
                return Ok(Err(refuse_policy(
                    "change",
                    "change_with_open_pr",
                    "this run registered tree = bytes: its open_pr must carry the change",
                )));
            }
        };
        if change.base_commit != run.base_commit {
            return Ok(Err(refuse_policy(
                "change.base_commit",
                "change_on_the_pin",
                &format!(
                    "the change is against {:?}, not the run's pinned commit {}",
                    change.base_commit, run.base_commit
                ),
            )));
        }
        let patch = match change.patch() {
            Ok(patch) => patch,
            Err(why) => {
                return Ok(Err(refuse_policy(
                    "change.patch_base64",
                    "change_is_a_patch",
                    &why,
                )));
            }
        };
        let work = self.config.witness_work_dir();
        std::fs::create_dir_all(&work)
            .map_err(Error::io(format!("creating {}", work.display())))?;
        let dir = tempfile::Builder::new()
            .prefix("witness-rebuilt-")
            .tempdir_in(&work)
            .map_err(Error::io(format!(
                "creating a folder in {}",
                work.display()
            )))?;
        let tree = dir.path().join("tree");
        Ok(match changes::rebuild_tree(repo, pin, &patch, &tree)? {
            Ok(()) => Ok(IntakeTree::Rebuilt { _dir: dir, tree }),
            Err(changes::PatchRefused(why)) => Err(refuse_policy(
                "change.patch_base64",
                "change_applies_to_pin",
                &why,
            )),
        })
    }

    /// A schema refusal of a bounded digest field (`assertions_removed`, `skip_markers_added`
    /// over their maximum of 0) names the weakening itself: the detectors' findings of that kind
    /// in the run's diff, file and line, in the message and as `details.findings`. Best effort:
    /// when the digest cannot be computed the refusal stays as the schema made it.
    fn name_the_weakening(
        &self,
        run: &RunRegistration,
        change: Option<&SubmittedChange>,
        violations: &[airlock_schemas::SchemaViolation],
        refusal: &mut BrokerError,
    ) {
        let kinds: Vec<&str> = violations
            .iter()
            .filter_map(|v| match v.pointer.as_str() {
                "/diff_digest/assertions_removed" => Some("assertion-removed"),
                "/diff_digest/skip_markers_added" => Some("skip-marker-added"),
                _ => None,
            })
            .collect();
        if kinds.is_empty() {
            return;
        }
        let Some(repo_cfg) = self.config.repositories.get(&run.repository) else {
            return;
        };
        let (Ok(repo), Ok(pin)) = (
            open_clone(&repo_cfg.clone),
            git2::Oid::from_str(&run.base_commit),
        ) else {
            return;
        };
        let Ok(Ok(tree)) = self.intake_tree(run, &repo, pin, change) else {
            return;
        };
        let Ok((_, flags)) = self.rules.digest(tree.path(), &run.base_commit) else {
            return;
        };
        let findings: Vec<String> = flags
            .into_iter()
            .filter(|f| kinds.iter().any(|k| f.starts_with(&format!("{k} "))))
            .collect();
        if findings.is_empty() {
            return;
        }
        refusal.message = format!(
            "{}; the weakening in the diff: {}",
            refusal.message,
            findings.join("; ")
        );
        if let Some(details) = refusal.details.as_object_mut() {
            details.insert("findings".to_owned(), serde_json::json!(findings));
        }
    }

    /// The state of a run's pull request: pending, approved (with branch and draft PR), or the
    /// refusal that ended it (APPROVAL_DENIED with the reason, APPROVAL_TIMEOUT with the age).
    pub fn decision(&self, run_id: &str) -> Result<BrokerReply> {
        self.expire()?;
        let item = self.store().queue_item_for_run(run_id)?;
        let Some(item) = item else {
            if self.store().run(run_id)?.is_none() {
                return Err(Error::UnknownRun(run_id.to_owned()));
            }
            return Err(Error::Protocol(format!(
                "run {run_id:?} has no queued pull request"
            )));
        };
        Ok(reply_for(&item))
    }

    /// Expire queued items older than the configured age; each expiry is audited.
    pub fn expire(&self) -> Result<Vec<QueueItem>> {
        let now = unix_now();
        let max_age = i64::try_from(self.config.queue_max_age.as_secs()).unwrap_or(i64::MAX);
        let expired = self
            .store()
            .expire_queued_before(now.saturating_sub(max_age), now)?;
        for item in &expired {
            self.journal.record(
                &item.run_id,
                Event::BrokerDecision {
                    code: "APPROVAL_TIMEOUT".to_owned(),
                    detail: Some(format!(
                        "queue item {} expired after {} s",
                        item.id,
                        now - item.queued_at
                    )),
                },
            )?;
        }
        Ok(expired)
    }

    /// Every queue item (after expiring the overdue ones), oldest first.
    pub fn queue(&self) -> Result<Vec<QueueItem>> {
        self.expire()?;
        self.store().queue()
    }

    /// One queue item.
    pub fn queue_item(&self, id: i64) -> Result<QueueItem> {
        self.expire()?;
        self.store()
            .queue_item(id)?
            .ok_or(Error::UnknownQueueItem(id))
    }

    /// The judge's score attached to queue item `id` (by `airlock judge`), if any.
    pub fn judge_score(&self, id: i64) -> Result<Option<JudgeScore>> {
        self.store().judge_score(id)
    }

    /// A registered run, as stored.
    pub fn registered_run(&self, run_id: &str) -> Result<Option<RunRecord>> {
        self.store().run(run_id)
    }

    /// Approve a queued item and publish it. When the repository's `forge_token_env` is
    /// configured but unset or empty in this process, the approval is refused before anything
    /// is recorded or pushed: the item stays queued.
    pub fn approve(&self, id: i64, by: &str) -> Result<QueueItem> {
        self.expire()?;
        let current = self
            .store()
            .queue_item(id)?
            .ok_or(Error::UnknownQueueItem(id))?;
        // Approved before, publication cut short (a crash): finish it rather than refuse.
        if current.status == QueueStatus::Approved {
            return self.publish(id);
        }
        if current.status == QueueStatus::Queued {
            publish::forge_token(&current.item.repository, self.repo_cfg(&current)?)?;
        }
        let item = self
            .store()
            .decide(id, &Decision::Approve { by: by.to_owned() }, unix_now())?;
        self.journal.record(
            &item.run_id,
            Event::Approval {
                reviewer: Some(by.to_owned()),
                reason: None,
            },
        )?;
        self.publish(id)
    }

    fn repo_cfg(&self, item: &QueueItem) -> Result<&crate::config::RepositoryConfig> {
        self.config
            .repositories
            .get(&item.item.repository)
            .ok_or_else(|| {
                Error::Registration(format!(
                    "repository {:?} is no longer configured",
                    item.item.repository
                ))
            })
    }

    /// Give up a queue item whose publication failed (`publish_failed`): a final state, with
    /// who and why, audited; the run's decision becomes APPROVAL_DENIED with the reason.
    pub fn abandon(&self, id: i64, by: &str, reason: &str) -> Result<QueueItem> {
        let reason = reason.trim();
        if reason.is_empty() || reason.contains(['\n', '\r']) {
            return Err(Error::BadReason);
        }
        let item = self.store().abandon(id, by, reason, unix_now())?;
        self.journal.record(
            &item.run_id,
            Event::Denial {
                reviewer: Some(by.to_owned()),
                reason: format!("abandoned queue item {id} after a failed publication: {reason}"),
            },
        )?;
        Ok(item)
    }

    /// Deny a queued item with a one-line reason, which goes back to the run.
    pub fn deny(&self, id: i64, by: &str, reason: &str) -> Result<QueueItem> {
        let reason = reason.trim();
        if reason.is_empty() || reason.contains(['\n', '\r']) {
            return Err(Error::BadReason);
        }
        self.expire()?;
        let item = self.store().decide(
            id,
            &Decision::Deny {
                by: by.to_owned(),
                reason: reason.to_owned(),
            },
            unix_now(),
        )?;
        self.journal.record(
            &item.run_id,
            Event::Denial {
                reviewer: Some(by.to_owned()),
                reason: reason.to_owned(),
            },
        )?;
        Ok(item)
    }

    /// Publish an approved item, or retry one whose publication failed (idempotent: a
    /// publication cut short by a crash resumes). A failure fails only this item: it is left
    /// `publish_failed` with the error (audited), and the error is returned. A missing forge
    /// token is refused before anything is pushed.
    pub fn publish(&self, id: i64) -> Result<QueueItem> {
        let item = self
            .store()
            .queue_item(id)?
            .ok_or(Error::UnknownQueueItem(id))?;
        match item.status {
            QueueStatus::Published => return Ok(item),
            QueueStatus::Approved | QueueStatus::PublishFailed => {}
            _ => {
                return Err(Error::WrongState {
                    id,
                    status: item.status.as_str().to_owned(),
                    action: "publish".to_owned(),
                });
            }
        }
        let outcome = self
            .repo_cfg(&item)
            .map(|cfg| (item.item.repository.clone(), cfg.clone()))
            .and_then(|(repository, cfg)| {
                // Checked before the item moves: a retry without the token stays as it was.
                publish::forge_token(&repository, &cfg)?;
                let item = self.store().retry_publication(id)?;
                self.publish_approved(&repository, &cfg, &item)
            });
        match outcome {
            Ok(()) => {}
            Err(e) => {
                let message = e.to_string();
                if self
                    .store()
                    .queue_item(id)?
                    .is_some_and(|i| i.status == QueueStatus::Approved)
                {
                    self.store().record_publish_failed(id, &message)?;
                    self.journal.record(
                        &item.run_id,
                        Event::BrokerDecision {
                            code: "PUBLISH_FAILED".to_owned(),
                            detail: Some(format!("queue item {id}: {message}")),
                        },
                    )?;
                    return Err(Error::PublishFailed { id, message });
                }
                return Err(e);
            }
        }
        self.store()
            .queue_item(id)?
            .ok_or(Error::UnknownQueueItem(id))
    }

    fn publish_approved(
        &self,
        repository: &str,
        repo_cfg: &crate::config::RepositoryConfig,
        item: &QueueItem,
    ) -> Result<()> {
        let id = item.id;
        if let Some(review) = &item.review {
            // A review is posted, never pushed: one call, by the broker, with its token.
            let url = self.forge.post_review(repo_cfg, repository, review)?;
            self.store().record_published(id, Some(&url))?;
            self.journal.record(
                &item.run_id,
                Event::BrokerDecision {
                    code: "PUBLISHED".to_owned(),
                    detail: Some(format!(
                        "review of {} posted ({}): {url}",
                        review.pull,
                        review.review.verdict.github_event()
                    )),
                },
            )?;
            return Ok(());
        }
        // A follow-up's commit goes on top of the branch its lineage was pushed to, as a
        // fast-forward, and the pull request that branch belongs to shows it: no new one.
        let lineage = self.follow_up_lineage(item)?;
        if let Some(l) = &lineage {
            let head = self.branch_head(repository, &l.branch)?.unwrap_or_default();
            if head != item.item.base_commit {
                return Err(Error::FollowUpStale {
                    id,
                    branch: l.branch.clone(),
                    base: item.item.base_commit.clone(),
                    head,
                });
            }
        }
        let branch = lineage.as_ref().map(|l| l.branch.as_str());
        let pushed = publish::commit_and_push(repository, repo_cfg, item, branch)?;
        self.store()
            .record_push(id, &pushed.branch, &pushed.commit)?;
        let pr_url = match &lineage {
            Some(l) => l.pr_url.clone(),
            None => self.forge.open_draft(repository, repo_cfg, item, &pushed)?,
        };
        self.store().record_published(id, pr_url.as_deref())?;
        let pull = match (&lineage, &pr_url) {
            (Some(_), Some(url)) => format!("; pull request {url} updated"),
            (None, Some(url)) => format!("; draft pull request {url}"),
            _ => String::new(),
        };
        self.journal.record(
            &item.run_id,
            Event::BrokerDecision {
                code: "PUBLISHED".to_owned(),
                detail: Some(format!(
                    "pushed {} at {}{}{pull}",
                    pushed.branch,
                    pushed.commit,
                    if lineage.is_some() {
                        " (a follow-up commit)"
                    } else {
                        ""
                    }
                )),
            },
        )?;
        Ok(())
    }

    /// Evaluate again every open_pr request whose intake a crash cut short, so its reply is
    /// ready when the supervisor resends or polls. Returns how many were answered.
    pub fn resume_intakes(&self) -> Result<usize> {
        let unfinished = self.store().unfinished_intakes()?;
        let mut answered = 0;
        for (run_id, request_id, args) in unfinished {
            // A run that sends bytes resends its change with the same request id within its
            // reconnect window; only that resend has the tree. One that never comes back leaves
            // its run without a queue item, as its outcome says.
            if let Ok(Some(run)) = self.store().run(&run_id)
                && run.registration.tree == TreeTransfer::Bytes
            {
                continue;
            }
            match self.open_pr(&run_id, &request_id, &args) {
                Ok(_) => answered += 1,
                Err(e) => eprintln!("airlock-broker: resuming intake {run_id}/{request_id}: {e}"),
            }
        }
        Ok(answered)
    }

    /// Finish every publication a crash interrupted. Never fails: an item whose publication
    /// fails again is left `publish_failed` and reported on stderr. Returns the ids published.
    pub fn resume_publications(&self) -> Vec<i64> {
        let pending: Vec<i64> = match self.store().queue() {
            Ok(items) => items
                .into_iter()
                .filter(|i| i.status == QueueStatus::Approved)
                .map(|i| i.id)
                .collect(),
            Err(e) => {
                eprintln!("airlock-broker: listing interrupted publications: {e}");
                return Vec::new();
            }
        };
        let mut published = Vec::new();
        for id in pending {
            match self.publish(id) {
                Ok(_) => published.push(id),
                Err(e) => eprintln!("airlock-broker: resuming publications: {e}"),
            }
        }
        published
    }

    /// What is wrong with each configured repository, for `serve` to report at start: the
    /// clone does not open, a pinned commit of an undecided or unpublished item is missing,
    /// or the remote is neither a remote of the clone nor a URL or existing path. Empty when
    /// all is well.
    pub fn check_repositories(&self) -> Vec<(String, String)> {
        let items = self.store().queue().unwrap_or_default();
        let mut problems = Vec::new();
        for (name, cfg) in &self.config.repositories {
            let repo = match open_clone(&cfg.clone) {
                Ok(r) => r,
                Err(e) => {
                    problems.push((name.clone(), e.to_string()));
                    continue;
                }
            };
            for item in items.iter().filter(|i| {
                &i.item.repository == name
                    && matches!(
                        i.status,
                        QueueStatus::Queued | QueueStatus::Approved | QueueStatus::PublishFailed
                    )
            }) {
                let found = git2::Oid::from_str(&item.item.base_commit)
                    .and_then(|oid| repo.find_commit(oid))
                    .is_ok();
                if !found {
                    problems.push((
                        name.clone(),
                        format!(
                            "queue item {}: pinned commit {} is not in the clone {}",
                            item.id,
                            item.item.base_commit,
                            cfg.clone.display()
                        ),
                    ));
                }
            }
            let remote = &cfg.remote;
            let known = repo.find_remote(remote).is_ok()
                || remote.contains("://")
                || (remote.contains(':') && !remote.starts_with('/'))
                || Path::new(remote).exists()
                || cfg.clone.join(remote).exists();
            if !known {
                problems.push((
                    name.clone(),
                    format!(
                        "remote {remote:?} is neither a remote of the clone {} nor a URL or an existing path",
                        cfg.clone.display()
                    ),
                ));
            }
        }
        problems
    }
}

/// For a witness that is not green: the diff's changes to pinned test files, which the witness
/// set aside (they ran as pinned), and the detectors' findings in them, so the refusal names
/// the weakening as well as the pinned test that failed. Empty when the diff changed none.
fn set_aside_note(changes: &changes::ChangeSet, flags: &[String]) -> String {
    let set_aside: Vec<&str> = changes
        .files
        .iter()
        .filter(|c| c.is_test && c.kind != changes::ChangeKind::Added)
        .map(|c| c.path.as_str())
        .collect();
    if set_aside.is_empty() {
        return String::new();
    }
    let findings: Vec<&str> = flags
        .iter()
        .filter(|f| set_aside.iter().any(|p| f.contains(&format!(" {p}:"))))
        .map(String::as_str)
        .collect();
    let mut note = format!(
        "; the diff's changes to pinned tests were set aside (they ran as pinned): {}",
        set_aside.join(", ")
    );
    if !findings.is_empty() {
        note.push_str(&format!(
            "; the detectors found there: {}",
            findings.join("; ")
        ));
    }
    note
}

/// The longest feedback a request for changes takes, in characters.
pub const MAX_FEEDBACK_CHARS: usize = 16_000;

/// The branch (and its pull request) a line of follow-ups is pushed to.
struct Lineage {
    branch: String,
    pr_url: Option<String>,
}

/// The denial reason a request for changes on a queued item becomes: its lines joined into one
/// (a reason is one line), marked as a change request.
pub fn change_request_reason(feedback: &str) -> String {
    let joined = feedback.split_whitespace().collect::<Vec<_>>().join(" ");
    if joined.is_empty() {
        String::new()
    } else {
        format!("changes requested: {joined}")
    }
}

/// What a documentation run's submission may not do, checked on the broker's own change set:
/// touch a test file, or claim a fail-to-pass test (its witness runs none, so the approver
/// must not be shown one as if it had been checked).
fn docs_change_refusal(changes: &ChangeSet, call: &OpenPr) -> Option<IntakeOutcome> {
    if let Some(test) = changes.files.iter().find(|c| c.is_test) {
        return Some(refuse_policy(
            &test.path,
            "docs_change_touches_no_test",
            &format!(
                "{} is a test file; a documentation run changes documentation only",
                test.path
            ),
        ));
    }
    let evidence = &call.test_evidence;
    if !evidence.before_failing_test.is_empty() || !evidence.before_selector.is_empty() {
        return Some(refuse_policy(
            "test_evidence",
            "docs_change_claims_no_test",
            "a documentation run claims no fail-to-pass test (its witness is the full suite, \
             unchanged): leave test_evidence.before_selector and before_failing_test empty",
        ));
    }
    None
}

/// What a review's intake decided.
enum ReviewIntake {
    /// Queue it.
    Queue(Box<(NewQueueItem, ReviewItem)>),
    /// Refused under the error contract.
    Refuse(BrokerError),
}

/// The refusal of a second review of one head commit.
fn one_review_per_head(
    earlier: &QueueItem,
    pull: &airlock_protocol::PullRequestKey,
) -> BrokerError {
    BrokerError::policy_violation(
        "pull.head_sha",
        "one_review_per_head",
        &format!(
            "queue item {} ({}) already reviews {pull}; a pull request is reviewed once per \
             head commit: push a new commit for another review, or deny item {} first",
            earlier.id,
            earlier.status.as_str(),
            earlier.id
        ),
    )
}

/// 40 lower-case hex digits.
fn is_commit_id(text: &str) -> bool {
    text.len() == 40 && text.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

/// The most issues one `enqueue_work` (or `work add`) may queue.
pub const MAX_ENQUEUE: usize = 1000;

/// The tree one intake checks (see `Broker::intake_tree`).
enum IntakeTree {
    /// The run's own worktree, under the runs root.
    Shared(PathBuf),
    /// Rebuilt from the run's patch; the folder goes when the intake ends.
    Rebuilt {
        /// Owns the folder.
        _dir: tempfile::TempDir,
        /// The rebuilt tree in it.
        tree: PathBuf,
    },
}

impl IntakeTree {
    fn path(&self) -> &Path {
        match self {
            IntakeTree::Shared(path) => path,
            IntakeTree::Rebuilt { tree, .. } => tree,
        }
    }
}

fn refuse_policy(offending: &str, rule: &str, reason: &str) -> IntakeOutcome {
    IntakeOutcome::Refuse(BrokerError::policy_violation(offending, rule, reason))
}

/// The reply a run gets for its queue item.
pub fn reply_for(item: &QueueItem) -> BrokerReply {
    match item.status {
        // A failed publication still waits for a human: `publish N` retries, `abandon N` ends.
        QueueStatus::Queued | QueueStatus::Approved | QueueStatus::PublishFailed => {
            BrokerReply::Pending { queue_id: item.id }
        }
        // APPROVAL_DENIED: a human decided the approved change is not to be published, with a
        // reason the run should see; it is final like a denial. APPROVAL_TIMEOUT would claim
        // nobody decided, and no other code of the contract is about a human's decision.
        QueueStatus::Abandoned => BrokerReply::Refused {
            error: BrokerError::approval_denied(&format!(
                "approved, but its publication failed and {} abandoned it: {}",
                item.abandoned_by.as_deref().unwrap_or("the approver"),
                item.abandon_reason.as_deref().unwrap_or("")
            )),
        },
        QueueStatus::Published => BrokerReply::Approved {
            queue_id: item.id,
            branch: item.branch.clone().unwrap_or_default(),
            commit: item.commit.clone().unwrap_or_default(),
            pr_url: item.pr_url.clone(),
        },
        QueueStatus::Denied => BrokerReply::Refused {
            error: BrokerError::approval_denied(item.reason.as_deref().unwrap_or("")),
        },
        QueueStatus::Expired => BrokerReply::Refused {
            error: BrokerError::approval_timeout(
                u64::try_from(item.decided_at.unwrap_or(item.queued_at) - item.queued_at)
                    .unwrap_or(0),
            ),
        },
    }
}

/// Open the broker's own clone.
pub fn open_clone(path: &Path) -> Result<git2::Repository> {
    git2::Repository::open(path).map_err(Error::git(format!(
        "opening the broker's clone {}",
        path.display()
    )))
}

/// A refusal when `test` (the claimed `before_failing_test`) resolves to a file of the
/// patched tree (the pin with the diff's additions and deletions) that is not a test file.
/// An id that resolves to no file is left to the witness, which finds it among no results.
fn claimed_test_outside_test_files(
    repo: &git2::Repository,
    pin: git2::Oid,
    changes: &changes::ChangeSet,
    rules: &dyn Rules,
    runner: airlock_policies::testrun::TestRunner,
    test: &str,
) -> Result<Option<IntakeOutcome>> {
    let tree = repo
        .find_commit(pin)
        .and_then(|c| c.tree())
        .map_err(Error::git("reading the pinned tree"))?;
    let is_file = |path: &str| match changes.files.iter().find(|c| c.path == path) {
        Some(change) => change.kind != changes::ChangeKind::Deleted,
        None => tree
            .get_path(Path::new(path))
            .is_ok_and(|e| e.kind() == Some(git2::ObjectType::Blob)),
    };
    let Some(file) = runner.file_of_test(test, is_file) else {
        return Ok(None);
    };
    if rules.is_test_file(&file) {
        return Ok(None);
    }
    Ok(Some(refuse_policy(
        "test_evidence.before_failing_test",
        "claimed_test_in_a_test_file",
        &format!(
            "the claimed before_failing_test {test:?} resolves to {file}, which is not a test \
             file: the fail-to-pass test must live in a pinned or newly added test file"
        ),
    )))
}

fn pinned_test_files(
    repo: &git2::Repository,
    pin: git2::Oid,
    rules: &dyn Rules,
) -> Result<Vec<String>> {
    let tree = repo
        .find_commit(pin)
        .and_then(|c| c.tree())
        .map_err(Error::git("reading the pinned tree"))?;
    let mut out = Vec::new();
    tree.walk(git2::TreeWalkMode::PreOrder, |dir, entry| {
        if entry.kind() == Some(git2::ObjectType::Blob)
            && let Ok(name) = entry.name()
        {
            let path = format!("{dir}{name}");
            if rules.is_test_file(&path) {
                out.push(path);
            }
        }
        git2::TreeWalkResult::Ok
    })
    .map_err(Error::git("walking the pinned tree"))?;
    out.sort();
    Ok(out)
}

/// A newly added Python file that would be imported instead of a standard-library or
/// test-runner module (`unittest/__main__.py`, `pytest.py`, `tests/json.py`): refused, since
/// the test run itself would import it.
fn shadowing_module(
    repo: &git2::Repository,
    pin: git2::Oid,
    changes: &changes::ChangeSet,
) -> Result<Option<BrokerError>> {
    let tree = repo
        .find_commit(pin)
        .and_then(|c| c.tree())
        .map_err(Error::git("reading the pinned tree"))?;
    let pinned = |path: &str| tree.get_path(Path::new(path)).is_ok();
    let is_package = |dir: &str| {
        let init = format!("{dir}/__init__.py");
        match changes.files.iter().find(|c| c.path == init) {
            Some(change) => change.kind != changes::ChangeKind::Deleted,
            None => pinned(&init),
        }
    };
    for change in &changes.files {
        if change.kind != changes::ChangeKind::Added {
            continue;
        }
        if let Some(module) =
            airlock_policies::shadowed_python_module(&change.path, &is_package, &pinned)
        {
            return Ok(Some(BrokerError::policy_violation(
                &change.path,
                "shadowing-module",
                &format!(
                    "a new {} would be imported in place of the {module:?} module the tests \
                     (or their runner) import",
                    change.path
                ),
            )));
        }
    }
    Ok(None)
}

/// Every test-code rule that fires on a test file the change adds or modifies (its new text
/// against the pinned one): test infrastructure written as a test file, and import-time patches.
fn test_code_findings(
    repo: &git2::Repository,
    pin: git2::Oid,
    changes: &changes::ChangeSet,
    rules: &dyn Rules,
) -> Result<Vec<airlock_policies::TestCodeFinding>> {
    let tree = repo
        .find_commit(pin)
        .and_then(|c| c.tree())
        .map_err(Error::git("reading the pinned tree"))?;
    let mut out = Vec::new();
    for change in changes.files.iter().filter(|c| c.is_test) {
        let Some(content) = &change.content else {
            continue;
        };
        let old = tree
            .get_path(Path::new(&change.path))
            .ok()
            .and_then(|entry| entry.to_object(repo).ok())
            .and_then(|object| object.peel_to_blob().ok())
            .map(|blob| String::from_utf8_lossy(blob.content()).into_owned());
        let new = String::from_utf8_lossy(content);
        out.extend(rules.check_test_code(&change.path, old.as_deref(), &new));
    }
    Ok(out)
}

/// The first refusing test-code finding as `POLICY_VIOLATION`, naming the file, the line and
/// the rule.
fn test_code_refusal(findings: &[airlock_policies::TestCodeFinding]) -> Option<BrokerError> {
    let f = findings
        .iter()
        .find(|f| f.action == airlock_policies::TestCodeAction::Refuse)?;
    let mut err = BrokerError::policy_violation(
        &f.file,
        &f.rule,
        &format!("line {}: `{}`: {}", f.line, f.excerpt, f.reason),
    );
    if let Some(details) = err.details.as_object_mut() {
        details.insert("line".to_owned(), serde_json::json!(f.line));
    }
    Some(err)
}

/// The flagging test-code findings, as the approver reads them: `rule: file:line: excerpt
/// (reason)`.
fn test_code_flags(findings: &[airlock_policies::TestCodeFinding]) -> Vec<String> {
    findings
        .iter()
        .filter(|f| f.action == airlock_policies::TestCodeAction::Flag)
        .map(|f| {
            format!(
                "{}: {}:{}: `{}` ({})",
                f.rule, f.file, f.line, f.excerpt, f.reason
            )
        })
        .collect()
}

/// A digest mismatch names the weakenings behind the counted fields (file, line, rule and the
/// line itself), not only the numbers.
fn name_the_weakenings(err: &mut BrokerError, detector_flags: &[String]) {
    let counted: Vec<&String> = detector_flags
        .iter()
        .filter(|f| f.starts_with("assertion-removed ") || f.starts_with("skip-marker-added "))
        .collect();
    if counted.is_empty() {
        return;
    }
    err.message.push_str(&format!(
        "; the detectors found: {}",
        counted
            .iter()
            .map(|f| f.as_str())
            .collect::<Vec<_>>()
            .join("; ")
    ));
    if let Some(details) = err.details.as_object_mut() {
        details.insert("findings".to_owned(), serde_json::json!(counted));
    }
}
