//! The `open_pr` intake: a pipeline of typed stages, each taking the previous stage's output
//! and answering the next one's or a [`Refusal`], so nothing the run claims is believed before
//! the stage that checks it. Operational failures halt it unanswered (the request can be
//! retried); refusals are recorded and returned. The module list below (one declaration per
//! paragraph, so that no formatter sorts it), read top to bottom, is the trust argument, one
//! line per stage here:
//!
//! - `refusal`: not a stage: the typed verdict every stage may answer; it imports no stage.
//! - `admission`: the run may still submit: no accepted open_pr, not ended, a follow-up on its head.
//! - `schema`: the arguments are an `open_pr` call, parsed once into its type.
//! - `identity`: the call is the run's own: its issue, its pin.
//! - `tree`: the tree is the broker's: the worktree under the runs root, or rebuilt on the pin.
//! - `policy`: the broker's own change set keeps the write allowlist and the shared rules.
//! - `digest`: every claimed digest field is the broker's recomputation.
//! - `gates`: the organisation's gates allow the diff.
//! - `witness`: the tests, run in the sandbox on trees from the broker's clone, show the fix.
//! - `queue`: one accepted open_pr per run; the approver is shown the broker's evidence.
//! - `review`: a reviewer agent's review: schema, the forge's head, the broker's diff, queue.
//!
//! Before any of them, at the door, the call's shape is checked against the registration
//! (`tree::check_shape`: a change carried exactly when the run registered `tree = bytes`).

mod refusal;

mod admission;

mod schema;

mod identity;

mod tree;

mod policy;

mod digest;

mod gates;

mod witness;

pub(crate) mod queue;

pub mod review;

use airlock_audit::Event;
use airlock_schemas::OpenPr;
use sha2::{Digest, Sha256};

pub use queue::FinishIntake;
pub(crate) use witness::warm_base;

/// What a run reports with its `open_pr`, as data: stored on the queue item and shown to the
/// approver attributed to the run; the intake decides nothing on it.
#[derive(Debug, Clone, Copy, Default)]
pub struct RunReport<'a> {
    /// What its egress proxy refused its own test runs.
    pub network_blocked: &'a [airlock_policies::network::BlockedAttempt],
    /// What its screening and its model reported seeing.
    pub findings: &'a [airlock_protocol::ItemFinding],
}
pub use refusal::{Halt, Refusal, Stage, Subject};

use crate::error::{Error, Result};
use crate::service::{Broker, lock, unix_now};
use crate::store::{IntakeOutcome, IntakeReply, IntakeStart, NewQueueItem, RunState};
use airlock_protocol::{BrokerReply, RunRegistration, SubmittedChange, TreeTransfer};

impl Broker {
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
        self.open_pr_reported(run_id, request_id, args, change, &[], &[])
    }

    /// [`Broker::open_pr_with_change`] with what the run reports (its egress proxy's refusals,
    /// its screening's findings): stored on the queue item and shown, attributed to the run;
    /// nothing is decided on it.
    pub fn open_pr_reported(
        &self,
        run_id: &str,
        request_id: &str,
        args: &str,
        change: Option<&SubmittedChange>,
        network_blocked: &[airlock_policies::network::BlockedAttempt],
        findings: &[airlock_protocol::ItemFinding],
    ) -> Result<BrokerReply> {
        let report = RunReport {
            network_blocked,
            findings,
        };
        let run_lock = self.run_lock(run_id);
        let _serialised = lock(&run_lock);
        let run = self
            .store()
            .run(run_id)?
            .ok_or_else(|| Error::UnknownRun(run_id.to_owned()))?;
        if let Err(refusal) = tree::check_shape(&run.registration, change) {
            return Ok(BrokerReply::Refused {
                error: refusal.into_broker_error(),
            });
        }
        let start = self
            .store()
            .begin_intake(run_id, request_id, args, unix_now())?;
        let (received_at, resumed) = match start {
            IntakeStart::Completed(reply) => return Ok(reply.into()),
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
            IntakeOutcome::Refuse(
                Refusal::policy(
                    "open_pr",
                    "intake_abandoned",
                    &format!(
                        "this open_pr arrived {late} s ago and its intake was cut short (the \
                         broker stopped); the run's reconnect window is {window} s, so its \
                         supervisor has given up and the intake is abandoned instead of \
                         queued; start a new run"
                    ),
                )
                .into_broker_error(),
            )
        } else {
            match self.evaluate(&run.registration, run.state, args, change, report) {
                Ok(item) => IntakeOutcome::Queue(Box::new(item)),
                Err(Halt::Refused(refusal)) => IntakeOutcome::Refuse(refusal.into_broker_error()),
                Err(Halt::Failed(e)) => return Err(e),
            }
        };
        let reply = queue::record(&mut **self.store(), run_id, request_id, outcome, unix_now())?;
        let (code, detail) = match &reply {
            IntakeReply::Queued { queue_id } => {
                ("QUEUED".to_owned(), Some(format!("queue item {queue_id}")))
            }
            IntakeReply::Refused { error } => {
                (error.code.as_str().to_owned(), Some(error.message.clone()))
            }
        };
        self.journal
            .record(run_id, Event::BrokerDecision { code, detail })?;
        Ok(reply.into())
    }

    /// The stages in order, each on the previous one's output.
    fn evaluate(
        &self,
        run: &RunRegistration,
        state: RunState,
        args: &str,
        change: Option<&SubmittedChange>,
        report: RunReport<'_>,
    ) -> Stage<NewQueueItem> {
        admission::admit(self, run, state)?;
        let call = match schema::parse(args) {
            Err(Halt::Refused(Refusal::Schema {
                subject,
                violations,
                ..
            })) => {
                let weakenings =
                    digest::weakenings_behind(&self.config, &*self.rules, run, change, &violations);
                return Err(Refusal::Schema {
                    subject,
                    violations,
                    weakenings,
                }
                .into());
            }
            parsed => parsed?,
        };
        let call = identity::of_run(run, call)?;
        let checkout = tree::materialize(&self.config, run, call, change)?;
        let allowed = policy::check(&*self.rules, run, checkout)?;
        let digested = digest::recompute(&*self.rules, &*self.journal, run, allowed)?;
        let gated = gates::check(&*self.gates()?, &*self.journal, run, digested)?;
        let bench = witness::WitnessBench {
            config: &self.config,
            rules: &*self.rules,
            executor: &*self.executor,
            slots: &self.witness_slots,
            journal: &*self.journal,
        };
        let witnessed = witness::run(&bench, run, gated)?;
        Ok(queue::assemble(run, args, report, witnessed))
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
}
