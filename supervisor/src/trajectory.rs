//! The trajectory: one JSON line per message, tool call, tool result and loop event of a run,
//! in order. No clock values, so two runs of the same script compare equal line by line.
//!
//! Each line is one [`TrajectoryEvent`] with its number: `{"seq": n, "kind": "...", ...}`,
//! keys in sorted order. `schemas/trajectory_event.json` is its contract; the tests check that
//! every variant and every line a run writes satisfy it.

use crate::budget::ParkedOn;
use crate::condense::Condensed;
use crate::intake::IntakeRecord;
use crate::prepare::PrepareRecord;
use crate::triage::Triage;
use crate::usage::ModelUsage;
use airlock_audit::ReferenceRepoPin;
use airlock_model::{Message, ToolCall};
use airlock_policies::network::BlockedAttempt;
use airlock_policies::testrun::{FullRunVerdict, TestEnvironment, TestInventory};
use airlock_protocol::{BrokerReply, PullRequestKey};
use airlock_schemas::{Outcome, ReaderDigest};
use serde::Serialize;
use serde_json::Value;
use std::io::Write;
use std::path::{Path, PathBuf};

/// One entry of the trajectory: what happened, with its fields. `kind` is the variant's name
/// in snake case. Fields hold borrowed values: an event is written as soon as it is made.
#[derive(Debug, Clone, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum TrajectoryEvent<'a> {
    /// The run began (an issue run's or a review's identity).
    RunStarted(RunStarted<'a>),
    /// A parked run was taken up again with more budget.
    RunResumed {
        /// What was added, one line.
        added: &'a str,
        /// The budget that had parked it.
        parked_on: ParkedOn,
        /// `[budgets] max_turns` now.
        max_turns: u32,
        /// `[budgets] max_full_runs` now.
        max_full_runs: u32,
    },
    /// The run's one `knowledge-reference-repos` call (the audit event's payload).
    SkillCall {
        /// What the call loaded.
        payload: SkillCallPayload<'a>,
    },
    /// The triage decision.
    Triage {
        /// The decision and why.
        triage: &'a Triage,
    },
    /// The test environment could not be set up.
    TestBaselineFailed {
        /// Why.
        error: String,
    },
    /// The base inventory at the pin.
    TestBaseline {
        /// The full test command.
        command: &'a [String],
        /// The environment it runs in.
        environment: &'a TestEnvironment,
        /// What prepare did, when it ran.
        prepare: Option<&'a PrepareRecord>,
        /// The tests at the pin and how they ended.
        inventory: &'a TestInventory,
        /// The inventory in one line.
        summary: String,
        /// How long the base run took, in seconds.
        base_seconds: f64,
    },
    /// A message of the conversation (the model's, or one the supervisor sent it).
    Message {
        /// The message as the model saw or sent it.
        message: &'a Message,
    },
    /// A tool call of the model, as the model sent it.
    ToolCall {
        /// The call.
        call: &'a ToolCall,
    },
    /// The result of a tool call, as handed back to the model.
    ToolResult {
        /// The tool message.
        message: &'a Message,
    },
    /// Old tool results were elided from the conversation.
    Condensed(&'a Condensed),
    /// The model was asked to repair its final message.
    RepairPrompt {
        /// What was wrong with it.
        problems: &'a [String],
    },
    /// The injection detector flagged a text about to reach the model.
    InjectionSuspected {
        /// Where the text came from.
        path: &'a str,
        /// The rules of the new findings.
        rules: Vec<&'a str>,
        /// Findings the security team had dismissed.
        already_dismissed: Vec<DismissedFinding<'a>>,
    },
    /// A write was refused by the write policy (or as a reference repository's file).
    PolicyRefusal {
        /// The path.
        path: &'a str,
        /// The rule that refused it.
        rule: &'a str,
        /// The refused class (absent for a reference repository's file).
        #[serde(skip_serializing_if = "Option::is_none")]
        class: Option<&'a str>,
        /// Whether the class had been refused before (absent with `class`).
        #[serde(skip_serializing_if = "Option::is_none")]
        retry_of_refused_class: Option<bool>,
        /// Refusals so far.
        refusals: u32,
    },
    /// A test run compared with the base inventory.
    FullRunVerdict {
        /// The selector, `null` for a full run.
        selector: Option<&'a str>,
        /// The comparison, for a full run that could be graded.
        verdict: Option<&'a FullRunVerdict>,
    },
    /// The egress proxy refused a test run's connections.
    NetworkBlocked {
        /// The selector, `null` for a full run.
        selector: Option<&'a str>,
        /// What was refused.
        blocked: &'a [BlockedAttempt],
    },
    /// The model's own `injection_observed`, sent after an accepted `open_pr`
    /// (`report_findings`) for the approver.
    FindingsReported {
        /// How many were sent.
        findings: usize,
        /// How many findings the queued item lists now, when the broker took them.
        stored: Option<usize>,
        /// Why the broker did not take them.
        error: Option<String>,
    },
    /// A reader delegation ended.
    ReaderDigest(ReaderDigestEntry<'a>),
    /// The broker's answer to `open_pr`.
    OpenPrReply {
        /// Whether the call was accepted.
        accepted: bool,
        /// The error code of a refusal.
        code: Option<String>,
        /// The broker's reply, when there was one.
        reply: Option<BrokerReply>,
        /// Why there was none.
        error: Option<String>,
    },
    /// A review's comments were off the diff: refused before the broker.
    ReviewRefused {
        /// The comments, each as `path:line (side)`.
        off_diff: &'a [String],
    },
    /// The broker's answer to `submit_review`.
    SubmitReviewReply {
        /// The broker's reply, when there was one.
        reply: Option<BrokerReply>,
        /// Why there was none.
        error: Option<String>,
    },
    /// The outcome was turned into an escalation (a confidence floor, a claim not backed).
    ForcedEscalation {
        /// Why.
        reason: &'a str,
    },
    /// A review run ended.
    ReviewEnd {
        /// Why.
        reason: &'a str,
        /// The broker's queue item of the review, when it was queued.
        queue_id: Option<i64>,
    },
    /// A budget ended the loop.
    BudgetExhausted {
        /// Which budget, and its figures.
        reason: &'a str,
        /// The budget the run is parked on, when it parks.
        #[serde(skip_serializing_if = "Option::is_none")]
        parked_on: Option<ParkedOn>,
    },
    /// The closing turn after a budget could not be made.
    ClosingTurnFailed {
        /// Why.
        error: String,
    },
    /// The run's outcome and counters.
    Outcome {
        /// The outcome object.
        outcome: &'a Outcome,
        /// Why the loop stopped.
        stop: &'a str,
        /// Whether a pull request is queued.
        pr_queued: bool,
        /// Whether the run is parked.
        parked: bool,
        /// Model turns.
        turns: u32,
        /// `read_file` calls.
        reads: u32,
        /// Full test runs.
        full_runs: u32,
        /// Refused writes.
        refusals: u32,
    },
    /// The model's end-of-run check failed (a scripted model with turns left unplayed).
    ModelFinishProblem {
        /// What it said.
        problem: &'a str,
    },
    /// What the run's model calls used and cost (`outcome.json`'s `model_usage`).
    ModelUsage(ModelUsage),
}

/// `run_started`: an issue run's or a review's.
#[derive(Debug, Clone, Serialize)]
#[serde(untagged)]
pub enum RunStarted<'a> {
    /// A run on an issue (any agent but a reviewer).
    Issue {
        /// The run id.
        run_id: &'a str,
        /// The repository as the operator gave it.
        repo: &'a str,
        /// The pinned commit.
        base_commit: &'a str,
        /// The issue's id.
        issue_id: &'a str,
        /// The model's name.
        model: &'a str,
        /// The agent's name.
        agent: &'a str,
        /// The system prompt's version line.
        system_prompt: &'a str,
        /// The reader brief's version.
        reader_brief: &'a str,
        /// Where the issue, the repository and the pin came from.
        intake: &'a IntakeRecord,
    },
    /// A review of a pull request.
    Review {
        /// The run id.
        run_id: &'a str,
        /// The agent's name.
        agent: &'a str,
        /// The repository as the operator gave it.
        repo: &'a str,
        /// The head reviewed.
        base_commit: &'a str,
        /// The pull request and its head.
        pull: &'a PullRequestKey,
        /// The pull request's base commit.
        pull_base: &'a str,
        /// The merge base the diff is taken from.
        merge_base: &'a str,
        /// The model's name.
        model: &'a str,
        /// The system prompt's version line.
        system_prompt: &'a str,
        /// Where the pull request came from.
        intake: &'a IntakeRecord,
    },
}

/// The payload of a `skill_call` entry: the audit event's fields.
#[derive(Debug, Clone, Serialize)]
pub struct SkillCallPayload<'a> {
    /// The skill's name.
    pub skill: &'a str,
    /// Whether the call answered.
    pub ok: bool,
    /// The repositories it loaded.
    pub reference_repos: &'a [ReferenceRepoPin],
    /// The answer's reason, when it gave one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<&'a str>,
}

