//! The [`Store`] written once for every SQL [`Backend`]: the statements, the transactions and
//! the decoding of rows. Each write is one transaction that reads what it changes with the
//! dialect's row lock (`FOR UPDATE` on PostgreSQL; SQLite's IMMEDIATE transaction holds the
//! database's write lock instead) and inserts a row that may already exist with
//! `ON CONFLICT DO NOTHING`, so the races the broker cares about are decided inside it.

use super::codec::{QUEUE_COLUMNS, from_json, parse_run_state, queue_item, to_json};
use super::sql::{Backend, Param, advisory_lock, atomically, head_lock_key};
use super::{
    ApprovalRecord, Approver, ChangeRequest, CiCheckRecord, ClaimAttempt, Decision, IntakeOutcome,
    IntakeReply, IntakeStart, JudgeScore, NewApprover, NewQueueItem, QueueInsert, QueueItem,
    QueueStatus, RecordedApproval, ReviewItem, ReviewQueueing, RunRecord, RunState, Store,
    WorkEntry, approvers, ci_checks, claims, questions,
};
use crate::error::{Error, Result};
use airlock_protocol::{ClaimRelease, ClaimRequest, ClaimStatus, IssueKey, RunRegistration};

/// Queue items matching `where_clause` (with `?1` bound to `param`, if any), by id.
fn query_items<B: Backend>(
    b: &mut B,
    where_clause: &str,
    param: Option<Param<'_>>,
) -> Result<Vec<QueueItem>> {
    let sql = format!("SELECT {QUEUE_COLUMNS} FROM queue {where_clause} ORDER BY id");
    b.query("reading the queue", &sql, param.as_slice())?
        .into_iter()
        .map(queue_item)
        .collect()
}

fn item_by_id<B: Backend>(b: &mut B, id: i64) -> Result<Option<QueueItem>> {
    Ok(query_items(b, "WHERE id = ?1", Some(id.into()))?
        .into_iter()
        .next())
}

fn item_of_run<B: Backend>(b: &mut B, run_id: &str) -> Result<Option<QueueItem>> {
    Ok(query_items(b, "WHERE run_id = ?1", Some(run_id.into()))?
        .into_iter()
        .next())
}

/// The status of queue item `id`, locked until the transaction ends; an unknown id is
/// [`Error::UnknownQueueItem`].
pub(super) fn lock_status<B: Backend>(b: &mut B, id: i64, ctx: &str) -> Result<String> {
    let sql = format!(
        "SELECT status FROM queue WHERE id = ?1{}",
        B::DIALECT.lock_rows
    );
    b.query_opt(ctx, &sql, &[id.into()])?
        .ok_or(Error::UnknownQueueItem(id))?
        .text(0)
}

/// Insert a queued item (a pull request, or a review with `review`); its id, or `None` when
/// the run already has one (the unique run id decides between concurrent inserters: the
/// second waits for the first and then inserts nothing).
fn insert_item<B: Backend>(
    b: &mut B,
    run_id: &str,
    request_id: &str,
    item: &NewQueueItem,
    review: Option<&ReviewItem>,
    now: i64,
    ctx: &str,
) -> Result<Option<i64>> {
    let review = review.map(|r| to_json("review", r)).transpose()?;
    let digest = to_json("digest", &item.digest)?;
    let evidence = to_json("evidence", &item.evidence)?;
    let flags = to_json("flags", &item.flags)?;
    let gates = to_json("gates", &item.gates)?;
    let network_blocked = to_json("network_blocked", &item.network_blocked)?;
    let findings = item
        .findings
        .as_ref()
        .map(|f| to_json("findings", f))
        .transpose()?;
    b.query_opt(
        ctx,
        "INSERT INTO queue (run_id, request_id, repository, base_commit, issue_id, title, args, diff, digest, evidence, flags, status, queued_at, review, gates, network_blocked, findings)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17)
         ON CONFLICT (run_id) DO NOTHING RETURNING id",
        &[
            run_id.into(),
            request_id.into(),
            (&item.repository).into(),
            (&item.base_commit).into(),
            (&item.issue_id).into(),
            (&item.title).into(),
            (&item.args).into(),
            (&item.diff).into(),
            (&digest).into(),
            (&evidence).into(),
            (&flags).into(),
            QueueStatus::Queued.as_str().into(),
            now.into(),
            review.as_deref().into(),
            (&gates).into(),
            (&network_blocked).into(),
            findings.as_deref().into(),
        ],
    )?
    .map(|mut row| row.int(0))
    .transpose()
}

