//! The run's ledger: the counters and facts of a run, and every record of it (audit events,
//! trajectory entries, injection screening, progress). Tool handlers and the loop write here;
//! nothing below it knows the loop.

use crate::outcome::RunFacts;
use crate::ports::ReadOutcome;
use crate::progress::{Progress, ProgressEvent, UsageSoFar};
use crate::second_opinion::SecondOpinion;
use crate::trajectory::{DismissedFinding, Trajectory, TrajectoryError, TrajectoryEvent};
use airlock_audit::{
    AuditLog, Event, ReadBy, ScreenContext, Screened, ScreenedFinding, SourceKind,
};
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;

/// What a ledger knows of its run beyond the records it wrote: what a parked run keeps so that
/// `airlock resume` continues with the same counters, facts and worktree state.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct LedgerState {
    /// The counters.
    pub counts: Counters,
    /// What the outcome may state about the run.
    pub facts: RunFacts,
    /// The worktree's state.
    pub work: WorkState,
    /// The warm start's search candidates (paths), in rank order.
    pub candidates: Vec<String>,
    /// Paths read by the supervisor.
    pub read_paths: BTreeSet<String>,
    /// Tokens and cost so far.
    pub usage: UsageSoFar,
}

/// A record of the run could not be kept (a run without its record must not go on).
#[derive(Debug, thiserror::Error)]
pub enum LedgerError {
    /// The trajectory could not be written.
    #[error(transparent)]
    Trajectory(#[from] TrajectoryError),
    /// The audit log refused an event.
    #[error("audit log: {0}")]
    Audit(#[from] airlock_audit::Error),
}

/// Result alias for ledger writes.
pub type Result<T> = std::result::Result<T, LedgerError>;

/// The budgets' counters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Counters {
    /// Model turns of the supervisor.
    pub turns: u32,
    /// `read_file` calls of the supervisor.
    pub reads: u32,
    /// Full test runs.
    pub full_runs: u32,
    /// Refused writes.
    pub refusals: u32,
    /// Reader delegations started.
    pub delegations: u32,
    /// `open_pr` calls sent to the broker, a resumed run's earlier ones included: the next
    /// call's number names it ([`airlock_protocol::open_pr_call_id`]).
    #[serde(default)]
    pub open_pr_calls: u32,
}

/// What the run has done to the worktree, as `open_pr`'s gate and the test verdicts need it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct WorkState {
    /// Something was written.
    pub wrote: bool,
    /// The last full run after the last write was green.
    pub green_full_since_write: bool,
    /// Test files the run created (a full run must run them).
    pub new_test_files: BTreeSet<String>,
    /// Rules (path classes) already refused once.
    pub refused_classes: BTreeSet<String>,
    /// What the egress proxy refused the run's tests, sent with `open_pr` for the approver.
    #[serde(default)]
    pub network_blocked: BTreeSet<airlock_policies::network::BlockedAttempt>,
    /// What the run's screening found new and what its readers reported, sent with `open_pr`
    /// for the approver (one per place when sent).
    #[serde(default)]
    pub findings: Vec<airlock_protocol::ItemFinding>,
    /// The accepted `open_pr` call, as the broker accepted it: what the run's outcome states
    /// when the run ends after it without a usable final message.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub accepted_open_pr: Option<airlock_schemas::OpenPr>,
}

/// The ledger of one run.
pub struct Ledger<'a> {
    run_id: String,
    model: String,
    audit: &'a AuditLog,
    screen: &'a ScreenContext,
    second_opinion: Option<&'a mut SecondOpinion>,
    trajectory: &'a mut Trajectory,
    progress: &'a mut Progress,
    /// The counters.
    pub counts: Counters,
    /// What the outcome may state about the run.
    pub facts: RunFacts,
    /// The worktree's state.
    pub work: WorkState,
    /// The warm start's search candidates (paths), in rank order.
    pub candidates: Vec<String>,
    /// Paths read by the supervisor.
    pub read_paths: BTreeSet<String>,
    /// Tokens and cost so far.
    pub usage: UsageSoFar,
}

impl<'a> Ledger<'a> {
    /// The ledger of run `run_id` whose model is called `model`; `second_opinion` is the
    /// operator's security model, when `[security_model]` configures one.
    pub fn new(
        run_id: &str,
        model: &str,
        audit: &'a AuditLog,
        screen: &'a ScreenContext,
        second_opinion: Option<&'a mut SecondOpinion>,
        trajectory: &'a mut Trajectory,
        progress: &'a mut Progress,
    ) -> Self {
        Ledger {
            run_id: run_id.to_string(),
            model: model.to_string(),
            audit,
            screen,
            second_opinion,
            trajectory,
            progress,
            counts: Counters::default(),
            facts: RunFacts::default(),
            work: WorkState::default(),
            candidates: Vec::new(),
            read_paths: BTreeSet::new(),
            usage: UsageSoFar::default(),
        }
    }