impl<'a> SkillCallPayload<'a> {
    /// The payload of a `skill_call` audit event; `None` for any other event.
    pub fn of(event: &'a airlock_audit::Event) -> Option<Self> {
        match event {
            airlock_audit::Event::SkillCall {
                skill,
                ok,
                reference_repos,
                reason,
            } => Some(SkillCallPayload {
                skill,
                ok: *ok,
                reference_repos,
                reason: reason.as_deref(),
            }),
            _ => None,
        }
    }
}

/// A finding the security team had dismissed, in an `injection_suspected` entry.
#[derive(Debug, Clone, Serialize)]
pub struct DismissedFinding<'a> {
    /// The detector's rule.
    pub rule: &'a str,
    /// The line it was on.
    pub line: u64,
    /// The audit sequence number of the dismissal.
    pub dismissed_by: u64,
}

/// A `reader_digest` entry: a reader that could not start, or one that ended.
#[derive(Debug, Clone, Serialize)]
#[serde(untagged)]
pub enum ReaderDigestEntry<'a> {
    /// The reader could not start.
    NotStarted {
        /// The brief's question.
        question: &'a str,
        /// Always `false`.
        accepted: bool,
        /// Why it did not start.
        dropped_reason: String,
    },
    /// The reader ran.
    Finished {
        /// The brief's question.
        question: &'a str,
        /// The brief's read budget.
        max_reads: u32,
        /// The brief's turn budget.
        max_turns: u32,
        /// Reads it made.
        reads_made: u32,
        /// Model calls it made.
        model_calls: u32,
        /// Whether its digest needed a repair prompt.
        repaired: bool,
        /// Whether its digest was accepted.
        accepted: bool,
        /// Why the digest was dropped.
        dropped_reason: Option<&'a str>,
        /// The accepted digest.
        digest: Option<&'a ReaderDigest>,
    },
}

