//! What the judge (`airlock judge`) asks of the broker: the queue items it scores, as their
//! artefacts, and the score it attaches. The broker stores and audits the score; the judge never
//! opens the broker's database or audit log.

use serde::{Deserialize, Serialize};

use airlock_policies::testrun::Grade;

/// Which queue items the judge asks for: one (`id`), or every item between `from` and `to`
/// (inclusive; an absent end is open).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JudgeSelection {
    /// One queue item.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<i64>,
    /// The first queue id of a batch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from: Option<i64>,
    /// The last queue id of a batch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub to: Option<i64>,
}

/// One witness step as the judge sees it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JudgeEvidence {
    /// The step's recorded name (`pinned_selected`, `patched_selected`, `base_full`,
    /// `patched_full`).
    pub step: String,
    /// What it had to show (`fail`, `pass`, `inventory`, `green`).
    pub expect: String,
    /// The command line.
    pub argv: Vec<String>,
    /// Exit code, `None` when killed.
    pub exit_code: Option<i32>,
    /// Standard output, as kept.
    pub stdout: String,
    /// Standard error, as kept.
    pub stderr: String,
    /// The step's grade.
    pub grade: Grade,
}

/// A queue item as the judge may see it: its artefacts, none of the approver's decisions.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JudgeSubject {
    /// The queue item.
    pub queue_id: i64,
    /// The run that queued it.
    pub run_id: String,
    /// Repository name as configured in `broker.toml`.
    pub repository: String,
    /// The pinned base.
    pub base_commit: String,
    /// The issue the run worked on.
    pub issue_id: String,
    /// The diff the broker computed.
    pub diff: String,
    /// The open_pr arguments, verbatim.
    pub args: String,
    /// Every witness step.
    pub evidence: Vec<JudgeEvidence>,
    /// The detectors' flags.
    pub flags: Vec<String>,
}

/// The judge's score of one queue item. `judgement` is stored with the item as sent; the
/// broker records its digest, `verdict` and `detail` in its audit log, attributed to the judge.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JudgeScoreSubmission {
    /// The queue item scored.
    pub queue_id: i64,
    /// The full judgement, as the judge made it.
    pub judgement: serde_json::Value,
    /// `accept`, `revise`, `reject`, or `failed` when the judge's answer never validated.
    pub verdict: String,
    /// One line with the scores and the judge model.
    pub detail: String,
}