    /// The state a parked run keeps.
    pub fn state(&self) -> LedgerState {
        LedgerState {
            counts: self.counts,
            facts: self.facts.clone(),
            work: self.work.clone(),
            candidates: self.candidates.clone(),
            read_paths: self.read_paths.clone(),
            usage: self.usage,
        }
    }

    /// Take up a parked run's state.
    pub fn restore(&mut self, state: LedgerState) {
        let LedgerState {
            counts,
            facts,
            work,
            candidates,
            read_paths,
            usage,
        } = state;
        self.counts = counts;
        self.facts = facts;
        self.work = work;
        self.candidates = candidates;
        self.read_paths = read_paths;
        self.usage = usage;
    }

    /// The run id.
    pub fn run_id(&self) -> &str {
        &self.run_id
    }

    /// Append one audit event.
    pub fn append(&mut self, event: Event) -> Result<()> {
        self.audit.append(&self.run_id, event)?;
        Ok(())
    }

    /// Append one trajectory entry.
    pub fn record(&mut self, event: &TrajectoryEvent<'_>) -> Result<()> {
        self.trajectory.record(event)?;
        Ok(())
    }

    /// Record a message of the conversation.
    pub fn record_message(&mut self, message: &airlock_model::Message) -> Result<()> {
        self.record(&TrajectoryEvent::Message { message })
    }

    /// Run the injection detector over a text about to be handed to the model; every finding
    /// becomes an `injection_suspected` event (the text itself is handed on unchanged), and
    /// the security model, when configured, is asked about the findings and borderline spans. A
    /// finding whose key the security team dismissed is recorded as such and is not reported:
    /// only new findings in files of the tree join the outcome's `injection_observed`.
    pub fn screen(&mut self, kind: SourceKind, path: &str, text: &str) -> Result<()> {
        self.screen_shown(kind, path, text, None)
    }

    /// [`Ledger::screen`] of a read's reply whose second line shows line `first_line` of the
    /// file (`None` for any other text): the approver's copy of a finding names the file's line
    /// and the line's own text; the audit event keeps the reply's line, as screened.
    pub fn screen_shown(
        &mut self,
        kind: SourceKind,
        path: &str,
        text: &str,
        first_line: Option<u64>,
    ) -> Result<()> {
        // A file the run wrote is no longer the pinned blob: keyed by its line's hash instead,
        // so text the agent wrote cannot inherit the dismissal of the file's pinned version.
        let rewritten;
        let context = if self.facts.files_written.iter().any(|p| p == path) {
            rewritten = ScreenContext {
                repository: self.screen.repository.clone(),
                blobs: Default::default(),
                dismissed: self.screen.dismissed.clone(),
            };
            &rewritten
        } else {
            self.screen
        };
        let screened =
            airlock_audit::record_screening(self.audit, &self.run_id, text, kind, path, context)?;
        self.note_findings(kind, path, &screened.findings, first_line)?;
        self.ask_second_opinion(kind, path, text, &screened)
    }

    /// Ask the security model, when one is configured, about what screening `text` found; its
    /// verdicts are recorded beside the findings (which stay as they are).
    pub fn ask_second_opinion(
        &mut self,
        kind: SourceKind,
        path: &str,
        text: &str,
        screened: &Screened,
    ) -> Result<()> {
        if let Some(opinion) = self.second_opinion.as_deref_mut() {
            opinion.review(self.audit, &self.run_id, kind, path, text, screened)?;
        }
        Ok(())
    }

    /// `text` as a model is to be shown it: hidden characters made visible with a note line
    /// ([`airlock_audit::make_visible`]), and a `hidden_text_rendered` event naming `source`
    /// when there were any. Screen the original first; the original itself is never changed.
    pub fn shown(&mut self, source: &str, text: &str) -> Result<String> {
        let visible = airlock_audit::make_visible(text);
        if visible.changed() {
            self.append(Event::HiddenTextRendered {
                source: source.to_string(),
                characters: visible.hidden,
                kinds: visible.kinds,
            })?;
        }
        Ok(visible.text)
    }