/// Errors writing the trajectory (a run without its record is not allowed to continue).
#[derive(Debug, thiserror::Error)]
#[error("cannot write trajectory {path}: {source}")]
pub struct TrajectoryError {
    /// The file.
    pub path: PathBuf,
    /// The I/O error.
    pub source: std::io::Error,
}

/// An append-only JSONL trajectory file.
#[derive(Debug)]
pub struct Trajectory {
    path: PathBuf,
    file: std::io::BufWriter<std::fs::File>,
    seq: u64,
}

/// One line of the trajectory as JSON: `{"seq": seq, "kind": ..., ...}`, keys sorted.
pub fn entry(seq: u64, event: &TrajectoryEvent<'_>) -> serde_json::Result<Value> {
    let mut value = serde_json::to_value(event)?;
    if let Value::Object(fields) = &mut value {
        fields.insert("seq".to_owned(), Value::from(seq));
    }
    Ok(value)
}

impl Trajectory {
    /// Create (truncate) the trajectory file.
    pub fn create(path: &Path) -> Result<Trajectory, TrajectoryError> {
        let err = |source| TrajectoryError {
            path: path.to_path_buf(),
            source,
        };
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).map_err(err)?;
        }
        let file = std::fs::File::create(path).map_err(err)?;
        Ok(Trajectory {
            path: path.to_path_buf(),
            file: std::io::BufWriter::new(file),
            seq: 0,
        })
    }

    /// Open an existing trajectory to go on appending (a resumed run): numbering continues
    /// after its last entry.
    pub fn append(path: &Path) -> Result<Trajectory, TrajectoryError> {
        let err = |source| TrajectoryError {
            path: path.to_path_buf(),
            source,
        };
        let existing = std::fs::read_to_string(path).map_err(err)?;
        let seq = existing.lines().filter(|l| !l.trim().is_empty()).count() as u64;
        let file = std::fs::OpenOptions::new()
            .append(true)
            .open(path)
            .map_err(err)?;
        Ok(Trajectory {
            path: path.to_path_buf(),
            file: std::io::BufWriter::new(file),
            seq,
        })
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Append one entry `{"seq": n, "kind": ..., ...}` and flush it.
    pub fn record(&mut self, event: &TrajectoryEvent<'_>) -> Result<(), TrajectoryError> {
        self.seq += 1;
        let err = |source| TrajectoryError {
            path: self.path.clone(),
            source,
        };
        let line = entry(self.seq, event)
            .map_err(|e| err(std::io::Error::other(e)))?
            .to_string();
        self.file.write_all(line.as_bytes()).map_err(err)?;
        self.file.write_all(b"\n").map_err(err)?;
        self.file.flush().map_err(err)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::intake::{IntakeSource, PinFrom};
    use airlock_schemas::Schema;
    use serde_json::json;
    use std::collections::BTreeSet;

    /// The kind a variant is written with. No wildcard arm: a new variant does not compile
    /// until it is named here, and then [`one_of_every_kind`] must build one.
    fn kind_of(event: &TrajectoryEvent<'_>) -> &'static str {
        match event {
            TrajectoryEvent::RunStarted(_) => "run_started",
            TrajectoryEvent::RunResumed { .. } => "run_resumed",
            TrajectoryEvent::SkillCall { .. } => "skill_call",
            TrajectoryEvent::Triage { .. } => "triage",
            TrajectoryEvent::TestBaselineFailed { .. } => "test_baseline_failed",
            TrajectoryEvent::TestBaseline { .. } => "test_baseline",
            TrajectoryEvent::Message { .. } => "message",
            TrajectoryEvent::ToolCall { .. } => "tool_call",
            TrajectoryEvent::ToolResult { .. } => "tool_result",
            TrajectoryEvent::Condensed(_) => "condensed",
            TrajectoryEvent::RepairPrompt { .. } => "repair_prompt",
            TrajectoryEvent::InjectionSuspected { .. } => "injection_suspected",
            TrajectoryEvent::PolicyRefusal { .. } => "policy_refusal",
            TrajectoryEvent::FullRunVerdict { .. } => "full_run_verdict",
            TrajectoryEvent::NetworkBlocked { .. } => "network_blocked",
            TrajectoryEvent::FindingsReported { .. } => "findings_reported",
            TrajectoryEvent::ReaderDigest(_) => "reader_digest",
            TrajectoryEvent::OpenPrReply { .. } => "open_pr_reply",
            TrajectoryEvent::ReviewRefused { .. } => "review_refused",
            TrajectoryEvent::SubmitReviewReply { .. } => "submit_review_reply",
            TrajectoryEvent::ForcedEscalation { .. } => "forced_escalation",
            TrajectoryEvent::ReviewEnd { .. } => "review_end",
            TrajectoryEvent::BudgetExhausted { .. } => "budget_exhausted",
            TrajectoryEvent::ClosingTurnFailed { .. } => "closing_turn_failed",
            TrajectoryEvent::Outcome { .. } => "outcome",
            TrajectoryEvent::ModelFinishProblem { .. } => "model_finish_problem",
            TrajectoryEvent::ModelUsage(_) => "model_usage",
        }
    }

    struct Fixtures {
        intake: IntakeRecord,
        review_intake: IntakeRecord,
        pull: PullRequestKey,
        triage: Triage,
        baseline: crate::ports::Baseline,
        pins: Vec<ReferenceRepoPin>,
        messages: [Message; 3],
        call: ToolCall,
        condensed: Condensed,
        problems: Vec<String>,
        verdict: FullRunVerdict,
        digest: ReaderDigest,
        outcome: Outcome,
    }

    fn fixtures() -> Fixtures {
        let mut intake = IntakeRecord::pinned(
            IntakeSource::Github {
                reference: "acme/calc#7".into(),
                api_url: "https://api.github.com".into(),
                number: Some(7),
                url: Some("https://github.com/acme/calc/issues/7".into()),
                author: Some("alice".into()),
                state: Some("open".into()),
                comments_included: 1,
            },
            "refs/heads/main".into(),
            PinFrom::DefaultBranch {
                default_branch: "main".into(),
            },
        );
        intake.history_forge = Some(crate::intake::ForgeHistory::Saved { saved: 2 });
        Fixtures {
            intake,
            review_intake: IntakeRecord {
                source: IntakeSource::GithubPullRequest {
                    reference: "acme/calc#3".into(),
                    api_url: "https://api.github.com".into(),
                    url: None,
                    author: None,
                    base_sha: "a".repeat(40),
                    head_sha: "b".repeat(40),
                    merge_base: "a".repeat(40),
                    files: vec!["calc/ops.py".into()],
                },
                pin: None,
                history_forge: None,
            },
            pull: PullRequestKey {
                owner: "acme".into(),
                repo: "calc".into(),
                number: 3,
                head_sha: "b".repeat(40),
            },
            triage: crate::triage::Triage {
                state: crate::triage::TriageState::ReadyForAgent,
                reason: "names a function and the expected result".into(),
                source: "text",
            },
            baseline: crate::ports::Baseline::empty(),
            pins: vec![ReferenceRepoPin {
                url: "https://example.com/lib.git".into(),
                sha: Some("c".repeat(40)),
                status: None,
            }],
            messages: [
                Message::user("fix it"),
                Message::assistant_text("done"),
                Message::tool_result("call-1", "1 match", false),
            ],
            call: ToolCall {
                id: "call-1".into(),
                name: "search_repo".into(),
                arguments: json!({"query": "add"}),
                invalid_arguments: None,
            },
            condensed: Condensed {
                results: 2,
                first_index: 3,
                tokens_before: 9000,
                tokens_after: 4000,
            },
            problems: vec!["summary is empty".into()],
            verdict: FullRunVerdict::default(),
            digest: serde_json::from_value(json!({
                "answer": "The writer flushes only on close.",
                "anchors": [{"path": "src/w.py", "line_start": 10, "line_end": 18, "claim": "flush happens in close()"}],
                "ruled_out": [], "also_noticed": [], "injection_observed": [],
                "complete": true, "reads_used": 4
            }))
            .unwrap(),
            outcome: serde_json::from_value(json!({
                "outcome": "escalate", "summary": "Not found.", "root_cause": "unknown",
                "files_changed": [], "tests_added": [],
                "test_evidence": {"before": "", "after": ""},
                "also_noticed": [], "injection_observed": [], "confidence": 0.2
            }))
            .unwrap(),
        }
    }

    fn one_of_every_kind(f: &Fixtures) -> Vec<TrajectoryEvent<'_>> {
        let b = &f.baseline;
        vec![
            TrajectoryEvent::RunStarted(RunStarted::Issue {
                run_id: "CALC-7-0123456789ab-1",
                repo: "/repos/calc",
                base_commit: "0123456789abcdef0123456789abcdef01234567",
                issue_id: "CALC-7",
                model: "scripted",
                agent: "issue-fixer",
                system_prompt: "issue-fixer v1",
                reader_brief: "reader v1",
                intake: &f.intake,
            }),
            TrajectoryEvent::RunStarted(RunStarted::Review {
                run_id: "review-calc-3-bbbbbbbbbbbb-1",
                agent: "pr-reviewer",
                repo: "/repos/calc",
                base_commit: &f.pull.head_sha,
                pull: &f.pull,
                pull_base: "a",
                merge_base: "a",
                model: "scripted",
                system_prompt: "pr-reviewer v1",
                intake: &f.review_intake,
            }),
            TrajectoryEvent::RunResumed {
                added: "+5 turns",
                parked_on: ParkedOn::MaxTurns,
                max_turns: 17,
                max_full_runs: 3,
            },
            TrajectoryEvent::SkillCall {
                payload: SkillCallPayload {
                    skill: "knowledge-reference-repos",
                    ok: true,
                    reference_repos: &f.pins,
                    reason: None,
                },
            },
            TrajectoryEvent::SkillCall {
                payload: SkillCallPayload {
                    skill: "knowledge-reference-repos",
                    ok: false,
                    reference_repos: &[],
                    reason: Some("mesh-config-dir-unreadable"),
                },
            },
            TrajectoryEvent::Triage { triage: &f.triage },
            TrajectoryEvent::TestBaselineFailed {
                error: "prepare failed".into(),
            },
            TrajectoryEvent::TestBaseline {
                command: &b.command,
                environment: &b.environment,
                prepare: b.prepare.as_ref(),
                inventory: &b.inventory,
                summary: b.inventory.summary(),
                base_seconds: b.base_seconds,
            },
            TrajectoryEvent::Message {
                message: &f.messages[0],
            },
            TrajectoryEvent::Message {
                message: &f.messages[1],
            },
            TrajectoryEvent::ToolCall { call: &f.call },
            TrajectoryEvent::ToolResult {
                message: &f.messages[2],
            },
            TrajectoryEvent::Condensed(&f.condensed),
            TrajectoryEvent::RepairPrompt {
                problems: &f.problems,
            },
            TrajectoryEvent::InjectionSuspected {
                path: "docs/NOTES.md",
                rules: vec!["instruction-override"],
                already_dismissed: vec![DismissedFinding {
                    rule: "hidden-text",
                    line: 3,
                    dismissed_by: 41,
                }],
            },
            TrajectoryEvent::PolicyRefusal {
                path: ".github/workflows/ci.yml",
                rule: "ci-config",
                class: Some("ci-config"),
                retry_of_refused_class: Some(false),
                refusals: 1,
            },
            TrajectoryEvent::PolicyRefusal {
                path: "reference/lib/x.py",
                rule: "cited-reference-repo-as-edit-target",
                class: None,
                retry_of_refused_class: None,
                refusals: 2,
            },
            TrajectoryEvent::FullRunVerdict {
                selector: None,
                verdict: Some(&f.verdict),
            },
            TrajectoryEvent::FullRunVerdict {
                selector: Some("tests.test_add"),
                verdict: None,
            },
            TrajectoryEvent::FindingsReported {
                findings: 1,
                stored: Some(3),
                error: None,
            },
            TrajectoryEvent::NetworkBlocked {
                selector: None,
                blocked: &[],
            },
            TrajectoryEvent::ReaderDigest(ReaderDigestEntry::NotStarted {
                question: "where is the flush?",
                accepted: false,
                dropped_reason: "the reader could not start: no sandbox".into(),
            }),
            TrajectoryEvent::ReaderDigest(ReaderDigestEntry::Finished {
                question: "where is the flush?",
                max_reads: 8,
                max_turns: 6,
                reads_made: 4,
                model_calls: 3,
                repaired: false,
                accepted: true,
                dropped_reason: None,
                digest: Some(&f.digest),
            }),
            TrajectoryEvent::OpenPrReply {
                accepted: true,
                code: None,
                reply: Some(BrokerReply::Failed {
                    message: "store is down".into(),
                }),
                error: None,
            },
            TrajectoryEvent::OpenPrReply {
                accepted: false,
                code: None,
                reply: None,
                error: Some("connection refused".into()),
            },
            TrajectoryEvent::ReviewRefused {
                off_diff: &f.problems,
            },
            TrajectoryEvent::SubmitReviewReply {
                reply: None,
                error: Some("connection refused".into()),
            },
            TrajectoryEvent::ForcedEscalation {
                reason: "confidence 0.3 is below the floor 0.6",
            },
            TrajectoryEvent::ReviewEnd {
                reason: "review queued",
                queue_id: Some(4),
            },
            TrajectoryEvent::BudgetExhausted {
                reason: "max_turns 12 reached",
                parked_on: None,
            },
            TrajectoryEvent::BudgetExhausted {
                reason: "max_turns 12 reached",
                parked_on: Some(ParkedOn::MaxTurns),
            },
            TrajectoryEvent::ClosingTurnFailed {
                error: "model: timed out".into(),
            },
            TrajectoryEvent::Outcome {
                outcome: &f.outcome,
                stop: "final_message",
                pr_queued: false,
                parked: false,
                turns: 3,
                reads: 1,
                full_runs: 0,
                refusals: 0,
            },
            TrajectoryEvent::ModelFinishProblem {
                problem: "2 scripted turns were not played",
            },
            TrajectoryEvent::ModelUsage(ModelUsage {
                calls: 3,
                input_tokens: 1200,
                cost_usd: 0.01,
                ..ModelUsage::default()
            }),
        ]
    }

    #[test]
    fn every_kind_satisfies_the_schema_and_the_schema_names_no_other() {
        let f = fixtures();
        let events = one_of_every_kind(&f);
        for (i, event) in events.iter().enumerate() {
            let line = entry(i as u64 + 1, event).unwrap();
            assert_eq!(line["kind"], kind_of(event), "{line}");
            let violations = Schema::TrajectoryEvent.violations(&line).unwrap();
            assert!(violations.is_empty(), "{line}\n{violations:#?}");
        }
        let built: BTreeSet<&str> = events.iter().map(kind_of).collect();
        let schema = Schema::TrajectoryEvent.value().unwrap();
        let named: BTreeSet<&str> = schema["properties"]["kind"]["enum"]
            .as_array()
            .unwrap()
            .iter()
            .map(|k| k.as_str().unwrap())
            .collect();
        assert_eq!(built, named);
    }

    #[test]
    fn a_line_is_numbered_with_its_keys_sorted_and_a_wrong_field_is_refused() {
        let line = entry(
            7,
            &TrajectoryEvent::ForcedEscalation {
                reason: "no green full run",
            },
        )
        .unwrap();
        assert_eq!(
            line.to_string(),
            r#"{"kind":"forced_escalation","reason":"no green full run","seq":7}"#
        );
        let mut wrong = line.clone();
        wrong["problem"] = json!("x");
        assert!(
            !Schema::TrajectoryEvent
                .violations(&wrong)
                .unwrap()
                .is_empty()
        );
        let mut unnumbered = line;
        unnumbered["seq"] = json!(0);
        assert!(
            !Schema::TrajectoryEvent
                .violations(&unnumbered)
                .unwrap()
                .is_empty()
        );
    }
}
