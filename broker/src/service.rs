//! The broker service: one [`Broker`] serves every connection and [`Broker::handle`] dispatches
//! each protocol request to the module that owns it: run registration (`registration`), the
//! `open_pr` intake and the review intake (`intake`), claims and the shared work queue
//! (`claims`), follow-ups and feedback (`followups`), and decisions and publication
//! (`decisions`). Intakes of one run are serialised, intakes of different runs proceed in
//! parallel.

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex, MutexGuard};

use airlock_audit::Event;
use airlock_schemas::BrokerError;

use crate::config::BrokerConfig;
use crate::error::{Error, Result};
use crate::gates::Gates;
use crate::publish::Forge;
use crate::rules::Rules;
use crate::store::{QueueItem, QueueStatus, Store};
use crate::witness::{self, TestExecutor};
use airlock_protocol::{BrokerReply, Request};

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
    pub(crate) config: BrokerConfig,
    store: Mutex<Box<dyn Store>>,
    pub(crate) rules: Box<dyn Rules>,
    pub(crate) executor: Box<dyn TestExecutor>,
    pub(crate) journal: Box<dyn Journal>,
    pub(crate) forge: Box<dyn Forge>,
    run_locks: Mutex<HashMap<String, Arc<Mutex<()>>>>,
    pub(crate) claim_marks: crate::claims::MarkLimiter,
    pub(crate) witness_slots: witness::WitnessSlots,
    /// The organisation's gates, loaded on first use (`serve` loads them before it listens).
    gates: Mutex<Option<Arc<Gates>>>,
}

pub(crate) fn lock<T: ?Sized>(m: &Mutex<T>) -> MutexGuard<'_, T> {
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

    /// The configuration.
    pub fn config(&self) -> &BrokerConfig {
        &self.config
    }

    /// The store, for one call (each store method is one transaction).
    pub(crate) fn store(&self) -> MutexGuard<'_, Box<dyn Store>> {
        lock(&self.store)
    }

    /// The lock that serialises the intakes of one run.
    pub(crate) fn run_lock(&self, run_id: &str) -> Arc<Mutex<()>> {
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
                findings,
            } => self.open_pr_reported(
                &run_id,
                &request_id,
                args.get(),
                change.as_deref(),
                &network_blocked,
                &findings,
            ),
            Request::Decision { run_id } => self.decision(&run_id),
            Request::ReportFindings { run_id, findings } => {
                self.report_findings(&run_id, &findings)
            }
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
            Request::JudgeSubjects(select) => self
                .judge_subjects(&select)
                .map(|subjects| BrokerReply::Subjects { subjects }),
            Request::JudgeScore(score) => self
                .record_judge_score(&score)
                .map(|queue_id| BrokerReply::ScoreRecorded { queue_id }),
            Request::Preflight(preflight) => self.preflight(&preflight),
            Request::AskQuestion(question) => self.ask_question(&question),
            Request::OpenQuestion(lookup) => self.open_question(&lookup),
            Request::CloseQuestion(reply) => self.close_question(&reply),
        };
        result.unwrap_or_else(|e| BrokerReply::Failed {
            message: e.to_string(),
        })
    }
}

pub use crate::publish::open_clone;

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
