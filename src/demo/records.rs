//! The records a scenario's run leaves, read into types: the outcome document `airlock run
//! --json` prints, the run's trajectory lines, and the audit logs' events (through
//! `airlock-audit`'s own reader). A record that does not read is skipped, as a person reading
//! the logs would skip a damaged line; the checks then report what is missing.

use airlock_audit::Event;
use airlock_model::{Message, ToolCall};
use airlock_protocol::BrokerReply;
use serde::Deserialize;
use serde_json::Value;
use std::path::Path;

/// The fields of the outcome document (`outcome.json`, printed by `airlock run --json`) the
/// demo checks.
#[derive(Debug, Default, Deserialize)]
pub(super) struct RunDocument {
    /// The run id; empty when the run ended before it had one.
    #[serde(default)]
    pub(super) run_id: String,
    /// `pr_queued`, `escalated`, `not_ready`, `parked`, `failed`, ...
    #[serde(default)]
    pub(super) result: Option<String>,
    /// The model's outcome, when the run got one.
    #[serde(default)]
    pub(super) outcome: Option<airlock_schemas::Outcome>,
}

impl RunDocument {
    /// The result word, `?` when the document has none.
    pub(super) fn result(&self) -> &str {
        self.result.as_deref().unwrap_or("?")
    }

    /// How many files the outcome says the diff touches.
    pub(super) fn files_changed(&self) -> usize {
        self.outcome.as_ref().map_or(0, |o| o.files_changed.len())
    }
}

/// A triage decision as the trajectory records it.
#[derive(Debug, Deserialize)]
pub(super) struct TriageDecision {
    /// The state's label spelling (`ready-for-agent`, ...).
    pub(super) state: String,
    /// Why.
    #[serde(default)]
    pub(super) reason: String,
}

/// The trajectory entries the demo shows or checks (the supervisor's `TrajectoryEvent`, read
/// back); every other kind is [`TrajectoryRecord::Other`].
#[derive(Debug, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub(super) enum TrajectoryRecord {
    /// The triage decision.
    Triage {
        /// The decision and why.
        triage: TriageDecision,
    },
    /// A tool call of the model.
    ToolCall {
        /// The call.
        call: ToolCall,
    },
    /// The result of a tool call, as handed back to the model.
    ToolResult {
        /// The tool message.
        message: Message,
    },
    /// A reader delegation ended (or could not start: then no reads are recorded).
    ReaderDigest {
        /// Whether its digest was accepted.
        accepted: bool,
        /// Reads it made.
        #[serde(default)]
        reads_made: Option<u32>,
    },
    /// The injection detector flagged a text about to reach the model.
    InjectionSuspected {
        /// Where the text came from.
        path: String,
        /// The rules of the new findings.
        rules: Vec<String>,
    },
    /// The broker's answer to `open_pr`.
    OpenPrReply {
        /// The broker's reply, when there was one.
        #[serde(default)]
        reply: Option<BrokerReply>,
    },
    /// Any other entry.
    #[serde(other)]
    Other,
}

