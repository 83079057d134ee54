//! One run: triage, the test baseline and the broker registration, then the loop: the warm
//! start, turn after turn of model calls and tool calls under the budgets, and the final
//! message (repaired, or written by the supervisor when a budget ends the run).

use crate::agents::Agent;
use crate::condense::Condenser;
use crate::config::Config;
use crate::delegate::ReaderLauncher;
use crate::intake::IntakeRecord;
use crate::issue::Issue;
use crate::ledger::{Ledger, LedgerError, file_read_event};
use crate::outcome::{self, Judged};
use crate::park::{ParkedOn, ParkedSession};
use crate::ports::{
    Baseline, History, IssueText, PrSink, Retrieval, RunRegistration, TestRunner, ToolFailure,
    Worktree,
};
use crate::progress::Progress;
use crate::prompts;
use crate::reference_repos::ReferenceRepos;
use crate::second_opinion::SecondOpinion;
use crate::tools::{self, Flow, RunSettings, Toolbox};
use crate::trajectory::{
    RunStarted, SkillCallPayload, Trajectory, TrajectoryError, TrajectoryEvent,
};
use crate::triage::{self, Triage, TriageState};
use crate::warm_start::{self, WarmInputs};
use airlock_audit::{
    AuditLog, Event, ReadBy, RunOutcome, ScreenContext, Screened, SourceKind, sha256_hex,
};
use airlock_model::{ChatModel, ChatOptions, ChatRequest, ChatResponse, Message, ToolChoice};
use airlock_policies::Policy;
use airlock_protocol::FollowUpBrief;
use airlock_schemas::{Outcome, OutcomeKind};
use std::collections::BTreeSet;

/// The messages every request of a run begins with, unchanged from the first turn to the last:
/// the system prompt and the warm start. Nothing in them varies between turns (no clock, no
/// counter, no budget left), so the provider's prompt cache serves them after the first turn.
const STABLE_PREFIX_MESSAGES: usize = 2;

