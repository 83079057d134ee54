//! One request, by operation, and its line on the wire ([`WireRequest`]).

use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

use airlock_policies::network::BlockedAttempt;

use crate::{
    ClaimRelease, ClaimRequest, EnqueueWork, IssueQuestion, ItemFinding, JudgeScoreSubmission,
    JudgeSelection, PrFeedback, Preflight, QuestionLookup, QuestionReply, ReviewSubmission,
    RunRegistration, SubmittedChange, TakeWork,
};

/// One request, by operation: what a supervisor (or the CLI's client) asks the broker.
/// On the wire it is one JSON object with `op` naming the operation ([`WireRequest`]); a line
/// whose `op` is unknown or lacks its operation's fields does not parse, and the error says
/// which fields the operation needs.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(try_from = "WireRequest", into = "WireRequest")]
pub enum Request {
    /// `register_run`: the run's details, before any `open_pr`. Answered
    /// [`crate::RegisterRunReply`].
    RegisterRun(Box<RunRegistration>),
    /// `open_pr`: the model's tool-call arguments, byte for byte. Answered
    /// [`crate::OpenPrReply`].
    OpenPr {
        /// The registered run.
        run_id: String,
        /// The idempotency key, chosen by the sender for the call ([`crate::open_pr_call_id`]
        /// for a run's calls): a resent request with the same key gets the stored reply instead
        /// of a second intake; another key is another call, whatever its arguments.
        request_id: String,
        /// The arguments exactly as the model produced them.
        args: Box<RawValue>,
        /// The run's change, for a run registered with [`crate::TreeTransfer::Bytes`].
        change: Option<Box<SubmittedChange>>,
        /// What the egress proxy refused the run's own test runs, as the run reports it: the
        /// broker stores and shows it, attributed to the run, and acts on none of it.
        network_blocked: Vec<BlockedAttempt>,
        /// What the run's screening and its model reported seeing on the way, as the run
        /// reports it: the broker stores and shows it, attributed to the run, and acts on
        /// none of it.
        findings: Vec<ItemFinding>,
    },
    /// `decision`: the current decision on the run's queued pull request. Answered
    /// [`crate::DecisionReply`].
    Decision {
        /// The registered run.
        run_id: String,
    },
    /// `claim`: take the issue for `holder` for `lease_secs` (or extend the lease the holder
    /// already has). Answered [`crate::ClaimReply`].
    Claim(ClaimRequest),
    /// `renew_claim`: extend the lease `holder` has on the issue. A lease that expired and was
    /// taken by another holder is [`crate::ClaimReply::ClaimTaken`]: the renewing worker must stop.
    RenewClaim(ClaimRequest),
    /// `release_claim`: end `holder`'s claim, as done (no worker takes the issue again) or
    /// abandoned (another worker may take it at once). Answered [`crate::ReleaseReply`].
    ReleaseClaim(ClaimRelease),
    /// `follow_up`: what a follow-up run on queue item `queue_id` needs (the branch head, the
    /// issue and the reviewer's feedback). Answered [`crate::FollowUpReply`].
    FollowUp {
        /// The queue item changes were requested on.
        queue_id: i64,
    },
    /// `enqueue_work`: put issues on the broker's shared work queue (a trigger that feeds the
    /// workers: `airlock watch --enqueue`). Answered [`crate::EnqueueReply`].
    EnqueueWork(EnqueueWork),
    /// `take_work`: take the oldest ready issue of the broker's shared work queue for
    /// `holder`, as a claim with a lease. Answered [`crate::TakeWorkReply`]
    /// (`no_work` when nothing is ready).
    TakeWork(TakeWork),
    /// `submit_review`: queue a pull request review for an approver. Answered
    /// [`crate::SubmitReviewReply`]: queued or refused (SCHEMA_INVALID, or POLICY_VIOLATION
    /// naming the first comment that is not on a line of the diff).
    SubmitReview(Box<ReviewSubmission>),
    /// `pr_feedback`: a reviewer acted on a pull request on the forge (a webhook saw it). The
    /// broker reads the review or comment from the forge itself, checks that the pull request
    /// is one it opened and that the author may ask for changes, records the change request on
    /// the pull request's latest published queue item, and answers [`crate::FollowUpReply`].
    /// Nothing of the reviewer's text travels in the request: the asker is not believed.
    PrFeedback(PrFeedback),
    /// `judge_subjects`: the queue items the judge scores, as their artefacts. Answered
    /// [`crate::JudgeSubjectsReply`].
    JudgeSubjects(JudgeSelection),
    /// `judge_score`: attach the judge's score to a queue item; the broker stores it and
    /// records it in its audit log. Answered [`crate::JudgeScoreReply`].
    JudgeScore(Box<JudgeScoreSubmission>),
    /// `report_findings`: what the run learnt after its accepted `open_pr` (the model's own
    /// `injection_observed` in its final message), stored with the run's queued item as data,
    /// attributed to the run. Answered [`crate::ReportFindingsReply`].
    ReportFindings {
        /// The registered run.
        run_id: String,
        /// The findings, as the run reports them.
        findings: Vec<ItemFinding>,
    },
    /// `preflight`: what a run asks before it pins: whether the broker knows the repository
    /// and which of the issue's queue items are still open. Answered
    /// [`crate::PreflightReply`]; it changes nothing.
    Preflight(Preflight),
    /// `ask_question`: post the escalated run's question on its issue and label it
    /// `needs-info`. Answered [`crate::AskQuestionReply`].
    AskQuestion(Box<IssueQuestion>),
    /// `open_question`: the open questions of an issue (or of a repository). Answered
    /// [`crate::OpenQuestionReply`].
    OpenQuestion(QuestionLookup),
    /// `close_question`: a reply may have come on an issue with an open question; the broker
    /// reads the issue from the forge and closes the question when a reply by the author or a
    /// member answers it (taking the `needs-info` label off) or the issue is gone. Answered
    /// [`crate::CloseQuestionReply`].
    CloseQuestion(QuestionReply),
}

