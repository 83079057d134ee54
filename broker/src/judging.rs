//! The judge's side of the queue: the items `airlock judge` scores, handed over as their
//! artefacts, and the score it attaches, stored with the item and recorded in the broker's own
//! audit log. The judge reaches both through the protocol (`judge_subjects`, `judge_score`),
//! never through the broker's database or log.

use airlock_audit::Event;
use airlock_protocol::{JudgeEvidence, JudgeScoreSubmission, JudgeSelection, JudgeSubject};

use crate::error::{Error, Result};
use crate::service::{Broker, unix_now};
use crate::store::QueueItem;

/// The verdicts a judge's score may carry (`failed`: its answer never validated).
const VERDICTS: [&str; 4] = ["accept", "revise", "reject", "failed"];

/// The longest `detail` line a score may carry into the audit log.
const MAX_DETAIL_CHARS: usize = 2_000;

impl Broker {
    /// The queue items `select` names, as the judge may see them.
    pub fn judge_subjects(&self, select: &JudgeSelection) -> Result<Vec<JudgeSubject>> {
        let items = match select.id {
            Some(id) => vec![self.queue_item(id)?],
            None => self
                .queue()?
                .into_iter()
                .filter(|i| {
                    select.from.is_none_or(|f| i.id >= f) && select.to.is_none_or(|t| i.id <= t)
                })
                .collect(),
        };
        Ok(items.iter().map(subject_of).collect())
    }

    /// Attach the judge's score to its queue item and record it in the audit log, with the
    /// digest of the judgement as stored.
    pub fn record_judge_score(&self, score: &JudgeScoreSubmission) -> Result<i64> {
        if !VERDICTS.contains(&score.verdict.as_str()) {
            return Err(Error::Protocol(format!(
                "judge_score: verdict {:?} is not one of {}",
                score.verdict,
                VERDICTS.join(", ")
            )));
        }
        if score.detail.chars().count() > MAX_DETAIL_CHARS || score.detail.contains('\n') {
            return Err(Error::Protocol(format!(
                "judge_score: detail must be one line of at most {MAX_DETAIL_CHARS} characters"
            )));
        }
        let item = self.queue_item(score.queue_id)?;
        self.store()
            .attach_judge_score(item.id, &score.judgement, unix_now())?;
        self.journal.record(
            &item.run_id,
            Event::JudgeScore {
                queue_id: item.id,
                verdict: score.verdict.clone(),
                detail: score.detail.clone(),
                judgement_sha256: airlock_audit::sha256_hex(score.judgement.to_string().as_bytes()),
            },
        )?;
        Ok(item.id)
    }
}

fn subject_of(item: &QueueItem) -> JudgeSubject {
    JudgeSubject {
        queue_id: item.id,
        run_id: item.run_id.clone(),
        repository: item.item.repository.clone(),
        base_commit: item.item.base_commit.clone(),
        issue_id: item.item.issue_id.clone(),
        diff: item.item.diff.clone(),
        args: item.item.args.clone(),
        evidence: item
            .item
            .evidence
            .iter()
            .map(|step| JudgeEvidence {
                step: step.step.clone(),
                expect: step.expect.clone(),
                argv: step.argv.clone(),
                exit_code: step.exit_code,
                stdout: step.stdout.clone(),
                stderr: step.stderr.clone(),
                grade: step.grade.clone(),
            })
            .collect(),
        flags: item.item.flags.clone(),
    }
}
