//! One reply line ([`BrokerReply`], the wire envelope), and per request the reply it can get.

use serde::{Deserialize, Serialize};

use airlock_schemas::BrokerError;

use crate::{
    ClaimStatus, FollowUpBrief, ForgeMark, JudgeSubject, OpenItem, OpenQuestion, QuestionAnswer,
    QuestionEnd, ReplyAuthor,
};

/// One reply line.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum BrokerReply {
    /// The run is registered (or was already registered with identical details).
    Registered {
        /// The run.
        run_id: String,
    },
    /// open_pr passed every check and waits for a human.
    Queued {
        /// Queue item id, as `airlock-broker show` takes it.
        queue_id: i64,
    },
    /// No decision yet on the run's queued pull request.
    Pending {
        /// Queue item id.
        queue_id: i64,
    },
    /// Approved and published.
    Approved {
        /// Queue item id.
        queue_id: i64,
        /// The pushed branch, `airlock/<issue-id>-<queue id>`.
        branch: String,
        /// The commit that was pushed.
        commit: String,
        /// The draft pull request, when a forge token is configured.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pr_url: Option<String>,
    },
    /// Refused under the open_pr error contract.
    Refused {
        /// The refusal: code, retryability and what the code returns.
        error: BrokerError,
    },
    /// The claim is the asker's (newly taken, or its lease extended).
    Claimed {
        /// The claim as stored.
        claim: ClaimStatus,
        /// Whether the asker newly took it (false: it already held it and the lease was
        /// extended).
        acquired: bool,
        /// The label on the forge.
        forge: ForgeMark,
    },
    /// Another holder has the issue, or its run is done: the asker must not work on it.
    ClaimTaken {
        /// The claim as stored.
        claim: ClaimStatus,
    },
    /// The claim ended as asked.
    Released {
        /// The claim as stored.
        claim: ClaimStatus,
        /// The label on the forge (removed when abandoned).
        forge: ForgeMark,
    },
    /// The answer to `follow_up`: what the follow-up run starts from.
    FollowUp {
        /// The change request and the branch head.
        brief: Box<FollowUpBrief>,
    },
    /// `take_work` found no ready issue.
    NoWork,
    /// `enqueue_work` took the issues.
    Enqueued {
        /// How many were not on the queue already.
        added: usize,
    },
    /// The queue items the judge asked for.
    Subjects {
        /// In queue order.
        subjects: Vec<JudgeSubject>,
    },
    /// The judge's score is stored with the item and recorded in the audit log.
    ScoreRecorded {
        /// The queue item.
        queue_id: i64,
    },
    /// What the run reported after its `open_pr` is stored with its queued item.
    FindingsRecorded {
        /// The queue item.
        queue_id: i64,
        /// How many findings the item lists now.
        findings: usize,
    },
    /// The answer to `preflight`: whether the broker knows the repository, and the issue's
    /// open queue items.
    Preflight {
        /// Whether `broker.toml` configures the repository.
        repository_known: bool,
        /// The items still waiting for a human (or for their publication), oldest first.
        open_items: Vec<OpenItem>,
    },
    /// `ask_question`: the question's comment and label on the forge.
    QuestionAsked {
        /// The comment's web address; absent when no forge token is configured.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        comment_url: Option<String>,
        /// What became of the `needs-info` label.
        label: ForgeMark,
    },
    /// `open_question`: the open questions asked, oldest first.
    OpenQuestions {
        /// Each open question with what its run established.
        questions: Vec<OpenQuestion>,
    },
    /// `close_question`: a reply by the author or a member answered the question;
    /// it is closed and the label taken off. The next run starts from it.
    QuestionAnswered {
        /// The question (its run's findings and round).
        question: Box<OpenQuestion>,
        /// The answer, as the forge has it.
        answer: QuestionAnswer,
        /// The replies before it that may not answer (recorded).
        ignored: Vec<ReplyAuthor>,
        /// What became of the `needs-info` label.
        label: ForgeMark,
    },
    /// `close_question`: no reply answers the question yet; the replies read that may not
    /// answer it are recorded and not read again.
    QuestionWaiting {
        /// The replies that may not answer it.
        ignored: Vec<ReplyAuthor>,
    },
    /// `close_question`: the issue is gone (deleted or closed); the question is closed with a
    /// record and nothing starts.
    QuestionEnded {
        /// Why.
        reason: QuestionEnd,
    },
    /// `close_question`: the issue has no open question (none was asked, or another worker
    /// took its answer).
    NoQuestion,
    /// The broker could not do its job (not a verdict on the submission).
    Failed {
        /// What went wrong.
        message: String,
    },
}