/// Queue `item` for `run_id` and mark the run queued, or find the run's earlier item.
fn queue_intake<B: Backend>(
    b: &mut B,
    run_id: &str,
    request_id: &str,
    item: &NewQueueItem,
    now: i64,
    ctx: &str,
) -> Result<QueueInsert> {
    match insert_item(b, run_id, request_id, item, None, now, ctx)? {
        Some(queue_id) => {
            b.execute(
                ctx,
                "UPDATE runs SET state = ?2 WHERE run_id = ?1",
                &[run_id.into(), RunState::Queued.as_str().into()],
            )?;
            Ok(QueueInsert::Inserted { queue_id })
        }
        None => {
            let queue_id = b
                .query_opt(
                    ctx,
                    "SELECT id FROM queue WHERE run_id = ?1",
                    &[run_id.into()],
                )?
                .ok_or_else(|| Error::UnknownRun(run_id.to_owned()))?
                .int(0)?;
            Ok(QueueInsert::RunAlreadyQueued { queue_id })
        }
    }
}

/// Load the items with `ids` (after their transaction), in that order.
fn items<B: Backend>(b: &mut B, ids: Vec<i64>) -> Result<Vec<QueueItem>> {
    let mut out = Vec::new();
    for id in ids {
        if let Some(item) = item_by_id(b, id)? {
            out.push(item);
        }
    }
    Ok(out)
}

impl<B: Backend> Store for B {
    fn register_run(&mut self, run: &RunRegistration, now: i64) -> Result<()> {
        let ctx = "registering a run";
        let text = to_json("run registration", run)?;
        let number = run.issue_number.and_then(|n| i64::try_from(n).ok());
        atomically(self, ctx, |b| {
            let inserted = b.execute(
                ctx,
                "INSERT INTO runs (run_id, registration, state, registered_at, issue_number)
                 VALUES (?1, ?2, ?3, ?4, ?5) ON CONFLICT (run_id) DO NOTHING",
                &[
                    (&run.run_id).into(),
                    (&text).into(),
                    RunState::Active.as_str().into(),
                    now.into(),
                    number.into(),
                ],
            )?;
            if inserted == 0 {
                let stored = b
                    .query_opt(
                        ctx,
                        "SELECT registration FROM runs WHERE run_id = ?1",
                        &[(&run.run_id).into()],
                    )?
                    .ok_or_else(|| Error::UnknownRun(run.run_id.clone()))?
                    .text(0)?;
                let stored: RunRegistration = from_json("run registration", &stored)?;
                if &stored != run {
                    return Err(Error::Registration(format!(
                        "run {:?} is already registered with different details",
                        run.run_id
                    )));
                }
            }
            Ok(())
        })
    }

    fn run(&mut self, run_id: &str) -> Result<Option<RunRecord>> {
        self.query_opt(
            "reading a run",
            "SELECT registration, state, registered_at FROM runs WHERE run_id = ?1",
            &[run_id.into()],
        )?
        .map(|mut r| {
            Ok(RunRecord {
                registration: from_json("run registration", &r.text(0)?)?,
                state: parse_run_state(&r.text(1)?)?,
                registered_at: r.int(2)?,
            })
        })
        .transpose()
    }

