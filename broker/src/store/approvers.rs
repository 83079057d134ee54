//! The named approvers and the approvals given on queue items, written once over
//! [`Backend`]: adding (a taken name refused inside the insert), listing, removing, and
//! recording an approval in the transaction that locks its queue item, so two approvals given
//! at once are decided one after the other.

use super::codec::queue_item;
use super::sql::{Backend, Row, atomically};
use super::{ApprovalRecord, Approver, NewApprover, QueueStatus, RecordedApproval};
use crate::error::{Error, Result};

fn approver(r: &mut Row) -> Result<Approver> {
    Ok(Approver {
        name: r.text(0)?,
        senior: r.int(1)? != 0,
        added_at: r.int(2)?,
    })
}

pub(super) fn add<B: Backend>(b: &mut B, new: &NewApprover, now: i64) -> Result<Approver> {
    let ctx = "adding an approver";
    let inserted = b.execute(
        ctx,
        "INSERT INTO approvers (name, token_sha256, senior, added_at) VALUES (?1, ?2, ?3, ?4)
         ON CONFLICT DO NOTHING",
        &[
            new.name.as_str().into(),
            new.token_sha256.as_str().into(),
            i64::from(new.senior).into(),
            now.into(),
        ],
    )?;
    if inserted == 0 {
        // The name is taken (a token colliding with another's 256-bit hash is not a case).
        return Err(Error::ApproverExists(new.name.clone()));
    }
    Ok(Approver {
        name: new.name.clone(),
        senior: new.senior,
        added_at: now,
    })
}

pub(super) fn credentials<B: Backend>(b: &mut B) -> Result<Vec<(Approver, String)>> {
    b.query(
        "reading the approvers",
        "SELECT name, senior, added_at, token_sha256 FROM approvers ORDER BY name",
        &[],
    )?
    .into_iter()
    .map(|mut r| Ok((approver(&mut r)?, r.text(3)?)))
    .collect()
}

pub(super) fn remove<B: Backend>(b: &mut B, name: &str) -> Result<Approver> {
    let ctx = "removing an approver";
    atomically(b, ctx, |b| {
        let mut row = b
            .query_opt(
                ctx,
                "DELETE FROM approvers WHERE name = ?1 RETURNING name, senior, added_at",
                &[name.into()],
            )?
            .ok_or_else(|| Error::UnknownApprover(name.to_owned()))?;
        approver(&mut row)
    })
}

fn approval(r: &mut Row) -> Result<ApprovalRecord> {
    Ok(ApprovalRecord {
        approver: r.text(0)?,
        senior: r.int(1)? != 0,
        reason: r.opt_text(2)?,
        approved_at: r.int(3)?,
    })
}

pub(super) fn approvals<B: Backend>(b: &mut B, id: i64) -> Result<Vec<ApprovalRecord>> {
    b.query(
        "reading approvals",
        "SELECT approver, senior, reason, approved_at FROM approvals WHERE queue_id = ?1
         ORDER BY approved_at, approver",
        &[id.into()],
    )?
    .into_iter()
    .map(|mut r| approval(&mut r))
    .collect()
}

pub(super) fn record<B: Backend>(
    b: &mut B,
    id: i64,
    new: &ApprovalRecord,
    complete: &dyn Fn(&[ApprovalRecord]) -> bool,
) -> Result<RecordedApproval> {
    let ctx = "recording an approval";
    atomically(b, ctx, |b| {
        let status = super::query::lock_status(b, id, ctx)?;
        if status != QueueStatus::Queued.as_str() {
            return Err(Error::WrongState {
                id,
                status,
                action: "approve".to_owned(),
            });
        }
        let mut so_far = approvals(b, id)?;
        if so_far.iter().any(|a| a.approver == new.approver) {
            return Err(Error::AlreadyApproved {
                id,
                by: new.approver.clone(),
            });
        }
        b.execute(
            ctx,
            "INSERT INTO approvals (queue_id, approver, senior, reason, approved_at)
             VALUES (?1, ?2, ?3, ?4, ?5)",
            &[
                id.into(),
                new.approver.as_str().into(),
                i64::from(new.senior).into(),
                new.reason.as_deref().into(),
                new.approved_at.into(),
            ],
        )?;
        so_far.push(new.clone());
        if !complete(&so_far) {
            return Ok(RecordedApproval::Pending(so_far));
        }
        b.execute(
            ctx,
            "UPDATE queue SET status = ?2, decided_at = ?3, decided_by = ?4 WHERE id = ?1",
            &[
                id.into(),
                QueueStatus::Approved.as_str().into(),
                new.approved_at.into(),
                new.approver.as_str().into(),
            ],
        )?;
        let sql = format!(
            "SELECT {} FROM queue WHERE id = ?1",
            super::codec::QUEUE_COLUMNS
        );
        let row = b
            .query_opt(ctx, &sql, &[id.into()])?
            .ok_or(Error::UnknownQueueItem(id))?;
        Ok(RecordedApproval::Approved(Box::new(queue_item(row)?)))
    })
}