impl BrokerReply {
    /// The reply's `status` as it travels.
    pub fn status(&self) -> &'static str {
        match self {
            BrokerReply::Registered { .. } => "registered",
            BrokerReply::Queued { .. } => "queued",
            BrokerReply::Pending { .. } => "pending",
            BrokerReply::Approved { .. } => "approved",
            BrokerReply::Refused { .. } => "refused",
            BrokerReply::Claimed { .. } => "claimed",
            BrokerReply::ClaimTaken { .. } => "claim_taken",
            BrokerReply::Released { .. } => "released",
            BrokerReply::FollowUp { .. } => "follow_up",
            BrokerReply::NoWork => "no_work",
            BrokerReply::Enqueued { .. } => "enqueued",
            BrokerReply::Subjects { .. } => "subjects",
            BrokerReply::ScoreRecorded { .. } => "score_recorded",
            BrokerReply::FindingsRecorded { .. } => "findings_recorded",
            BrokerReply::Preflight { .. } => "preflight",
            BrokerReply::QuestionAsked { .. } => "question_asked",
            BrokerReply::OpenQuestions { .. } => "open_questions",
            BrokerReply::QuestionAnswered { .. } => "question_answered",
            BrokerReply::QuestionWaiting { .. } => "question_waiting",
            BrokerReply::QuestionEnded { .. } => "question_ended",
            BrokerReply::NoQuestion => "no_question",
            BrokerReply::Failed { .. } => "failed",
        }
    }
}

/// A reply line whose status the request's operation never gets: a broker of another version,
/// or a bug.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{op}: the broker answered {status:?}, which {op} never gets")]
pub struct UnexpectedReply {
    /// The operation asked.
    pub op: &'static str,
    /// The status that came back.
    pub status: &'static str,
}