    /// Keep what screening found outside the ledger (the issue, screened before the loop): the
    /// trajectory entry, the outcome's paths and the approver's copy ([`Ledger::report_findings`];
    /// `first_line` as there).
    pub fn note_findings(
        &mut self,
        kind: SourceKind,
        path: &str,
        found: &[ScreenedFinding],
        first_line: Option<u64>,
    ) -> Result<()> {
        if found.is_empty() {
            return Ok(());
        }
        let rules: Vec<&str> = found
            .iter()
            .filter(|f| f.is_new())
            .map(|f| f.finding.rule.as_str())
            .collect();
        let already_dismissed: Vec<DismissedFinding<'_>> = found
            .iter()
            .filter_map(|f| {
                Some(DismissedFinding {
                    rule: f.finding.rule.as_str(),
                    line: f.finding.line,
                    dismissed_by: f.dismissed_by?,
                })
            })
            .collect();
        self.trajectory
            .record(&TrajectoryEvent::InjectionSuspected {
                path,
                rules: rules.clone(),
                already_dismissed,
            })?;
        self.report_findings(path, found, first_line);
        let in_tree = kind == SourceKind::File && self.screen.blobs.contains_key(path);
        if in_tree && !rules.is_empty() && !self.facts.injection_observed.iter().any(|p| p == path)
        {
            self.facts.injection_observed.push(path.to_string());
        }
        Ok(())
    }

    /// Keep the new findings for the approver, sent with `open_pr` and attributed to the run.
    /// For a read's reply (`first_line`), the line is the file's and the excerpt loses the
    /// reply's `N| ` prefix.
    pub fn report_findings(
        &mut self,
        path: &str,
        found: &[ScreenedFinding],
        first_line: Option<u64>,
    ) {
        self.work
            .findings
            .extend(found.iter().filter(|f| f.is_new()).map(|f| {
                let (line, excerpt) = match first_line {
                    Some(first) if f.finding.line >= 2 => {
                        let line = first + f.finding.line - 2;
                        let prefix = format!("{line}| ");
                        let excerpt = f
                            .finding
                            .excerpt
                            .strip_prefix(&prefix)
                            .map_or_else(|| f.finding.excerpt.clone(), str::to_owned);
                        (line, excerpt)
                    }
                    _ => (f.finding.line, f.finding.excerpt.clone()),
                };
                airlock_protocol::ItemFinding::at(
                    airlock_protocol::FindingSource::Run,
                    path,
                    Some(line),
                    f.finding.rule.as_str(),
                    &excerpt,
                )
            }));
        if self.work.findings.len() > 4 * airlock_protocol::MAX_FINDINGS {
            self.work.findings =
                airlock_protocol::merge_by_place(std::mem::take(&mut self.work.findings));
        }
    }

    /// Record one model call (the supervisor's or a reader's relayed one): the audit event and
    /// the usage so far.
    pub fn model_call(
        &mut self,
        usage: &airlock_model::Usage,
        latency_ms: u64,
        cost_usd: Option<f64>,
    ) -> Result<()> {
        self.usage.add(usage, cost_usd);
        self.append(Event::ModelCall {
            model: self.model.clone(),
            input_tokens: usage.input_tokens,
            output_tokens: usage.output_tokens,
            cache_read_tokens: usage.cache_read_tokens,
            cache_write_tokens: usage.cache_write_tokens,
            cost_usd,
            latency_ms,
        })
    }

    /// Start the next turn; its number.
    pub fn next_turn(&mut self) -> u32 {
        self.counts.turns += 1;
        self.counts.turns
    }

    /// Tell the operator the model answered this turn.
    pub fn turn_answered(&mut self, max_turns: u32) {
        self.progress.emit(&ProgressEvent::Turn {
            turn: self.counts.turns,
            max_turns,
            usage: self.usage,
        });
    }

    /// Tell the operator a tool call finished.
    pub fn tool_finished(&mut self, tool: &str, is_error: bool, result: &str) {
        self.progress.emit(&ProgressEvent::Tool {
            turn: self.counts.turns,
            tool: tool.to_string(),
            is_error,
            result: crate::progress::one_line(result, usize::MAX),
        });
    }

    /// Tell the operator the loop stopped.
    pub fn finished(&mut self, stop: &str) {
        self.progress.emit(&ProgressEvent::Finished {
            stop: stop.to_string(),
            turns: self.counts.turns,
            usage: self.usage,
        });
    }

    /// The facts as of now, for judging or writing an outcome.
    pub fn facts_now(&self) -> RunFacts {
        let mut f = self.facts.clone();
        f.files_written.sort();
        f.files_written.dedup();
        f.unread_candidates = self
            .candidates
            .iter()
            .filter(|c| !self.read_paths.contains(*c))
            .cloned()
            .collect();
        f
    }
}

/// The `file_read` event of a bounded read by `reader`: the figures of the read itself, never
/// of its rendering.
pub fn file_read_event(read: &ReadOutcome, reader: ReadBy) -> Event {
    Event::FileRead {
        path: read.path.clone(),
        reader,
        line_start: read.line_start,
        line_end: read.line_end,
        content_bytes: read.bytes_returned,
        total_bytes: read.bytes_total,
        truncated: read.truncated,
    }
}
