//! `open_pr`: the gated call. The supervisor refuses it until something was written and a full
//! run is green after the last change; otherwise it forwards the arguments to the broker and
//! hands the model the broker's typed reply. A refusal the model cannot fix ends the run.

use super::{Tool, ToolReply, Toolbox};
use crate::ledger::Result;
use crate::ports::OpenPrReply;
use crate::trajectory::TrajectoryEvent;
use airlock_audit::{Event, sha256_hex};
use airlock_model::{ToolCall, ToolSpec};
use airlock_schemas::{OPEN_PR_TOOL_DESCRIPTION, Schema};
use serde::Deserialize;

/// `open_pr`'s spec: its schema and description come from `airlock-schemas`.
pub(super) fn spec() -> std::result::Result<ToolSpec, String> {
    Ok(ToolSpec {
        name: Tool::OpenPr.name().into(),
        description: OPEN_PR_TOOL_DESCRIPTION.into(),
        input_schema: Schema::OpenPr.value().map_err(|e| e.to_string())?.clone(),
    })
}

/// What the audit event says about a submission. Read leniently: the arguments are the model's
/// and are checked by the broker, not here.
#[derive(Deserialize, Default)]
#[serde(default)]
struct Claimed {
    title: String,
    diff_digest: ClaimedDigest,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct ClaimedDigest {
    files_changed: Vec<String>,
}

/// How the loop takes a broker reply.
struct Answer {
    accepted: bool,
    /// The refusal's code (`SCHEMA_INVALID`, ...), `BROKER_FAILED` for a broker failure.
    code: Option<String>,
    retryable: bool,
}

fn answer(reply: &OpenPrReply) -> Answer {
    match reply {
        OpenPrReply::Queued { .. } => Answer {
            accepted: true,
            code: None,
            retryable: false,
        },
        OpenPrReply::Refused { error } => Answer {
            accepted: false,
            code: Some(error.code.as_str().to_string()),
            retryable: error.retryable,
        },
        OpenPrReply::Failed { .. } => Answer {
            accepted: false,
            code: Some("BROKER_FAILED".into()),
            retryable: false,
        },
    }
}

pub(super) fn open_pr(tb: &mut Toolbox<'_>, call: &ToolCall) -> Result<ToolReply> {
    let name = Tool::OpenPr.name();
    let args = match call.checked_arguments() {
        Ok(v) => v.clone(),
        Err(e) => {
            return Ok(ToolReply::error(format!(
                "invalid arguments for {name}: {e}"
            )));
        }
    };
    // A change claimed inside a reference repository is refused before anything else: those
    // are exemplars, never edit targets.
    let claimed: Claimed = serde_json::from_value(args.clone()).unwrap_or_default();
    if let Some(path) = claimed
        .diff_digest
        .files_changed
        .iter()
        .find(|p| crate::reference_repos::is_reference_path(p))
        && let Some(refused) = super::files::refuse_reference_edit(tb, path)?
    {
        return Ok(refused);
    }
    if !tb.ledger.work.wrote {
        return Ok(ToolReply::error(format!(
            "{name} refused by the supervisor: nothing was written in this run, so there is no \
             diff to submit"
        )));
    }
    if !tb.ledger.work.green_full_since_write {
        return Ok(ToolReply::error(format!(
            "{name} refused by the supervisor: there is no green full run ({} with no selector) \
             after your last change",
            Tool::RunTests.name()
        )));
    }
    let run_id = tb.ledger.run_id().to_string();
    let report = crate::ports::RunReport {
        network_blocked: tb.ledger.work.network_blocked.iter().cloned().collect(),
        findings: airlock_protocol::merge_by_place(tb.ledger.work.findings.iter().cloned()),
    };
    // Each call the broker sees is named by its number in the run (a resumed run counts on
    // from its parked counters): the broker answers a resend of this call once, and refuses a
    // second call after an accepted one, even with the same arguments.
    tb.ledger.counts.open_pr_calls += 1;
    let request_id = airlock_protocol::open_pr_call_id(&run_id, tb.ledger.counts.open_pr_calls);
    let already_accepted = tb.ledger.facts.pr_accepted;
    let reply = tb.broker.open_pr(&run_id, &request_id, &args, &report);
    let answered = reply.as_ref().ok().map(answer);
    let result = match (&reply, &answered) {
        (Ok(r), Some(a)) => {
            let text = serde_json::to_string(r).unwrap_or_default();
            if a.accepted {
                tb.ledger.facts.pr_accepted = true;
                tb.ledger.work.accepted_open_pr = serde_json::from_value(args.clone()).ok();
                ToolReply::ok(text)
            } else if a.retryable {
                ToolReply::error(text)
            } else if already_accepted {
                // The run's pull request stays queued: the run ends, and closes as a `pr`.
                let code = a.code.as_deref().unwrap_or("UNKNOWN");
                ToolReply::ending(
                    text,
                    format!(
                        "a second {name} was answered {code}; the accepted one's pull request \
                         stays queued"
                    ),
                )
            } else {
                let code = a.code.as_deref().unwrap_or("UNKNOWN");
                ToolReply::ending(text, format!("{name} answered {code} (not retryable)"))
            }
        }
        (Err(e), _) => ToolReply::ending(
            format!("{name} could not reach the broker: {e}"),
            format!("the broker is unreachable: {e}"),
        ),
        (Ok(_), None) => ToolReply::error(format!("{name}: the reply was not read")),
    };
    tb.ledger.append(Event::OpenPrSubmitted {
        args_digest: sha256_hex(call.arguments_text().as_bytes()),
        title: claimed.title,
        files_changed: claimed.diff_digest.files_changed,
    })?;
    tb.ledger.record(&TrajectoryEvent::OpenPrReply {
        accepted: answered.as_ref().is_some_and(|a| a.accepted),
        code: answered.as_ref().and_then(|a| a.code.clone()),
        reply: reply
            .as_ref()
            .ok()
            .cloned()
            .map(airlock_protocol::BrokerReply::from),
        error: reply.as_ref().err().map(ToString::to_string),
    })?;
    Ok(result)
}