/// Per operation, the reply it can get: an enum over exactly those statuses, plus `failed`
/// (the broker could not do its job), which any operation can get. The JSON is that of the
/// matching [`BrokerReply`] variants: the envelope stays the wire format; the broker converts
/// into it and the client out of it, once.
macro_rules! replies {
    ($(
        $(#[$meta:meta])*
        $name:ident for $op:literal {
            $(
                $(#[$vmeta:meta])*
                $variant:ident $({ $( $(#[$fmeta:meta])* $field:ident : $ty:ty ),* $(,)? })?
            ),* $(,)?
        }
    )*) => {$(
        $(#[$meta])*
        #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
        #[serde(tag = "status", rename_all = "snake_case")]
        pub enum $name {
            $(
                $(#[$vmeta])*
                $variant $({ $( $(#[$fmeta])* $field: $ty ),* })?,
            )*
            /// The broker could not do its job (not a verdict on the request).
            Failed {
                /// What went wrong.
                message: String,
            },
        }

        impl $name {
            /// The operation this reply answers.
            pub const OPERATION: &'static str = $op;
        }

        impl From<$name> for BrokerReply {
            fn from(reply: $name) -> BrokerReply {
                match reply {
                    $( $name::$variant $({ $($field),* })? => BrokerReply::$variant $({ $($field),* })?, )*
                    $name::Failed { message } => BrokerReply::Failed { message },
                }
            }
        }

        impl TryFrom<BrokerReply> for $name {
            type Error = UnexpectedReply;
            fn try_from(reply: BrokerReply) -> Result<$name, UnexpectedReply> {
                match reply {
                    $( BrokerReply::$variant $({ $($field),* })? => Ok($name::$variant $({ $($field),* })?), )*
                    BrokerReply::Failed { message } => Ok($name::Failed { message }),
                    other => Err(UnexpectedReply { op: $op, status: other.status() }),
                }
            }
        }
    )*};
}

replies! {
    /// What `register_run` gets.
    RegisterRunReply for "register_run" {
        /// The run is registered (or was already registered with identical details).
        Registered {
            /// The run.
            run_id: String,
        },
    }

    /// What `open_pr` gets: queued for a human, or refused under the error contract.
    OpenPrReply for "open_pr" {
        /// Passed every check and waits for a human.
        Queued {
            /// Queue item id.
            queue_id: i64,
        },
        /// Refused under the open_pr error contract.
        Refused {
            /// The refusal.
            error: BrokerError,
        },
    }

    /// What `decision` gets: the current decision on the run's queued pull request.
    DecisionReply for "decision" {
        /// No decision yet.
        Pending {
            /// Queue item id.
            queue_id: i64,
        },
        /// Approved and published.
        Approved {
            /// Queue item id.
            queue_id: i64,
            /// The pushed branch.
            branch: String,
            /// The commit that was pushed.
            commit: String,
            /// The draft pull request, when a forge token is configured.
            #[serde(default, skip_serializing_if = "Option::is_none")]
            pr_url: Option<String>,
        },
        /// Denied, abandoned or expired (APPROVAL_DENIED, APPROVAL_TIMEOUT).
        Refused {
            /// The refusal.
            error: BrokerError,
        },
    }

    /// What `claim` and `renew_claim` get.
    ClaimReply for "claim" {
        /// The claim is the asker's.
        Claimed {
            /// The claim as stored.
            claim: ClaimStatus,
            /// Whether the asker newly took it.
            acquired: bool,
            /// The label on the forge.
            forge: ForgeMark,
        },
        /// Another holder has the issue, or its run is done.
        ClaimTaken {
            /// The claim as stored.
            claim: ClaimStatus,
        },
    }

    /// What `release_claim` gets.
    ReleaseReply for "release_claim" {
        /// The claim ended as asked.
        Released {
            /// The claim as stored.
            claim: ClaimStatus,
            /// The label on the forge.
            forge: ForgeMark,
        },
    }

    /// What `follow_up` and `pr_feedback` get: what a follow-up run starts from.
    FollowUpReply for "follow_up" {
        /// The change request and the branch head.
        FollowUp {
            /// The brief.
            brief: Box<FollowUpBrief>,
        },
    }

    /// What `enqueue_work` gets.
    EnqueueReply for "enqueue_work" {
        /// The issues were taken.
        Enqueued {
            /// How many were not on the queue already.
            added: usize,
        },
    }

    /// What `take_work` gets: a claim on the oldest ready issue, or nothing.
    TakeWorkReply for "take_work" {
        /// The asker now holds the issue.
        Claimed {
            /// The claim as stored.
            claim: ClaimStatus,
            /// Always true for work taken from the queue.
            acquired: bool,
            /// The label on the forge.
            forge: ForgeMark,
        },
        /// No issue is ready.
        NoWork,
    }

    /// What `submit_review` gets: queued, or the state of the run's item when it has one
    /// already, or refused.
    SubmitReviewReply for "submit_review" {
        /// Queued (or already queued) for an approver.
        Queued {
            /// Queue item id.
            queue_id: i64,
        },
        /// The run's review item was approved and published.
        Approved {
            /// Queue item id.
            queue_id: i64,
            /// The pushed branch (empty for a review).
            branch: String,
            /// The commit (empty for a review).
            commit: String,
            /// The review's URL on the forge.
            #[serde(default, skip_serializing_if = "Option::is_none")]
            pr_url: Option<String>,
        },
        /// Refused, denied or expired.
        Refused {
            /// The refusal.
            error: BrokerError,
        },
    }

    /// What `judge_subjects` gets.
    JudgeSubjectsReply for "judge_subjects" {
        /// The items, in queue order.
        Subjects {
            /// The items.
            subjects: Vec<JudgeSubject>,
        },
    }

    /// What `judge_score` gets.
    JudgeScoreReply for "judge_score" {
        /// Stored and audited.
        ScoreRecorded {
            /// The queue item.
            queue_id: i64,
        },
    }

    /// What `report_findings` gets: stored with the run's queued item (a run whose item was
    /// decided already gets `failed`: what the approver decided on is not changed after).
    ReportFindingsReply for "report_findings" {
        /// Stored with the item.
        FindingsRecorded {
            /// The queue item.
            queue_id: i64,
            /// How many findings the item lists now.
            findings: usize,
        },
    }

    /// What `preflight` gets.
    PreflightReply for "preflight" {
        /// The broker answered.
        Preflight {
            /// Whether `broker.toml` configures the repository.
            repository_known: bool,
            /// The open items, oldest first.
            open_items: Vec<OpenItem>,
        },
    }

    /// What `ask_question` gets.
    AskQuestionReply for "ask_question" {
        /// The comment and the label.
        QuestionAsked {
            /// The comment's web address, when a forge token is configured.
            comment_url: Option<String>,
            /// What became of the `needs-info` label.
            label: ForgeMark,
        },
    }

    /// What `open_question` gets.
    OpenQuestionReply for "open_question" {
        /// The open questions, oldest first.
        OpenQuestions {
            /// Each with what its run established.
            questions: Vec<OpenQuestion>,
        },
    }

    /// What `close_question` gets.
    CloseQuestionReply for "close_question" {
        /// A reply answered the question: the next run starts from it.
        QuestionAnswered {
            /// The question.
            question: Box<OpenQuestion>,
            /// The answer.
            answer: QuestionAnswer,
            /// The replies before it that may not answer.
            ignored: Vec<ReplyAuthor>,
            /// What became of the `needs-info` label.
            label: ForgeMark,
        },
        /// No reply answers it yet.
        QuestionWaiting {
            /// The replies that may not answer it.
            ignored: Vec<ReplyAuthor>,
        },
        /// The issue is gone: closed with a record.
        QuestionEnded {
            /// Why.
            reason: QuestionEnd,
        },
        /// No open question on the issue.
        NoQuestion,
    }

}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn a_typed_reply_travels_as_its_envelope_and_other_statuses_are_named() {
        let queued = OpenPrReply::Queued { queue_id: 7 };
        let envelope: BrokerReply = queued.clone().into();
        assert_eq!(
            serde_json::to_string(&queued).unwrap(),
            serde_json::to_string(&envelope).unwrap()
        );
        assert_eq!(OpenPrReply::try_from(envelope).unwrap(), queued);
        let approved = BrokerReply::Approved {
            queue_id: 1,
            branch: "airlock/x-1".into(),
            commit: "c".into(),
            pr_url: None,
        };
        let line = serde_json::to_string(&approved).unwrap();
        let typed: DecisionReply = serde_json::from_str(&line).unwrap();
        assert_eq!(serde_json::to_string(&typed).unwrap(), line);
        let unexpected = OpenPrReply::try_from(approved).unwrap_err();
        assert_eq!(
            unexpected,
            UnexpectedReply {
                op: "open_pr",
                status: "approved"
            }
        );
        assert_eq!(
            unexpected.to_string(),
            "open_pr: the broker answered \"approved\", which open_pr never gets"
        );
        let failed = BrokerReply::Failed {
            message: "no repository".into(),
        };
        assert_eq!(
            TakeWorkReply::try_from(failed).unwrap(),
            TakeWorkReply::Failed {
                message: "no repository".into()
            }
        );
        assert_eq!(
            TakeWorkReply::try_from(BrokerReply::NoWork).unwrap(),
            TakeWorkReply::NoWork
        );
    }
}