/// Errors that stop a run without an outcome (the records could not be kept, the model failed).
#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    /// The trajectory could not be written.
    #[error(transparent)]
    Trajectory(#[from] TrajectoryError),
    /// The audit log refused an event.
    #[error("audit log: {0}")]
    Audit(#[from] airlock_audit::Error),
    /// An embedded contract is broken (a build defect).
    #[error("contract: {0}")]
    Contract(String),
    /// The broker could not register the run.
    #[error("broker: cannot register the run: {0}")]
    Register(String),
    /// The test environment or the base inventory could not be set up (before any model
    /// call).
    #[error("test set-up: {0}")]
    Baseline(#[from] crate::ports::BaselineError),
    /// The model call failed (after the model crate's own retries).
    #[error("model call failed at turn {turn}: {message}")]
    Model {
        /// The supervisor turn.
        turn: u32,
        /// The model crate's error.
        message: String,
    },
}

impl From<LedgerError> for SessionError {
    fn from(e: LedgerError) -> Self {
        match e {
            LedgerError::Trajectory(e) => SessionError::Trajectory(e),
            LedgerError::Audit(e) => SessionError::Audit(e),
        }
    }
}

/// Result alias for a session.
pub type Result<T> = std::result::Result<T, SessionError>;

/// How a run ended.
#[derive(Debug, Clone, PartialEq)]
pub enum RunEnd {
    /// Triage said the issue is not ready; no model call was made.
    NotReady(Triage),
    /// The run produced an outcome (validated against `outcome.json` or written by the
    /// supervisor); `pr_queued` is true only when the broker accepted `open_pr` and the outcome
    /// is `pr`.
    Finished {
        /// The outcome.
        outcome: Outcome,
        /// A pull request is queued for a human.
        pr_queued: bool,
        /// Why the loop stopped (`final_message`, `max_turns`, ...).
        stop: String,
    },
    /// A budget (`max_turns`, `max_full_runs`, the model's) stopped the run before any
    /// `open_pr` was accepted: it is parked, to be resumed with more budget. The outcome is an
    /// escalation (the output contract makes every reached limit one) saying what the run
    /// established and what it would do next.
    Parked {
        /// The outcome: the model's closing summary, or the supervisor's from the record.
        outcome: Outcome,
        /// Why the loop stopped.
        stop: String,
        /// What `airlock resume` continues from.
        parked: Box<ParkedSession>,
    },
    /// A review run (`airlock review`) ended: its review queued for an approver
    /// (`queue_id`), or not (a budget, a refusal, a model that never submitted one).
    Reviewed {
        /// The broker's queue item of the review, when it was queued.
        queue_id: Option<i64>,
        /// Why the loop stopped.
        stop: String,
    },
}

/// What a resumed run continues from: the parked loop and what the operator added (for the
/// records).
#[derive(Debug, Clone)]
pub struct Resumed {
    /// The parked loop (its base inventory included).
    pub session: ParkedSession,
    /// What was added, one line.
    pub added: String,
}

/// What the run is about.
#[derive(Debug, Clone)]
pub struct RunSpec {
    /// The run id (names the run directory and the audit events).
    pub run_id: String,
    /// The repository as the operator gave it.
    pub repo: String,
    /// The pinned 40-hex commit.
    pub base_commit: String,
    /// The issue.
    pub issue: Issue,
    /// Where the issue, the repository and the pin came from (the runner's intake record),
    /// recorded in the trajectory's `run_started` event.
    pub intake: IntakeRecord,
    /// The configuration.
    pub config: Config,
    /// For a follow-up run: the change request it answers (from the broker's `follow_up`).
    pub follow_up: Option<FollowUpBrief>,
    /// The agent: its prompt, its tools, what it submits (its turn cap is already in
    /// `config.budgets.max_turns`, its allowlist in the run's policy).
    pub agent: Agent,
    /// For a run started by the answer to an earlier run's question: what that run
    /// established, which the warm start begins with.
    pub earlier: Option<crate::questions::EarlierRun>,
}

/// The capabilities of the run.
pub struct Env<'a> {
    /// The model.
    pub model: &'a dyn ChatModel,
    /// Retrieval over the checkout.
    pub retrieval: &'a dyn Retrieval,
    /// The merged pull requests up to the pin.
    pub history: &'a dyn History,
    /// The worktree.
    pub worktree: &'a dyn Worktree,
    /// The write policy (allowlist and refused classes).
    pub policy: &'a Policy,
    /// The sandboxed test runner.
    pub tests: &'a dyn TestRunner,
    /// Reader workers.
    pub readers: &'a dyn ReaderLauncher,
    /// The broker.
    pub broker: &'a mut dyn PrSink,
    /// The reference repositories (the run's one `knowledge-reference-repos` call).
    pub references: &'a ReferenceRepos,
    /// The audit log.
    pub audit: &'a AuditLog,
    /// What screening knows of the run: its repository, the tree's blob ids and the findings
    /// the security team dismissed before it started.
    pub screen: &'a ScreenContext,
    /// The operator's security model (`[security_model]`), asked for a second opinion on
    /// findings and borderline spans.
    pub second_opinion: Option<&'a mut SecondOpinion>,
    /// The trajectory.
    pub trajectory: &'a mut Trajectory,
    /// Where progress is shown.
    pub progress: &'a mut Progress,
}

/// Run one issue to its end.
pub fn run(spec: &RunSpec, env: &mut Env<'_>) -> Result<RunEnd> {
    let (baseline, issue_findings) = match start(spec, env)? {
        Start::NotReady(triage) => return Ok(RunEnd::NotReady(triage)),
        Start::Ready(baseline, issue_findings) => (*baseline, issue_findings),
    };
    let issue_text = issue_text(spec);
    let mut session = Session::new(spec, env, baseline);
    session.ledger().note_findings(
        SourceKind::IssueBody,
        &issue_source(spec),
        &issue_findings.findings,
        None,
    )?;
    session.ledger().ask_second_opinion(
        SourceKind::IssueBody,
        &issue_source(spec),
        &issue_text,
        &issue_findings,
    )?;
    let mut end = session.drive()?;
    session.close(&mut end)?;
    Ok(end)
}

/// Continue a parked run: the same registration with the broker, the ledger's state taken up,
/// the parked conversation with a note of what was added, then the loop under the raised
/// budgets.
pub fn resume(spec: &RunSpec, env: &mut Env<'_>, resumed: Resumed) -> Result<RunEnd> {
    let Resumed {
        session: parked,
        added,
    } = resumed;
    let baseline = parked.baseline;
    env.audit.append(
        &spec.run_id,
        Event::RunResumed {
            added: added.clone(),
        },
    )?;
    env.trajectory.record(&TrajectoryEvent::RunResumed {
        added: &added,
        parked_on: parked.budget,
        max_turns: spec.config.budgets.max_turns,
        max_full_runs: spec.config.budgets.max_full_runs,
    })?;
    record_skill_call(spec, env)?;
    // Registered already when the run started: the broker takes identical details as a no-op,
    // and a broker that lost its state learns the run again.
    env.broker
        .register_run(&registration(spec, env, &baseline))
        .map_err(|e| SessionError::Register(e.message))?;
    let mut session = Session::new(spec, env, baseline);
    session.ledger().restore(parked.ledger);
    let budgets = &spec.config.budgets;
    let counts = session.tools.ledger.counts;
    let note = Message::user(prompts::resume_note(
        &added,
        budgets.max_turns.saturating_sub(counts.turns),
        budgets.max_full_runs.saturating_sub(counts.full_runs),
    ));
    session.ledger().record_message(&note)?;
    let mut messages = parked.conversation;
    messages.push(note);
    let mut end = session.turns(messages)?;
    session.close(&mut end)?;
    Ok(end)
}

/// What a review run is of: the pull request at its head, its diff, and its text as the
/// forge gave it (data).
#[derive(Debug, Clone)]
pub struct ReviewTask {
    /// The pull request and the head commit (the run's pinned tree).
    pub pull: airlock_protocol::PullRequestKey,
    /// The pull request's base commit.
    pub base_sha: String,
    /// Its diff, merge base to head, as the supervisor computed it from its mirror.
    pub diff: airlock_policies::diffmap::PullRequestDiff,
}

/// Review a pull request: the same loop as a run, with the `pr-reviewer` agent's definition
/// (its read-only tools and `submit_review`, its prompt), started from the pull request's text, its diff,
/// and the touched code and its callers from retrieval. No triage, tests or registration.
pub fn review(spec: &RunSpec, env: &mut Env<'_>, task: &ReviewTask) -> Result<RunEnd> {
    let config_json = serde_json::to_string(&spec.config).unwrap_or_default();
    env.audit.append(
        &spec.run_id,
        Event::RunStarted {
            repository: spec.repo.clone(),
            commit: spec.base_commit.clone(),
            issue: spec.issue.id.clone(),
            config_digest: sha256_hex(config_json.as_bytes()),
        },
    )?;
    env.trajectory
        .record(&TrajectoryEvent::RunStarted(RunStarted::Review {
            run_id: &spec.run_id,
            agent: &spec.agent.name,
            repo: &spec.repo,
            base_commit: &spec.base_commit,
            pull: &task.pull,
            pull_base: &task.base_sha,
            merge_base: &task.diff.merge_base,
            model: env.model.name(),
            system_prompt: prompts::version_of(&spec.agent.prompt),
            intake: &spec.intake,
        }))?;
    let pr_text = issue_text(spec);
    let source = format!("pr:{}", task.pull);
    let findings = airlock_audit::record_screening(
        env.audit,
        &spec.run_id,
        &pr_text,
        SourceKind::IssueBody,
        &source,
        env.screen,
    )?;
    let mut session = Session::new(spec, env, Baseline::empty());
    session.tools.review = Some(tools::ReviewTarget {
        pull: task.pull.clone(),
        lines: task.diff.line_map(),
        queued: None,
    });
    session
        .ledger()
        .note_findings(SourceKind::IssueBody, &source, &findings.findings, None)?;
    session
        .ledger()
        .ask_second_opinion(SourceKind::IssueBody, &source, &pr_text, &findings)?;
    let warm = warm_start::build_review(&warm_start::ReviewInputs {
        config: &spec.config,
        pull: &spec.issue,
        diff: &task.diff,
        retrieval: session.tools.retrieval,
        worktree: session.tools.worktree,
    });
    session.ledger().candidates = warm.candidates;
    for read in &warm.reads {
        session
            .ledger()
            .append(file_read_event(read, ReadBy::WarmStart))?;
    }
    // The diff and the code around it are repository text: screened like search snippets.
    session
        .ledger()
        .screen(SourceKind::SearchSnippet, "warm_start", &warm.text)?;
    let warm_text = session.ledger().shown("warm_start", &warm.text)?;
    let system = prompts::review_system_prompt(&spec.agent.prompt, &spec.repo, &task.pull);
    let messages = vec![Message::system(system), Message::user(warm_text)];
    for m in &messages {
        session.ledger().record_message(m)?;
    }
    let mut end = session.turns(messages)?;
    session.close(&mut end)?;
    Ok(end)
}

impl<'s> Session<'s> {
    fn new(spec: &'s RunSpec, env: &'s mut Env<'_>, baseline: Baseline) -> Session<'s> {
        let Env {
            model,
            retrieval,
            history,
            worktree,
            policy,
            tests,
            readers,
            broker,
            references,
            audit,
            screen,
            second_opinion,
            trajectory,
            progress,
        } = env;
        Session {
            spec,
            tools: Toolbox {
                run: RunSettings {
                    repo: &spec.repo,
                    base_commit: &spec.base_commit,
                    config: &spec.config,
                },
                offered: &spec.agent.tools,
                model: *model,
                retrieval: *retrieval,
                history: *history,
                worktree: *worktree,
                policy,
                tests: *tests,
                readers: *readers,
                broker: &mut **broker,
                references,
                baseline,
                review: None,
                ledger: Ledger::new(
                    &spec.run_id,
                    model.name(),
                    audit,
                    screen,
                    second_opinion.as_deref_mut(),
                    trajectory,
                    progress,
                ),
            },
        }
    }
}

/// How the run starts: not at all (triage), or with the base inventory taken.
enum Start {
    NotReady(Triage),
    Ready(Box<Baseline>, Screened),
}

/// The issue's text as screened: its title, a blank line, its body.
fn issue_text(spec: &RunSpec) -> String {
    format!("{}\n\n{}", spec.issue.title, spec.issue.body)
}

/// The `path` the issue's findings are recorded under.
fn issue_source(spec: &RunSpec) -> String {
    format!("issue:{}", spec.issue.id)
}

/// Before the loop: record the start, triage, take the test baseline, register with the broker.
fn start(spec: &RunSpec, env: &mut Env<'_>) -> Result<Start> {
    // A follow-up answers a reviewer who asked for changes on this issue's pull request: the
    // issue was triaged when its first run started.
    let triage = match &spec.follow_up {
        Some(f) => Triage {
            state: TriageState::ReadyForAgent,
            reason: format!("a reviewer requested changes on queue item {}", f.queue_id),
            source: "follow_up",
        },
        None => triage::classify(&spec.issue),
    };
    let config_json = serde_json::to_string(&spec.config).unwrap_or_default();
    env.audit.append(
        &spec.run_id,
        Event::RunStarted {
            repository: spec.repo.clone(),
            commit: spec.base_commit.clone(),
            issue: spec.issue.id.clone(),
            config_digest: sha256_hex(config_json.as_bytes()),
        },
    )?;
    env.trajectory
        .record(&TrajectoryEvent::RunStarted(RunStarted::Issue {
            run_id: &spec.run_id,
            repo: &spec.repo,
            base_commit: &spec.base_commit,
            issue_id: &spec.issue.id,
            model: env.model.name(),
            agent: &spec.agent.name,
            system_prompt: prompts::version_of(&spec.agent.prompt),
            reader_brief: airlock_reader::brief_version(),
            intake: &spec.intake,
        }))?;
    record_skill_call(spec, env)?;
    env.trajectory
        .record(&TrajectoryEvent::Triage { triage: &triage })?;
    let issue_text = issue_text(spec);
    let issue_findings = airlock_audit::record_screening(
        env.audit,
        &spec.run_id,
        &issue_text,
        SourceKind::IssueBody,
        &issue_source(spec),
        env.screen,
    )?;
    if triage.state != TriageState::ReadyForAgent {
        let reason = format!("not ready: {}: {}", triage.state.label(), triage.reason);
        run_finished(env.audit, &spec.run_id, RunOutcome::Escalate, Some(reason))?;
        return Ok(Start::NotReady(triage));
    }
    // Before any model call: build the test environment and take the base inventory.
    let baseline = match env.tests.baseline() {
        Ok(b) => b,
        Err(e) => {
            env.trajectory
                .record(&TrajectoryEvent::TestBaselineFailed {
                    error: e.to_string(),
                })?;
            let reason = format!("test set-up failed: {e}");
            run_finished(env.audit, &spec.run_id, RunOutcome::Escalate, Some(reason))?;
            return Err(e.into());
        }
    };
    env.trajectory.record(&TrajectoryEvent::TestBaseline {
        command: &baseline.command,
        environment: &baseline.environment,
        prepare: baseline.prepare.as_ref(),
        inventory: &baseline.inventory,
        summary: baseline.inventory.summary(),
        base_seconds: baseline.base_seconds,
    })?;
    env.broker
        .register_run(&registration(spec, env, &baseline))
        .map_err(|e| SessionError::Register(e.message))?;
    Ok(Start::Ready(Box::new(baseline), issue_findings))
}

/// The run's one `knowledge-reference-repos` call, as a `skill_call` audit event and a
/// trajectory entry (an empty answer is recorded too).
fn record_skill_call(spec: &RunSpec, env: &mut Env<'_>) -> Result<()> {
    let Some(event) = env.references.skill_call() else {
        return Ok(());
    };
    env.audit.append(&spec.run_id, event.clone())?;
    if let Some(payload) = SkillCallPayload::of(event) {
        env.trajectory
            .record(&TrajectoryEvent::SkillCall { payload })?;
    }
    Ok(())
}

/// The run as the broker registers it.
fn registration(spec: &RunSpec, env: &Env<'_>, baseline: &Baseline) -> RunRegistration {
    RunRegistration {
        run_id: spec.run_id.clone(),
        repository: spec
            .config
            .broker
            .repository
            .clone()
            .unwrap_or_else(|| spec.repo.clone()),
        base_commit: spec.base_commit.clone(),
        issue_id: spec.issue.id.clone(),
        issue_number: spec.issue.number,
        worktree: env.worktree.root().display().to_string(),
        test_command: baseline.command.clone(),
        test_runner: spec.config.tests.runner,
        write_allowlist: env.policy.allowlist().to_vec(),
        test_env: baseline.environment.clone(),
        reconnect_secs: Some(spec.config.broker.reconnect_secs()),
        issue: Some(IssueText {
            title: spec.issue.title.clone(),
            // Bounded like retrieval's query, so a huge issue cannot push the registration past
            // the broker's request limit.
            body: spec
                .issue
                .body
                .chars()
                .take(crate::issue::MAX_QUERY_CHARS)
                .collect(),
        }),
        follow_up_of: spec.follow_up.as_ref().map(|f| f.queue_id),
        change: spec.agent.change(),
        tree: spec.config.broker.tree_transfer(),
    }
}

fn run_finished(
    audit: &AuditLog,
    run_id: &str,
    outcome: RunOutcome,
    reason: Option<String>,
) -> Result<()> {
    audit.append(run_id, Event::RunFinished { outcome, reason })?;
    Ok(())
}

/// The loop's state: the run, and the tools with the ledger beneath them.
struct Session<'s> {
    spec: &'s RunSpec,
    tools: Toolbox<'s>,
}

impl<'s> Session<'s> {
    fn ledger(&mut self) -> &mut Ledger<'s> {
        &mut self.tools.ledger
    }

    fn drive(&mut self) -> Result<RunEnd> {
        let system = prompts::system_prompt_for(
            &self.spec.agent.prompt,
            &self.spec.repo,
            &self.spec.base_commit,
            &self.spec.issue.id,
            self.tools.policy,
            &self.spec.config,
        );
        let query = self.spec.issue.query();
        let references = self.tools.references.warm_start_section();
        let warm = warm_start::build(&WarmInputs {
            config: &self.spec.config,
            repo: &self.spec.repo,
            base_commit: &self.spec.base_commit,
            issue: &self.spec.issue,
            query: &query,
            baseline: &self.tools.baseline,
            retrieval: self.tools.retrieval,
            history: self.tools.history,
            worktree: self.tools.worktree,
            references: &references,
            learnings: self.spec.config.docs.learnings.as_deref(),
            earlier: self.spec.earlier.as_ref(),
        });
        self.ledger().candidates = warm.candidates;
        for read in &warm.reads {
            self.ledger()
                .append(file_read_event(read, ReadBy::WarmStart))?;
        }
        // The issue body was screened at the start; the rest is search and map text. The model
        // is shown the issue and the rest with hidden characters made visible.
        self.ledger()
            .screen(SourceKind::SearchSnippet, "warm_start", &warm.text)?;
        let mut warm_text = self.ledger().shown("warm_start", &warm.text)?;
        if let Some(f) = &self.spec.follow_up {
            // The reviewer's feedback is text from outside the run, like the issue: screened,
            // its hidden characters made visible, and shown as data.
            let source = format!("feedback:queue-{}", f.queue_id);
            self.ledger()
                .screen(SourceKind::IssueBody, &source, &f.feedback)?;
            let feedback = self.ledger().shown(&source, &f.feedback)?;
            warm_text.push_str(&prompts::follow_up_section(
                f.queue_id,
                f.branch.as_deref(),
                &feedback,
            ));
        }
        let messages = vec![Message::system(system), Message::user(warm_text)];
        for m in &messages {
            self.ledger().record_message(m)?;
        }
        self.turns(messages)
    }

    /// The loop from `messages` on, until the final message or a budget.
    fn turns(&mut self, mut messages: Vec<Message>) -> Result<RunEnd> {
        let budgets = self.spec.config.budgets.clone();
        let tool_specs = tools::specs_of(self.tools.offered).map_err(SessionError::Contract)?;
        let mut repairs_left = budgets.max_repair_prompts;
        let mut condenser = Condenser::new(&self.spec.config.context);
        loop {
            if self.tools.ledger.counts.turns >= budgets.max_turns {
                let reason = format!("MAX_TURNS ({}) reached", budgets.max_turns);
                return self.budget_end(&mut messages, reason, Some(ParkedOn::MaxTurns));
            }
            // The trajectory has every message whole (recorded as it was made); only what the
            // model is sent from now on is condensed.
            let written: BTreeSet<String> = self
                .tools
                .ledger
                .facts
                .files_written
                .iter()
                .cloned()
                .collect();
            if let Some(done) = condenser.condense(&mut messages, &written) {
                self.ledger().record(&TrajectoryEvent::Condensed(&done))?;
            }
            let turn = self.ledger().next_turn();
            let _turn = tracing::debug_span!("turn", turn).entered();
            let request = ChatRequest {
                messages: messages.clone(),
                tools: tool_specs.clone(),
                options: ChatOptions {
                    // The system prompt and the warm start: the prompt cache's stable prefix.
                    stable_prefix: STABLE_PREFIX_MESSAGES,
                    ..ChatOptions::default()
                },
            };
            let response = match self.chat(&request)? {
                Ok(r) => r,
                // The token/cost budget of the model crate is a budget like the others: the run
                // parks, it does not fail.
                Err(e @ airlock_model::Error::BudgetExhausted { resource, .. }) => {
                    let on = ParkedOn::from_model_resource(resource);
                    return self.budget_end(
                        &mut messages,
                        format!("model budget spent ({e})"),
                        Some(on),
                    );
                }
                Err(e) => {
                    return Err(SessionError::Model {
                        turn,
                        message: e.to_string(),
                    });
                }
            };
            self.ledger().turn_answered(budgets.max_turns);
            let assistant = Message::Assistant(response.message.clone());
            self.ledger().record_message(&assistant)?;
            messages.push(assistant);
            let calls = response.message.tool_calls;
            if calls.is_empty() && self.tools.review.is_some() {
                // A reviewer ends by calling its terminal tool, not with a final message.
                if repairs_left == 0 {
                    let reason = format!(
                        "no review was submitted after {} reminders",
                        budgets.max_repair_prompts
                    );
                    return self.budget_end(&mut messages, reason, None);
                }
                repairs_left -= 1;
                let repair = Message::user(prompts::review_repair());
                self.ledger().record(&TrajectoryEvent::RepairPrompt {
                    problems: &["no submit_review call".to_owned()],
                })?;
                self.ledger().record_message(&repair)?;
                messages.push(repair);
                continue;
            }
            if calls.is_empty() {
                // The final message.
                match outcome::judge_final(&response.message.text, &self.tools.ledger.facts_now()) {
                    Ok(judged) => return self.finish(judged, "final_message"),
                    Err(problems) if repairs_left == 0 => {
                        let reason = format!(
                            "the final message failed validation after {} repair prompts: {}",
                            budgets.max_repair_prompts,
                            problems.join("; ")
                        );
                        let written = self.supervisor_escalation(&reason);
                        return self.finish(written, "invalid_final_message");
                    }
                    Err(problems) => {
                        repairs_left -= 1;
                        let repair = Message::user(format!(
                            "Your final message was not accepted:\n- {}\nReply with exactly one \
                             JSON object that satisfies the output contract, nothing else.",
                            problems.join("\n- ")
                        ));
                        self.ledger().record(&TrajectoryEvent::RepairPrompt {
                            problems: &problems,
                        })?;
                        self.ledger().record_message(&repair)?;
                        messages.push(repair);
                        continue;
                    }
                }
            }
            let mut end: Option<(String, Option<ParkedOn>)> = None;
            for call in &calls {
                let result = if end.is_some() {
                    Message::tool_result(&call.id, "not run: the run ended before this call", true)
                } else {
                    let reply = self.tools.call(call)?;
                    match reply.flow {
                        Flow::Continue => {}
                        Flow::End(reason) => end = Some((reason, None)),
                        Flow::Park(on, reason) => end = Some((reason, Some(on))),
                    }
                    Message::tool_result(&call.id, reply.text, reply.is_error)
                };
                self.ledger()
                    .record(&TrajectoryEvent::ToolResult { message: &result })?;
                if let Message::Tool(r) = &result {
                    condenser.note_result(messages.len(), call, r.is_error);
                }
                messages.push(result);
            }
            if let Some((reason, park)) = end {
                return self.budget_end(&mut messages, reason, park);
            }
        }
    }

    /// One model call of the supervisor, recorded in the ledger. The outer error is a record
    /// that could not be kept; the inner one the model's.
    fn chat(
        &mut self,
        request: &ChatRequest,
    ) -> Result<std::result::Result<ChatResponse, airlock_model::Error>> {
        let started = std::time::Instant::now();
        let response = match self.tools.model.chat(request) {
            Ok(r) => r,
            Err(e) => return Ok(Err(e)),
        };
        let latency_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
        self.ledger()
            .model_call(&response.usage, latency_ms, response.cost_usd)?;
        Ok(Ok(response))
    }

    /// The escalation the supervisor writes from the run's record.
    fn supervisor_escalation(&self, reason: &str) -> Judged {
        Judged {
            outcome: outcome::supervisor_escalation(reason, &self.tools.ledger.facts_now()),
            floored: None,
        }
    }

    fn finish(&mut self, judged: Judged, stop: &str) -> Result<RunEnd> {
        let Judged {
            mut outcome,
            floored,
        } = judged;
        let mut stop = stop.to_string();
        if let Some(reason) = floored.or_else(|| outcome::apply_confidence_floor(&mut outcome)) {
            self.ledger()
                .record(&TrajectoryEvent::ForcedEscalation { reason: &reason })?;
            stop = format!("{stop}; forced escalate: {reason}");
        }
        let pr_queued = self.tools.ledger.facts.pr_accepted && outcome.outcome == OutcomeKind::Pr;
        Ok(RunEnd::Finished {
            outcome,
            pr_queued,
            stop,
        })
    }

    /// A budget or terminal code ended the loop: one closing turn without tools asks the model
    /// for its escalation; if that is not a valid outcome, the supervisor writes one.
    /// A budget that parks (`park`) parks the run unless an `open_pr` was accepted already (its
    /// pull request is queued: there is nothing left to resume). A run whose `open_pr` was
    /// accepted closes as `pr` whatever ended it (a second `open_pr` refused, a budget), so the
    /// outcome and the broker's queue agree: the closing turn asks for that `pr` message, and
    /// when its answer is not one, the supervisor writes it from the accepted call.
    fn budget_end(
        &mut self,
        messages: &mut Vec<Message>,
        reason: String,
        park: Option<ParkedOn>,
    ) -> Result<RunEnd> {
        if let Some(target) = &self.tools.review {
            // A reviewer has no outcome to write and nothing to park: its review is queued
            // or it is not.
            let queue_id = target.queued;
            self.ledger().record(&TrajectoryEvent::ReviewEnd {
                reason: &reason,
                queue_id,
            })?;
            return Ok(RunEnd::Reviewed {
                queue_id,
                stop: reason,
            });
        }
        if let Some(on) = park
            && !self.tools.ledger.facts.pr_accepted
        {
            return self.park(messages, reason, on);
        }
        self.ledger().record(&TrajectoryEvent::BudgetExhausted {
            reason: &reason,
            parked_on: None,
        })?;
        let accepted = self.tools.ledger.facts.pr_accepted;
        let ask = Message::user(if accepted {
            format!(
                "The run is over: {reason}. Your accepted open_pr's pull request is queued for \
                 review. Reply now with the final JSON object only, outcome \"pr\", describing \
                 that pull request."
            )
        } else {
            format!(
                "The run is over: {reason}. Reply now with the final JSON object only, outcome \
                 \"escalate\": say what you established, what you ruled out, and what you would \
                 read next."
            )
        });
        self.ledger().record_message(&ask)?;
        messages.push(ask);
        // The tools stay in the request (the model is told not to call them): they head the
        // cached prefix, and dropping them would make the closing turn pay for its whole
        // prompt again.
        let request = ChatRequest {
            messages: messages.clone(),
            tools: tools::specs_of(&self.spec.agent.tools).map_err(SessionError::Contract)?,
            options: ChatOptions {
                tool_choice: ToolChoice::None,
                stable_prefix: STABLE_PREFIX_MESSAGES,
                ..ChatOptions::default()
            },
        };
        let closing = match self.tools.model.chat(&request) {
            Ok(r) => {
                self.ledger()
                    .record_message(&Message::Assistant(r.message.clone()))?;
                if r.message.tool_calls.is_empty() {
                    outcome::judge_final(&r.message.text, &self.tools.ledger.facts_now()).ok()
                } else {
                    None
                }
            }
            Err(e) => {
                self.ledger().record(&TrajectoryEvent::ClosingTurnFailed {
                    error: e.to_string(),
                })?;
                None
            }
        };
        let stop = format!("budget: {reason}");
        match closing {
            Some(judged) if accepted && judged.outcome.outcome == OutcomeKind::Pr => {
                self.finish(judged, &stop)
            }
            _ if accepted => {
                let written = Judged {
                    outcome: outcome::supervisor_queued_pr(
                        &reason,
                        &self.tools.ledger.facts_now(),
                        self.tools.ledger.work.accepted_open_pr.as_ref(),
                    ),
                    floored: None,
                };
                self.finish(written, &stop)
            }
            Some(mut judged) => {
                outcome::force_escalate(&mut judged.outcome, &reason);
                self.finish(judged, &stop)
            }
            None => {
                let written = self.supervisor_escalation(&reason);
                self.finish(written, &stop)
            }
        }
    }

    /// Park the run: one closing turn without tools asks the model what it established and
    /// what it would do next (not when the model's own budget is what stopped it); when that is
    /// not a valid outcome, the supervisor writes it from the record. The conversation kept is
    /// the one before the closing request, with the request and the answer when there was one.
    fn park(&mut self, messages: &[Message], reason: String, on: ParkedOn) -> Result<RunEnd> {
        self.ledger().record(&TrajectoryEvent::BudgetExhausted {
            reason: &reason,
            parked_on: Some(on),
        })?;
        let mut kept = messages.to_vec();
        let mut summary = None;
        if !on.is_model_budget() {
            let ask = Message::user(prompts::park_summary_request(&reason));
            self.ledger().record_message(&ask)?;
            let mut closing = kept.clone();
            closing.push(ask.clone());
            let request = ChatRequest {
                messages: closing,
                tools: Vec::new(),
                options: ChatOptions {
                    tool_choice: ToolChoice::None,
                    ..ChatOptions::default()
                },
            };
            match self.chat(&request)? {
                Ok(r) => {
                    let answer = Message::Assistant(r.message.clone());
                    self.ledger().record_message(&answer)?;
                    if r.message.tool_calls.is_empty()
                        && let Ok(judged) =
                            outcome::judge_final(&r.message.text, &self.tools.ledger.facts_now())
                    {
                        kept.push(ask);
                        kept.push(answer);
                        summary = Some(judged.outcome);
                    }
                }
                Err(e) => {
                    self.ledger().record(&TrajectoryEvent::ClosingTurnFailed {
                        error: e.to_string(),
                    })?;
                }
            }
        }
        let outcome = match summary {
            Some(mut written) => {
                outcome::mark_parked(&mut written, &reason);
                written
            }
            None => outcome::supervisor_parked(&reason, &self.tools.ledger.facts_now()),
        };
        Ok(RunEnd::Parked {
            outcome,
            stop: format!("parked: {reason}"),
            parked: Box::new(ParkedSession {
                budget: on,
                conversation: kept,
                ledger: self.tools.ledger.state(),
                baseline: self.tools.baseline.clone(),
            }),
        })
    }

    /// After the loop: the injections the model reported, the trajectory's outcome entry, the
    /// audit log's `run_finished`.
    fn close(&mut self, end: &mut RunEnd) -> Result<()> {
        let (outcome, pr_queued, stop, parked) = match end {
            RunEnd::NotReady(_) => return Ok(()),
            RunEnd::Reviewed { queue_id, stop } => {
                let ledger = &mut self.tools.ledger;
                let (kind, reason) = match queue_id {
                    Some(id) => (
                        RunOutcome::Review,
                        Some(format!("review queued as item {id}")),
                    ),
                    None => (RunOutcome::Escalate, Some(stop.clone())),
                };
                ledger.append(Event::RunFinished {
                    outcome: kind,
                    reason,
                })?;
                ledger.finished(stop);
                return Ok(());
            }
            RunEnd::Finished {
                outcome,
                pr_queued,
                stop,
            } => (outcome, *pr_queued, stop, false),
            RunEnd::Parked { outcome, stop, .. } => (outcome, false, stop, true),
        };
        let ledger = &mut self.tools.ledger;
        for path in &outcome.injection_observed {
            ledger.append(Event::InjectionObserved {
                path: path.clone(),
                excerpt: "reported by the supervisor model in its final message".into(),
                line: None,
            })?;
        }
        // The model's own report comes after its open_pr: it joins the queued item for the
        // approver, attributed to the run's model.
        if pr_queued && !outcome.injection_observed.is_empty() {
            let findings: Vec<airlock_protocol::ItemFinding> = outcome
                .injection_observed
                .iter()
                .map(|path| {
                    airlock_protocol::ItemFinding::at(
                        airlock_protocol::FindingSource::Model,
                        path,
                        None,
                        airlock_protocol::MODEL_REPORTED,
                        "reported by the supervisor model in its final message",
                    )
                })
                .collect();
            let run_id = ledger.run_id().to_string();
            let reply = self.tools.broker.report_findings(&run_id, &findings);
            let ledger = &mut self.tools.ledger;
            let (stored, error) = match reply {
                Ok(airlock_protocol::ReportFindingsReply::FindingsRecorded {
                    findings, ..
                }) => (Some(findings), None),
                Ok(airlock_protocol::ReportFindingsReply::Failed { message }) => {
                    (None, Some(message))
                }
                Err(e) => (None, Some(e.to_string())),
            };
            ledger.record(&TrajectoryEvent::FindingsReported {
                findings: findings.len(),
                stored,
                error,
            })?;
        }
        let ledger = &mut self.tools.ledger;
        // The detector's new findings in files of the tree are reported too, whether or not
        // the model noticed them; a finding the security team dismissed is not.
        for path in &ledger.facts.injection_observed {
            if !outcome.injection_observed.contains(path) {
                outcome.injection_observed.push(path.clone());
            }
        }
        let counts = ledger.counts;
        ledger.record(&TrajectoryEvent::Outcome {
            outcome,
            stop,
            pr_queued,
            parked,
            turns: counts.turns,
            reads: counts.reads,
            full_runs: counts.full_runs,
            refusals: counts.refusals,
        })?;
        let (kind, reason) = if pr_queued {
            (RunOutcome::Pr, None)
        } else if parked {
            (RunOutcome::Parked, Some(stop.clone()))
        } else {
            (RunOutcome::Escalate, Some(stop.clone()))
        };
        ledger.append(Event::RunFinished {
            outcome: kind,
            reason,
        })?;
        ledger.finished(stop);
        Ok(())
    }
}

impl From<TrajectoryError> for ToolFailure {
    fn from(e: TrajectoryError) -> Self {
        ToolFailure::new("trajectory", e.to_string())
    }
}
