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
    /// The run's summary, for the next run.
    #[serde(default)]
    pub summary: String,
    /// The files the run found most relevant (what it read, in order), for the next run's
    /// warm start. Never posted on the forge.
    #[serde(default)]
    pub likely_files: Vec<String>,
}

/// A question the broker keeps open (in its store, so that a reply handled by any worker or
/// webhook receiver finds it) until a reply answers it or its issue is gone.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OpenQuestion {
    /// The question as the run asked it (its findings, its round).
    pub question: IssueQuestion,
    /// Unix seconds when the broker asked it.
    pub asked_at: i64,
}

/// An `open_question` request: the open questions of one repository's issue, or of all of
/// its issues when `issue_number` is absent.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct QuestionLookup {
    /// The repository's name at the broker.
    pub repository: String,
    /// One issue; every issue of the repository when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub issue_number: Option<u64>,
}

/// A `close_question` request: a reply may have come on an issue with an open question. The
/// broker reads the issue and its comments after the question from the forge itself (who
/// wrote each and their standing there, never what a delivery claimed), and closes the
/// question when one of them answers it or the issue is gone.
// No `deny_unknown_fields`: serde does not support it beside `flatten`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct QuestionReply {
    /// The issue.
    #[serde(flatten)]
    pub issue: IssueKey,
    /// Who asks (the trigger's holder id), for the record.
    pub by: String,
}

/// A comment after the question, as the broker read it from the forge.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReplyAuthor {
    /// The comment's id on the forge.
    pub comment_id: u64,
    /// Its author's forge login, prefixed with the forge (`github:alice`).
    pub by: String,
    /// The author's standing as the forge says it (`author`, GitHub's `author_association`,
    /// GitLab's access level).
    pub standing: String,
}

/// The reply that answered a question: its author and its text, as the forge has them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct QuestionAnswer {
    /// Who wrote it, with their standing.
    pub author: ReplyAuthor,
    /// The text (a person's words: data, screened and quoted for the next run).
    pub body: String,
}

/// Why a question closed without an answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum QuestionEnd {
    /// The forge no longer has the issue (404).
    IssueDeleted,
    /// The issue was closed.
    IssueClosed,
}

impl QuestionEnd {
    /// The end as stored and audited.
    pub fn as_str(self) -> &'static str {
        match self {
            QuestionEnd::IssueDeleted => "issue_deleted",
            QuestionEnd::IssueClosed => "issue_closed",
        }
    }
}