impl Request {
    /// An `open_pr` request for `args_text` (one JSON value, sent as it is), keyed by
    /// `request_id`.
    pub fn open_pr(
        run_id: &str,
        args_text: &str,
        request_id: &str,
    ) -> Result<Request, serde_json::Error> {
        Ok(Request::OpenPr {
            run_id: run_id.to_owned(),
            request_id: request_id.to_owned(),
            args: RawValue::from_string(args_text.to_owned())?,
            change: None,
            network_blocked: Vec::new(),
            findings: Vec::new(),
        })
    }

    /// An `open_pr` request for `args_text` that carries the run's change, keyed by
    /// `request_id` (a resend carries the same change).
    pub fn open_pr_with_change(
        run_id: &str,
        args_text: &str,
        change: SubmittedChange,
        request_id: &str,
    ) -> Result<Request, serde_json::Error> {
        Ok(Request::OpenPr {
            run_id: run_id.to_owned(),
            request_id: request_id.to_owned(),
            args: RawValue::from_string(args_text.to_owned())?,
            change: Some(Box::new(change)),
            network_blocked: Vec::new(),
            findings: Vec::new(),
        })
    }

    /// The same request carrying what the egress proxy refused the run's test runs (only an
    /// `open_pr` carries it; other requests are returned unchanged). Not part of the
    /// idempotency key: a resend carries the same list.
    pub fn with_network_blocked(mut self, blocked: Vec<BlockedAttempt>) -> Request {
        if let Request::OpenPr {
            network_blocked, ..
        } = &mut self
        {
            *network_blocked = blocked;
        }
        self
    }

    /// The same request carrying what the run's screening and its model reported (only an
    /// `open_pr` carries it; other requests are returned unchanged). Not part of the
    /// idempotency key.
    pub fn with_findings(mut self, reported: Vec<ItemFinding>) -> Request {
        if let Request::OpenPr { findings, .. } = &mut self {
            *findings = reported;
        }
        self
    }

    /// The operation's wire name.
    pub fn op(&self) -> &'static str {
        match self {
            Request::RegisterRun(_) => "register_run",
            Request::OpenPr { .. } => "open_pr",
            Request::Decision { .. } => "decision",
            Request::Claim(_) => "claim",
            Request::RenewClaim(_) => "renew_claim",
            Request::ReleaseClaim(_) => "release_claim",
            Request::FollowUp { .. } => "follow_up",
            Request::PrFeedback(_) => "pr_feedback",
            Request::SubmitReview(_) => "submit_review",
            Request::TakeWork(_) => "take_work",
            Request::EnqueueWork(_) => "enqueue_work",
            Request::JudgeSubjects(_) => "judge_subjects",
            Request::JudgeScore(_) => "judge_score",
            Request::ReportFindings { .. } => "report_findings",
            Request::Preflight(_) => "preflight",
            Request::AskQuestion(_) => "ask_question",
            Request::OpenQuestion(_) => "open_question",
            Request::CloseQuestion(_) => "close_question",
        }
    }
}