    fn begin_intake(
        &mut self,
        run_id: &str,
        request_id: &str,
        args: &str,
        now: i64,
    ) -> Result<IntakeStart> {
        let ctx = "recording a submission";
        let key = [run_id.into(), request_id.into()];
        atomically(self, ctx, |b| {
            let inserted = b.execute(
                ctx,
                "INSERT INTO submissions (run_id, request_id, args, received_at, attempts)
                 VALUES (?1, ?2, ?3, ?4, 1) ON CONFLICT (run_id, request_id) DO NOTHING",
                &[run_id.into(), request_id.into(), args.into(), now.into()],
            )?;
            if inserted == 1 {
                return Ok(IntakeStart::Run {
                    received_at: now,
                    resumed: false,
                });
            }
            let sql = format!(
                "SELECT reply, received_at FROM submissions
                 WHERE run_id = ?1 AND request_id = ?2{}",
                B::DIALECT.lock_rows
            );
            let mut row = b
                .query_opt(ctx, &sql, &key)?
                .ok_or_else(|| Error::UnknownRun(run_id.to_owned()))?;
            if let Some(reply) = row.opt_text(0)? {
                return Ok(IntakeStart::Completed(from_json(
                    "submission reply",
                    &reply,
                )?));
            }
            b.execute(
                ctx,
                "UPDATE submissions SET attempts = attempts + 1
                 WHERE run_id = ?1 AND request_id = ?2",
                &key,
            )?;
            Ok(IntakeStart::Run {
                received_at: row.int(1)?,
                resumed: true,
            })
        })
    }

    fn record_intake(
        &mut self,
        run_id: &str,
        request_id: &str,
        outcome: IntakeOutcome,
        answer: &dyn Fn(QueueInsert) -> IntakeReply,
        now: i64,
    ) -> Result<IntakeReply> {
        let ctx = "recording an intake outcome";
        atomically(self, ctx, |b| {
            // Locks the submission: a concurrent attempt at the same request waits here and
            // then finds this one's answer.
            let sql = format!(
                "SELECT reply FROM submissions WHERE run_id = ?1 AND request_id = ?2{}",
                B::DIALECT.lock_rows
            );
            let already = b.query_opt(ctx, &sql, &[run_id.into(), request_id.into()])?;
            if let Some(reply) = already
                .map(|mut row| row.opt_text(0))
                .transpose()?
                .flatten()
            {
                // A concurrent attempt at the same request finished first: its answer stands.
                return from_json("submission reply", &reply);
            }
            let reply = match outcome {
                IntakeOutcome::Queue(item) => {
                    answer(queue_intake(b, run_id, request_id, &item, now, ctx)?)
                }
                IntakeOutcome::Refuse(refusal) => {
                    if !refusal.retryable {
                        // A final refusal ends the run, unless it already has an accepted
                        // open_pr (a refused second call must not take the queued one down
                        // with it).
                        b.execute(
                            ctx,
                            "UPDATE runs SET state = ?2 WHERE run_id = ?1 AND state = ?3",
                            &[
                                run_id.into(),
                                RunState::Ended.as_str().into(),
                                RunState::Active.as_str().into(),
                            ],
                        )?;
                    }
                    IntakeReply::Refused { error: refusal }
                }
            };
            b.execute(
                ctx,
                "UPDATE submissions SET reply = ?3, finished_at = ?4
                 WHERE run_id = ?1 AND request_id = ?2",
                &[
                    run_id.into(),
                    request_id.into(),
                    (&to_json("reply", &reply)?).into(),
                    now.into(),
                ],
            )?;
            Ok(reply)
        })
    }