/// The trajectory of run `run_id` under `workdir/runs/`, in order; empty without a run id.
pub(super) fn read_trajectory(workdir: &Path, run_id: &str) -> Vec<TrajectoryRecord> {
    if run_id.is_empty() {
        return Vec::new();
    }
    let path = workdir.join("runs").join(run_id).join("trajectory.jsonl");
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

/// The names of the tools the model called, in order.
pub(super) fn tool_calls(trajectory: &[TrajectoryRecord]) -> Vec<String> {
    trajectory
        .iter()
        .filter_map(|r| match r {
            TrajectoryRecord::ToolCall { call } => Some(call.name.clone()),
            _ => None,
        })
        .collect()
}

/// The queue item of the run's first `open_pr` reply, when the broker gave one.
pub(super) fn queue_id(trajectory: &[TrajectoryRecord]) -> Option<i64> {
    let reply = trajectory.iter().find_map(|r| match r {
        TrajectoryRecord::OpenPrReply { reply } => Some(reply),
        _ => None,
    })?;
    match reply.as_ref()? {
        BrokerReply::Queued { queue_id }
        | BrokerReply::Pending { queue_id }
        | BrokerReply::Approved { queue_id, .. } => Some(*queue_id),
        _ => None,
    }
}

/// Print the run's triage, tool calls with their results, reader digests and detector flags,
/// in trajectory order.
pub(super) fn print_trajectory(trajectory: &[TrajectoryRecord]) {
    if let Some(t) = trajectory.iter().find_map(|r| match r {
        TrajectoryRecord::Triage { triage } => Some(triage),
        _ => None,
    }) {
        outln!("  triage: {} ({})", t.state, t.reason);
    }
    for record in trajectory {
        match record {
            TrajectoryRecord::ToolCall { call } => {
                outln!("  tool {} {}", call.name, brief_args(&call.arguments));
            }
            TrajectoryRecord::ToolResult { message } => {
                let (content, is_error) = match message {
                    Message::Tool(result) => (result.content.as_str(), result.is_error),
                    Message::System { content } | Message::User { content } => {
                        (content.as_str(), false)
                    }
                    Message::Assistant(_) => ("", false),
                };
                let first = content.lines().next().unwrap_or("");
                let mark = if is_error { "error" } else { "ok" };
                outln!("    -> {mark}: {}", truncate(first, 100));
            }
            TrajectoryRecord::ReaderDigest {
                accepted,
                reads_made,
            } => outln!(
                "    reader digest accepted: {accepted}, reads made: {}",
                reads_made.map_or_else(|| "null".to_owned(), |n| n.to_string())
            ),
            TrajectoryRecord::InjectionSuspected { path, rules } => outln!(
                "    !! detector: injection suspected in {path} ({})",
                serde_json::to_string(rules).unwrap_or_default()
            ),
            TrajectoryRecord::Triage { .. }
            | TrajectoryRecord::OpenPrReply { .. }
            | TrajectoryRecord::Other => {}
        }
    }
}

/// The typed events of run `run_id` in the audit log at `path`, in log order; empty when the
/// log cannot be read.
pub(super) fn run_events(path: &Path, run_id: &str) -> Vec<Event> {
    let Ok(scan) = airlock_audit::scan(path) else {
        return Vec::new();
    };
    airlock_audit::timeline(&scan, run_id)
        .into_iter()
        .filter_map(|r| r.event().ok())
        .collect()
}

/// The broker's last decision on a run: its code and its one line of detail.
pub(super) struct BrokerDecision {
    /// `QUEUED`, `POLICY_VIOLATION`, ...
    pub(super) code: String,
    /// The detail, empty when there is none.
    pub(super) detail: String,
}

/// The last `broker_decision` among `events`.
pub(super) fn last_decision(events: &[Event]) -> Option<BrokerDecision> {
    events.iter().rev().find_map(|e| match e {
        Event::BrokerDecision { code, detail } => Some(BrokerDecision {
            code: code.clone(),
            detail: detail.clone().unwrap_or_default(),
        }),
        _ => None,
    })
}

/// A tool call's arguments in one short line, `key=value ...`, leaving out the long texts
/// (file contents, bodies, digests). The arguments are the model's free-form JSON, shown as
/// given.
fn brief_args(args: &Value) -> String {
    let Some(map) = args.as_object() else {
        return String::new();
    };
    let parts: Vec<String> = map
        .iter()
        .filter(|(k, _)| {
            !matches!(
                k.as_str(),
                "content" | "body" | "diff_digest" | "test_evidence" | "why"
            )
        })
        .map(|(k, v)| {
            let v = match v {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            };
            format!("{k}={}", truncate(&v, 48))
        })
        .collect();
    parts.join(" ")
}

/// `text` cut to `max` characters, an ellipsis marking the cut.
fn truncate(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        text.to_string()
    } else {
        let cut: String = text.chars().take(max).collect();
        format!("{cut}…")
    }
}
