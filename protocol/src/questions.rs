//! Questions on an issue: a run that escalates because the issue is ambiguous asks its one
//! question on the forge through the broker (`ask_question`), and a reply that answers it ends
//! the wait (`close_question`). The broker writes the comment and the label from these typed
//! fields; nothing else of the run reaches the forge.

use serde::{Deserialize, Serialize};

use crate::IssueKey;

/// The label the broker puts on an issue whose run asked a question (and takes off when the
/// question is answered). Triage skips an issue that carries it.
pub const NEEDS_INFO_LABEL: &str = "needs-info";

/// The hidden marker every question comment of the broker starts with; a comment carrying it
/// is the broker's own, never read back as a reply.
pub const QUESTION_COMMENT_MARKER: &str = "<!-- airlock:question -->";

/// An `ask_question` request: what the escalated run established, what it ruled out, and the
/// one question whose answer would unblock it.
// No `deny_unknown_fields`: serde does not support it beside `flatten`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct IssueQuestion {
    /// The issue.
    #[serde(flatten)]
    pub issue: IssueKey,
    /// The run that escalated (named in the comment's hidden marker and the audit record).
    pub run_id: String,
    /// Which question of this issue this is, from 1.
    pub round: u32,
    /// What the run established (the escalation's root cause, else its summary).
    pub established: String,
    /// What the run ruled out (the escalation's other notes).
    #[serde(default)]
    pub ruled_out: Vec<String>,
    /// The one question.
    pub question: String,
}

/// Whose reply came in on an issue with an open question, and whether the trigger accepted
/// it (the issue's author or a member): a `close_question` request.
// No `deny_unknown_fields`: serde does not support it beside `flatten`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct QuestionReply {
    /// The issue.
    #[serde(flatten)]
    pub issue: IssueKey,
    /// The replier's forge login.
    pub by: String,
    /// The replier's standing on the forge (GitHub's `author_association`, or `AUTHOR`).
    pub association: String,
    /// True when the reply answers the question (a new run starts and the label comes off);
    /// false when it was ignored (recorded only).
    pub accepted: bool,
}