    fn queue_review(
        &mut self,
        run_id: &str,
        request_id: &str,
        item: &NewQueueItem,
        review: &ReviewItem,
        now: i64,
    ) -> Result<ReviewQueueing> {
        let ctx = "queueing a review";
        atomically(self, ctx, |b| {
            // No row stands for "a review of this head" until one is queued: reviews of one
            // head take turns on an advisory lock instead, held until this transaction ends.
            advisory_lock(b, head_lock_key(&review.pull), ctx)?;
            // A resent submission of the same run: the review queued first stands.
            if let Some(own) = item_of_run(b, run_id)? {
                return Ok(ReviewQueueing::Queued(own));
            }
            if let Some(earlier) = query_items(b, "WHERE review IS NOT NULL", None)?
                .into_iter()
                .find(|q| q.reviews_head(&review.pull))
            {
                return Ok(ReviewQueueing::HeadReviewed(earlier));
            }
            let queued = match insert_item(b, run_id, request_id, item, Some(review), now, ctx)? {
                Some(id) => item_by_id(b, id)?.ok_or(Error::UnknownQueueItem(id))?,
                // The same run queued something between the look and the insert.
                None => {
                    item_of_run(b, run_id)?.ok_or_else(|| Error::UnknownRun(run_id.to_owned()))?
                }
            };
            Ok(ReviewQueueing::Queued(queued))
        })
    }

    fn unfinished_intakes(&mut self) -> Result<Vec<(String, String, String)>> {
        self.query(
            "listing unfinished intakes",
            "SELECT run_id, request_id, args FROM submissions WHERE reply IS NULL
             ORDER BY received_at, run_id, request_id",
            &[],
        )?
        .into_iter()
        .map(|mut r| Ok((r.text(0)?, r.text(1)?, r.text(2)?)))
        .collect()
    }

    fn queue(&mut self) -> Result<Vec<QueueItem>> {
        query_items(self, "", None)
    }

    fn queue_item(&mut self, id: i64) -> Result<Option<QueueItem>> {
        item_by_id(self, id)
    }

    fn queue_item_for_run(&mut self, run_id: &str) -> Result<Option<QueueItem>> {
        item_of_run(self, run_id)
    }

    fn expire_queued_before(&mut self, cutoff: i64, now: i64) -> Result<Vec<QueueItem>> {
        let ctx = "expiring queue items";
        let mut ids: Vec<i64> = atomically(self, ctx, |b| {
            b.query(
                ctx,
                "UPDATE queue SET status = 'expired', decided_at = ?2
                 WHERE status = 'queued' AND queued_at <= ?1 RETURNING id",
                &[cutoff.into(), now.into()],
            )?
            .into_iter()
            .map(|mut r| r.int(0))
            .collect()
        })?;
        ids.sort_unstable();
        items(self, ids)
    }

    fn decide(&mut self, id: i64, decision: &Decision, now: i64) -> Result<QueueItem> {
        let ctx = "recording a decision";
        let (action, new_status, by, reason) = match decision {
            Decision::Approve { by } => ("approve", QueueStatus::Approved, by, None),
            Decision::Deny { by, reason } => ("deny", QueueStatus::Denied, by, Some(reason)),
        };
        atomically(self, ctx, |b| {
            let status = lock_status(b, id, ctx)?;
            if status != QueueStatus::Queued.as_str() {
                return Err(Error::WrongState {
                    id,
                    status,
                    action: action.to_owned(),
                });
            }
            b.execute(
                ctx,
                "UPDATE queue SET status = ?2, decided_at = ?3, decided_by = ?4, reason = ?5
                 WHERE id = ?1",
                &[
                    id.into(),
                    new_status.as_str().into(),
                    now.into(),
                    by.into(),
                    reason.map(String::as_str).into(),
                ],
            )
        })?;
        item_by_id(self, id)?.ok_or(Error::UnknownQueueItem(id))
    }

    fn record_change_request(
        &mut self,
        queue_id: i64,
        by: &str,
        feedback: &str,
        now: i64,
    ) -> Result<()> {
        self.execute(
            "recording a change request",
            "INSERT INTO change_requests (queue_id, feedback, requested_by, requested_at)
             VALUES (?1, ?2, ?3, ?4)",
            &[queue_id.into(), feedback.into(), by.into(), now.into()],
        )?;
        Ok(())
    }

