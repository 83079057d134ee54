//! `submit_review`: the reviewer's terminal tool. Its input schema is `schemas/review.json`;
//! the supervisor checks the review against the schema and every comment against the pull
//! request's diff (the same line map the broker applies), so the model can fix a comment off
//! the diff, then forwards it to the broker, which checks it all again from its own objects.
//! An accepted review ends the run.

use super::{Tool, ToolReply, Toolbox};
use crate::ledger::Result;
use crate::ports::{BrokerReply, SubmitReviewReply};
use crate::trajectory::TrajectoryEvent;
use airlock_model::{ToolCall, ToolSpec};
use airlock_policies::diffmap::DiffLineMap;
use airlock_protocol::{PullRequestKey, ReviewSubmission};
use airlock_schemas::{Review, Schema};

/// What the reviewer reviews: the pull request at its head, and the lines of its diff.
#[derive(Debug, Clone)]
pub struct ReviewTarget {
    /// The pull request and the head commit reviewed.
    pub pull: PullRequestKey,
    /// The lines a comment may sit on.
    pub lines: DiffLineMap,
    /// The queue item, once the broker queued the review.
    pub queued: Option<i64>,
}

/// The tool's description models see beside its schema.
const DESCRIPTION: &str = "Submit your review of the pull request: a summary, a verdict \
(approve, comment, request_changes) and inline comments, each on one line of the diff (side \
RIGHT: a line the diff adds or shows as context, numbered in the head version; side LEFT: a \
line it removes or shows as context, numbered in the base version). GATED: the review is \
queued for a human, who posts it on GitHub or denies it. This ends your run.";

/// `submit_review`'s spec: its input schema is `schemas/review.json`.
pub(super) fn spec() -> std::result::Result<ToolSpec, String> {
    Ok(ToolSpec {
        name: Tool::SubmitReview.name().into(),
        description: DESCRIPTION.into(),
        input_schema: Schema::Review.value().map_err(|e| e.to_string())?.clone(),
    })
}

pub(super) fn submit_review(tb: &mut Toolbox<'_>, call: &ToolCall) -> Result<ToolReply> {
    let name = Tool::SubmitReview.name();
    let Some(target) = tb.review.as_ref() else {
        return Ok(ToolReply::error(format!(
            "{name} is not a tool of this run: there is no pull request to review"
        )));
    };
    let args = match call.checked_arguments() {
        Ok(v) => v.clone(),
        Err(e) => {
            return Ok(ToolReply::error(format!(
                "invalid arguments for {name}: {e}"
            )));
        }
    };
    let review: Review = match airlock_schemas::from_value::<Review>(&args) {
        Ok(r) => r,
        Err(e) => {
            let violations: Vec<String> = e
                .violations()
                .iter()
                .map(|v| format!("at {:?} ({}): {}", v.pointer, v.keyword, v.message))
                .collect();
            return Ok(ToolReply::error(format!(
                "{name}: the review does not satisfy its schema: {}; fix it and call {name} again",
                violations.join("; ")
            )));
        }
    };
    let off = target.lines.off_diff_comments(&review);
    if !off.is_empty() {
        let named: Vec<String> = off.iter().map(ToString::to_string).collect();
        tb.ledger
            .record(&TrajectoryEvent::ReviewRefused { off_diff: &named })?;
        return Ok(ToolReply::error(format!(
            "{name} refused by the supervisor: a comment must sit on a line of the diff; {}. \
             Move each to a line the diff shows, or put it in the summary, and call {name} again",
            named.join("; ")
        )));
    }
    let submission = ReviewSubmission {
        run_id: tb.ledger.run_id().to_string(),
        pull: target.pull.clone(),
        review: match serde_json::value::to_raw_value(&args) {
            Ok(raw) => raw,
            Err(e) => return Ok(ToolReply::error(format!("{name}: {e}"))),
        },
    };
    let reply = tb.broker.submit_review(&submission);
    tb.ledger.record(&TrajectoryEvent::SubmitReviewReply {
        reply: reply.as_ref().ok().cloned().map(BrokerReply::from),
        error: reply.as_ref().err().map(ToString::to_string),
    })?;
    Ok(match reply {
        Ok(SubmitReviewReply::Queued { queue_id }) => {
            if let Some(t) = tb.review.as_mut() {
                t.queued = Some(queue_id);
            }
            let text = format!(
                "the review is queued for a human as broker queue item {queue_id}; your run is over"
            );
            ToolReply {
                is_error: false,
                ..ToolReply::ending(text, format!("review queued as item {queue_id}"))
            }
        }
        Ok(SubmitReviewReply::Refused { error }) if error.retryable => ToolReply::error(
            serde_json::to_string(&SubmitReviewReply::Refused { error }).unwrap_or_default(),
        ),
        Ok(other) => {
            let text = serde_json::to_string(&other).unwrap_or_default();
            ToolReply::ending(
                text.clone(),
                format!("{name} was not accepted by the broker: {text}"),
            )
        }
        Err(e) => ToolReply::ending(
            format!("{name} could not reach the broker: {e}"),
            format!("the broker is unreachable: {e}"),
        ),
    })
}
