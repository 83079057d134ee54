//! `delegate_read`: a read-only reader answers one question within its own budget (the relay
//! and the digest's checks are `crate::delegate`); here the brief is bounded by the run's
//! budgets and the delegation is recorded: the reader's model calls, its tool texts screened,
//! the typed digest's audit event and any injection it reports.

use super::{Tool, ToolReply, Toolbox, args};
use crate::delegate::{self, DelegateCtx};
use crate::ledger::Result;
use crate::reference_repos::WithReferences;
use crate::trajectory::{ReaderDigestEntry, TrajectoryEvent};
use airlock_audit::{Event, SourceKind, sha256_hex};
use airlock_model::{ToolCall, ToolSpec};
use airlock_reader::Brief;
use serde::Deserialize;
use serde_json::json;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct DelegateArgs {
    question: String,
    why: String,
    max_reads: u32,
    max_turns: u32,
}

/// `delegate_read`'s spec.
pub(super) fn spec() -> ToolSpec {
    ToolSpec {
        name: Tool::DelegateRead.name().into(),
        description: "Start a read-only reader with its own budget to answer one question. \
                      It knows only the question and why; it returns a checked digest \
                      (answer, anchors, ruled_out, complete, reads_used)."
            .into(),
        input_schema: json!({
            "type": "object", "additionalProperties": false,
            "required": ["question", "why", "max_reads", "max_turns"],
            "properties": {
                "question": {"type": "string", "minLength": 1},
                "why": {"type": "string", "minLength": 1, "description": "At most two sentences of context."},
                "max_reads": {"type": "integer", "minimum": 1},
                "max_turns": {"type": "integer", "minimum": 1}
            }
        }),
    }
}

pub(super) fn delegate_read(tb: &mut Toolbox<'_>, call: &ToolCall) -> Result<ToolReply> {
    let args: DelegateArgs = match args(call) {
        Ok(a) => a,
        Err(reply) => return Ok(reply),
    };
    let budgets = &tb.run.config.budgets;
    let brief = Brief {
        repo: tb.run.repo.to_string(),
        base_commit: tb.run.base_commit.to_string(),
        question: args.question,
        why: args.why,
        max_reads: args.max_reads.clamp(1, budgets.reader_max_reads),
        max_turns: args.max_turns.clamp(1, budgets.reader_max_turns),
        references: Vec::new(),
    };
    // The reference repositories are materialised for the worker to read; one that cannot be
    // is left out of the brief (the agent's own reads of it say why).
    let mounts = if tb.references.is_empty() {
        Vec::new()
    } else {
        tb.references.mounts()
    };
    let brief = Brief {
        references: mounts.iter().map(|m| m.slug.clone()).collect(),
        ..brief
    };
    let with_references = WithReferences {
        worktree: tb.worktree,
        references: tb.references,
    };
    let ctx = DelegateCtx {
        model: tb.model,
        worktree: &with_references,
        launcher: tb.readers,
        references: &mounts,
    };
    let ledger = &mut tb.ledger;
    ledger.counts.delegations += 1;
    let delegation = ledger.counts.delegations;
    let d = match delegate::delegate(&ctx, &brief) {
        Ok(d) => d,
        Err(e) => {
            ledger.record(&TrajectoryEvent::ReaderDigest(
                ReaderDigestEntry::NotStarted {
                    question: &brief.question,
                    accepted: false,
                    dropped_reason: format!("the reader could not start: {e}"),
                },
            ))?;
            ledger.append(Event::PolicyRefusal {
                path: Tool::DelegateRead.name().into(),
                rule: "reader-not-started".into(),
                reader: None,
            })?;
            return Ok(ToolReply::error(format!(
                "{} failed: the reader could not start: {e}",
                Tool::DelegateRead.name()
            )));
        }
    };
    for (i, text) in d.tool_texts.iter().enumerate() {
        ledger.screen(
            SourceKind::ToolOutput,
            &format!("reader:tool_result:{i}"),
            text,
        )?;
    }
    for r in &d.rendered {
        ledger.append(Event::HiddenTextRendered {
            source: format!("reader:tool_result:{}", r.index),
            characters: r.characters,
            kinds: r.kinds.clone(),
        })?;
    }
    for event in delegate::read_events(ctx.worktree, &d, delegation) {
        ledger.append(event)?;
    }
    for call in &d.calls {
        ledger.model_call(&call.usage, call.latency_ms, call.cost_usd)?;
    }
    ledger.record(&TrajectoryEvent::ReaderDigest(delegate::trajectory_entry(
        &brief, &d,
    )))?;
    match &d.digest {
        Some(digest) => {
            let brief_json = serde_json::to_string(&brief).unwrap_or_default();
            let digest_json = serde_json::to_string(digest).unwrap_or_default();
            ledger.append(Event::ReaderDigest {
                brief_digest: sha256_hex(brief_json.as_bytes()),
                digest_digest: sha256_hex(digest_json.as_bytes()),
                reads_used: d.reads_made,
                complete: digest.complete,
                anchors: u32::try_from(digest.anchors.len()).unwrap_or(u32::MAX),
            })?;
            for path in &digest.injection_observed {
                ledger.append(Event::InjectionObserved {
                    path: path.clone(),
                    excerpt: "reported by a reader worker in its digest".into(),
                    line: None,
                })?;
                ledger.work.findings.push(airlock_protocol::ItemFinding::at(
                    airlock_protocol::FindingSource::Model,
                    path,
                    None,
                    airlock_protocol::MODEL_REPORTED,
                    "reported by a reader worker in its digest",
                ));
            }
        }
        None => {
            ledger.append(Event::PolicyRefusal {
                path: Tool::DelegateRead.name().into(),
                rule: "reader-digest-dropped".into(),
                reader: None,
            })?;
        }
    }
    let rendered = delegate::render_for_model(&d);
    Ok(if rendered.is_error {
        ToolReply::error(rendered.text)
    } else {
        ToolReply::ok(rendered.text)
    })
}