    fn change_request(&mut self, queue_id: i64) -> Result<Option<ChangeRequest>> {
        self.query_opt(
            "reading a change request",
            "SELECT queue_id, feedback, requested_by, requested_at FROM change_requests
             WHERE queue_id = ?1 ORDER BY id DESC LIMIT 1",
            &[queue_id.into()],
        )?
        .map(|mut r| {
            Ok(ChangeRequest {
                queue_id: r.int(0)?,
                feedback: r.text(1)?,
                requested_by: r.text(2)?,
                requested_at: r.int(3)?,
            })
        })
        .transpose()
    }

    fn record_push(&mut self, id: i64, branch: &str, commit: &str) -> Result<()> {
        self.execute(
            "recording a push",
            "UPDATE queue SET branch = ?2, commit_oid = ?3 WHERE id = ?1",
            &[id.into(), branch.into(), commit.into()],
        )?;
        Ok(())
    }

    fn record_published(&mut self, id: i64, pr_url: Option<&str>) -> Result<()> {
        self.execute(
            "recording a publication",
            "UPDATE queue SET status = 'published', pr_url = ?2, publish_error = NULL
             WHERE id = ?1 AND status = 'approved'",
            &[id.into(), pr_url.into()],
        )?;
        Ok(())
    }

    fn record_publish_failed(&mut self, id: i64, error: &str) -> Result<()> {
        self.execute(
            "recording a failed publication",
            "UPDATE queue SET status = 'publish_failed', publish_error = ?2
             WHERE id = ?1 AND status IN ('approved', 'publish_failed')",
            &[id.into(), error.into()],
        )?;
        Ok(())
    }

    fn retry_publication(&mut self, id: i64) -> Result<QueueItem> {
        let ctx = "retrying a publication";
        atomically(self, ctx, |b| {
            let status = lock_status(b, id, ctx)?;
            match status.as_str() {
                "publish_failed" => {
                    b.execute(
                        ctx,
                        "UPDATE queue SET status = 'approved' WHERE id = ?1",
                        &[id.into()],
                    )?;
                    Ok(())
                }
                "approved" | "published" => Ok(()),
                _ => Err(Error::WrongState {
                    id,
                    status,
                    action: "publish".to_owned(),
                }),
            }
        })?;
        item_by_id(self, id)?.ok_or(Error::UnknownQueueItem(id))
    }

    fn abandon(&mut self, id: i64, by: &str, reason: &str, now: i64) -> Result<QueueItem> {
        let ctx = "abandoning a queue item";
        atomically(self, ctx, |b| {
            let status = lock_status(b, id, ctx)?;
            if status != QueueStatus::PublishFailed.as_str() {
                return Err(Error::WrongState {
                    id,
                    status,
                    action: "abandon".to_owned(),
                });
            }
            b.execute(
                ctx,
                "UPDATE queue SET status = 'abandoned', abandoned_by = ?2, abandon_reason = ?3,
                 abandoned_at = ?4 WHERE id = ?1",
                &[id.into(), by.into(), reason.into(), now.into()],
            )
        })?;
        item_by_id(self, id)?.ok_or(Error::UnknownQueueItem(id))
    }

    fn attach_judge_score(
        &mut self,
        id: i64,
        judgement: &serde_json::Value,
        now: i64,
    ) -> Result<()> {
        let ctx = "attaching a judge score";
        let text = to_json("judge score", judgement)?;
        atomically(self, ctx, |b| {
            // Locked so that the item cannot go away between the look and the insert.
            lock_status(b, id, ctx)?;
            b.execute(
                ctx,
                "INSERT INTO judge_scores (queue_id, judgement, judged_at) VALUES (?1, ?2, ?3)
                 ON CONFLICT (queue_id) DO UPDATE
                   SET judgement = excluded.judgement, judged_at = excluded.judged_at",
                &[id.into(), (&text).into(), now.into()],
            )?;
            Ok(())
        })
    }