/// One request line as it travels: `op` is `register_run`, `open_pr`, `decision`, `claim`,
/// `renew_claim`, `release_claim`, `enqueue_work`, `take_work`, `follow_up`, `pr_feedback`,
/// `submit_review`, `judge_subjects`, `judge_score`, `report_findings` or `preflight`, with
/// that operation's fields.
/// [`Request`] is what both sides handle.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct WireRequest {
    /// The operation.
    pub op: String,
    /// For `register_run`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run: Option<RunRegistration>,
    /// For `open_pr` and `decision`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_id: Option<String>,
    /// For `open_pr`: the idempotency key (required: the sender names its call).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_id: Option<String>,
    /// For `open_pr`: the tool-call arguments exactly as the model produced them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub args: Option<Box<RawValue>>,
    /// For `open_pr` of a run registered with [`crate::TreeTransfer::Bytes`]: its change.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub change: Option<Box<SubmittedChange>>,
    /// For `open_pr`: what the egress proxy refused the run's test runs, as the run reports it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub network_blocked: Vec<BlockedAttempt>,
    /// For `open_pr` and `report_findings`: what the run's screening and its model reported,
    /// as the run reports it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub findings: Vec<ItemFinding>,
    /// For `take_work`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub take: Option<TakeWork>,
    /// For `enqueue_work`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enqueue: Option<EnqueueWork>,
    /// For `claim` and `renew_claim`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub claim: Option<ClaimRequest>,
    /// For `release_claim`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub release: Option<ClaimRelease>,
    /// For `follow_up`: the queue item changes were requested on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queue_id: Option<i64>,
    /// For `pr_feedback`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub feedback: Option<PrFeedback>,
    /// For `submit_review`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub submission: Option<ReviewSubmission>,
    /// For `judge_subjects`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub select: Option<JudgeSelection>,
    /// For `judge_score`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub score: Option<JudgeScoreSubmission>,
    /// For `preflight`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preflight: Option<Preflight>,
    /// For `ask_question`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub question: Option<IssueQuestion>,
    /// For `close_question`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reply: Option<QuestionReply>,
    /// For `open_question`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lookup: Option<QuestionLookup>,
}

impl TryFrom<WireRequest> for Request {
    type Error = String;

    fn try_from(w: WireRequest) -> Result<Request, String> {
        match w.op.as_str() {
            "register_run" => match w.run {
                Some(run) => Ok(Request::RegisterRun(Box::new(run))),
                None => Err("register_run needs \"run\"".to_owned()),
            },
            // No default key: one derived from the arguments would make a second call with the
            // same arguments a resend of the first instead of the second call it is.
            "open_pr" => match (w.run_id, w.request_id, w.args) {
                (Some(run_id), Some(request_id), Some(args)) => Ok(Request::OpenPr {
                    request_id,
                    run_id,
                    args,
                    change: w.change,
                    network_blocked: w.network_blocked,
                    findings: w.findings,
                }),
                _ => Err(
                    "open_pr needs \"run_id\", \"request_id\" (the call's idempotency key) and \
                     \"args\""
                        .to_owned(),
                ),
            },
            "decision" => match w.run_id {
                Some(run_id) => Ok(Request::Decision { run_id }),
                None => Err("decision needs \"run_id\"".to_owned()),
            },
            "claim" | "renew_claim" => match w.claim {
                Some(claim) if w.op == "claim" => Ok(Request::Claim(claim)),
                Some(claim) => Ok(Request::RenewClaim(claim)),
                None => Err(format!(
                    "{} needs \"claim\" (repository, issue_number, holder, lease_secs)",
                    w.op
                )),
            },
            "release_claim" => match w.release {
                Some(release) => Ok(Request::ReleaseClaim(release)),
                None => Err(
                    "release_claim needs \"release\" (repository, issue_number, holder, end)"
                        .to_owned(),
                ),
            },
            "enqueue_work" => match w.enqueue {
                Some(enqueue) => Ok(Request::EnqueueWork(enqueue)),
                None => Err("enqueue_work needs \"enqueue\" (by, issues)".to_owned()),
            },
            "take_work" => match w.take {
                Some(take) => Ok(Request::TakeWork(take)),
                None => Err("take_work needs \"take\" (holder, lease_secs, repository)".to_owned()),
            },
            "follow_up" => match w.queue_id {
                Some(queue_id) => Ok(Request::FollowUp { queue_id }),
                None => Err("follow_up needs \"queue_id\"".to_owned()),
            },
            "pr_feedback" => match w.feedback {
                Some(feedback) => Ok(Request::PrFeedback(feedback)),
                None => Err(
                    "pr_feedback needs \"feedback\" (forge_repo, pull_request, source)".to_owned(),
                ),
            },
            "submit_review" => match w.submission {
                Some(submission) => Ok(Request::SubmitReview(Box::new(submission))),
                None => Err(
                    "submit_review needs \"submission\" (run_id, pull: owner, repo, number, \
                     head_sha, and review)"
                        .to_owned(),
                ),
            },
            "judge_subjects" => match w.select {
                Some(select) => Ok(Request::JudgeSubjects(select)),
                None => Err("judge_subjects needs \"select\" (id, or from and to)".to_owned()),
            },
            "judge_score" => match w.score {
                Some(score) => Ok(Request::JudgeScore(Box::new(score))),
                None => Err(
                    "judge_score needs \"score\" (queue_id, judgement, verdict, detail)".to_owned(),
                ),
            },
            "report_findings" => match w.run_id {
                Some(run_id) => Ok(Request::ReportFindings {
                    run_id,
                    findings: w.findings,
                }),
                None => Err("report_findings needs \"run_id\" and \"findings\"".to_owned()),
            },
            "preflight" => match w.preflight {
                Some(preflight) => Ok(Request::Preflight(preflight)),
                None => Err("preflight needs \"preflight\" (repository, issue_id)".to_owned()),
            },
            "ask_question" => match w.question {
                Some(question) => Ok(Request::AskQuestion(Box::new(question))),
                None => Err(
                    "ask_question needs \"question\" (repository, issue_number, run_id, \
                     round, established, ruled_out, question)"
                        .to_owned(),
                ),
            },
            "open_question" => match w.lookup {
                Some(lookup) => Ok(Request::OpenQuestion(lookup)),
                None => Err("open_question needs \"lookup\" (repository, issue_number)".to_owned()),
            },
            "close_question" => match w.reply {
                Some(reply) => Ok(Request::CloseQuestion(reply)),
                None => {
                    Err("close_question needs \"reply\" (repository, issue_number, by)".to_owned())
                }
            },
            other => Err(format!(
                "unknown op {other:?} (expected register_run, open_pr, decision, claim, \
                 renew_claim, release_claim, enqueue_work, take_work, follow_up, pr_feedback, \
                 submit_review, judge_subjects, judge_score, report_findings, preflight, ask_question, \
                 open_question or close_question)"
            )),
        }
    }
}