    fn set_queued_findings(
        &mut self,
        id: i64,
        findings: &[airlock_protocol::ItemFinding],
    ) -> Result<bool> {
        let text = to_json("findings", &findings)?;
        let changed = self.execute(
            "recording a queue item's findings",
            "UPDATE queue SET findings = ?2 WHERE id = ?1 AND status = ?3",
            &[
                id.into(),
                (&text).into(),
                QueueStatus::Queued.as_str().into(),
            ],
        )?;
        Ok(changed == 1)
    }

    fn judge_score(&mut self, id: i64) -> Result<Option<JudgeScore>> {
        self.query_opt(
            "reading a judge score",
            "SELECT judgement, judged_at FROM judge_scores WHERE queue_id = ?1",
            &[id.into()],
        )?
        .map(|mut r| Ok((from_json("judge score", &r.text(0)?)?, r.int(1)?)))
        .transpose()
    }

    fn claim(&mut self, request: &ClaimRequest, now: i64) -> Result<ClaimAttempt> {
        claims::claim(self, request, now)
    }

    fn renew_claim(&mut self, request: &ClaimRequest, now: i64) -> Result<ClaimAttempt> {
        claims::renew(self, request, now)
    }

    fn release_claim(&mut self, release: &ClaimRelease, now: i64) -> Result<ClaimStatus> {
        claims::release(self, release, now)
    }

    fn claims(&mut self) -> Result<Vec<ClaimStatus>> {
        claims::all(self)
    }

    fn enqueue_work(&mut self, issues: &[IssueKey], now: i64) -> Result<usize> {
        claims::enqueue_work(self, issues, now)
    }

    fn take_work(
        &mut self,
        holder: &str,
        lease_secs: u64,
        repository: Option<&str>,
        now: i64,
    ) -> Result<Option<ClaimStatus>> {
        claims::take_work(self, holder, lease_secs, repository, now)
    }

    fn work(&mut self) -> Result<Vec<WorkEntry>> {
        claims::work(self)
    }

    fn add_approver(&mut self, approver: &NewApprover, now: i64) -> Result<Approver> {
        approvers::add(self, approver, now)
    }

    fn approvers(&mut self) -> Result<Vec<Approver>> {
        Ok(approvers::credentials(self)?
            .into_iter()
            .map(|(a, _)| a)
            .collect())
    }

    fn approver_credentials(&mut self) -> Result<Vec<(Approver, String)>> {
        approvers::credentials(self)
    }

    fn remove_approver(&mut self, name: &str) -> Result<Approver> {
        approvers::remove(self, name)
    }

    fn record_approval(
        &mut self,
        id: i64,
        approval: &ApprovalRecord,
        complete: &dyn Fn(&[ApprovalRecord]) -> bool,
    ) -> Result<RecordedApproval> {
        approvers::record(self, id, approval, complete)
    }

    fn approvals(&mut self, id: i64) -> Result<Vec<ApprovalRecord>> {
        approvers::approvals(self, id)
    }

    fn record_ci_check(&mut self, record: &CiCheckRecord) -> Result<bool> {
        ci_checks::record(self, record)
    }

    fn ci_checks(&mut self, repository: &str, pull_request: u64) -> Result<Vec<CiCheckRecord>> {
        ci_checks::of_pull(self, repository, pull_request)
    }

    fn record_question(
        &mut self,
        question: &airlock_protocol::IssueQuestion,
        now: i64,
    ) -> Result<()> {
        questions::record(self, question, now)
    }

    fn open_questions(
        &mut self,
        repository: &str,
        issue_number: Option<u64>,
    ) -> Result<Vec<super::StoredQuestion>> {
        questions::open(self, repository, issue_number)
    }

    fn question_replies_read(
        &mut self,
        issue: &IssueKey,
        round: u32,
        last_reply_id: u64,
    ) -> Result<()> {
        questions::replies_read(self, issue, round, last_reply_id)
    }

    fn close_question(
        &mut self,
        issue: &IssueKey,
        round: u32,
        close: &super::QuestionClose,
        now: i64,
    ) -> Result<bool> {
        questions::close(self, issue, round, close, now)
    }
}