impl From<Request> for WireRequest {
    fn from(r: Request) -> WireRequest {
        let op = r.op().to_owned();
        match r {
            Request::RegisterRun(run) => WireRequest {
                op,
                run: Some(*run),
                ..WireRequest::default()
            },
            Request::OpenPr {
                run_id,
                request_id,
                args,
                change,
                network_blocked,
                findings,
            } => WireRequest {
                op,
                run_id: Some(run_id),
                request_id: Some(request_id),
                args: Some(args),
                change,
                network_blocked,
                findings,
                ..WireRequest::default()
            },
            Request::TakeWork(take) => WireRequest {
                op,
                take: Some(take),
                ..WireRequest::default()
            },
            Request::EnqueueWork(enqueue) => WireRequest {
                op,
                enqueue: Some(enqueue),
                ..WireRequest::default()
            },
            Request::Decision { run_id } => WireRequest {
                op,
                run_id: Some(run_id),
                ..WireRequest::default()
            },
            Request::Claim(claim) | Request::RenewClaim(claim) => WireRequest {
                op,
                claim: Some(claim),
                ..WireRequest::default()
            },
            Request::ReleaseClaim(release) => WireRequest {
                op,
                release: Some(release),
                ..WireRequest::default()
            },
            Request::FollowUp { queue_id } => WireRequest {
                op,
                queue_id: Some(queue_id),
                ..WireRequest::default()
            },
            Request::PrFeedback(feedback) => WireRequest {
                op,
                feedback: Some(feedback),
                ..WireRequest::default()
            },
            Request::SubmitReview(submission) => WireRequest {
                op,
                submission: Some(*submission),
                ..WireRequest::default()
            },
            Request::JudgeSubjects(select) => WireRequest {
                op,
                select: Some(select),
                ..WireRequest::default()
            },
            Request::JudgeScore(score) => WireRequest {
                op,
                score: Some(*score),
                ..WireRequest::default()
            },
            Request::ReportFindings { run_id, findings } => WireRequest {
                op,
                run_id: Some(run_id),
                findings,
                ..WireRequest::default()
            },
            Request::Preflight(preflight) => WireRequest {
                op,
                preflight: Some(preflight),
                ..WireRequest::default()
            },
            Request::AskQuestion(question) => WireRequest {
                op,
                question: Some(*question),
                ..WireRequest::default()
            },
            Request::OpenQuestion(lookup) => WireRequest {
                op,
                lookup: Some(lookup),
                ..WireRequest::default()
            },
            Request::CloseQuestion(reply) => WireRequest {
                op,
                reply: Some(reply),
                ..WireRequest::default()
            },
        }
    }
}
