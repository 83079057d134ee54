//! The `claims` table (one row per (repository, issue number), its holder, state and lease)
//! and the `work_queue` table (the issues workers take, each claimed through `claims`), for
//! every SQL [`Backend`]. A change reads the claim with the dialect's row lock and inserts a
//! missing one with `ON CONFLICT DO NOTHING`: of concurrent first claimers one inserts and the
//! others start again and find its claim (on SQLite the write lock serialises them first).
//! A lease is a point in time, not a process: a holder that dies stops renewing and its claim
//! lapses, so no crash leaves an issue claimed for longer than one lease.

use super::codec::{
    attempts, claim_state_str, issue_number, lease_end, parse_claim_state, stored_issue_number,
};
use super::sql::{Backend, Race, Row, atomically, retrying};
use super::{ClaimAttempt, WorkEntry};
use crate::error::{Error, Result};
use airlock_protocol::{ClaimEnd, ClaimRelease, ClaimRequest, ClaimState, ClaimStatus, IssueKey};

/// The issue's claim, locked until the transaction ends.
fn read<B: Backend>(b: &mut B, issue: &IssueKey, ctx: &str) -> Result<Option<ClaimStatus>> {
    let sql = format!(
        "SELECT holder, state, claimed_at, lease_expires_at FROM claims
         WHERE repository = ?1 AND issue_number = ?2{}",
        B::DIALECT.lock_rows
    );
    b.query_opt(
        ctx,
        &sql,
        &[
            (&issue.repository).into(),
            stored_issue_number(issue)?.into(),
        ],
    )?
    .map(|mut r| {
        Ok(ClaimStatus {
            issue: issue.clone(),
            holder: r.text(0)?,
            state: parse_claim_state(&r.text(1)?)?,
            claimed_at: r.int(2)?,
            lease_expires_at: r.int(3)?,
        })
    })
    .transpose()
}

/// Insert `claim` as a new row; `false` when a concurrent transaction inserted the issue's row
/// first (the caller starts again and finds it).
fn insert<B: Backend>(b: &mut B, claim: &ClaimStatus, ctx: &str) -> Result<bool> {
    let inserted = b.execute(
        ctx,
        "INSERT INTO claims (repository, issue_number, holder, state, claimed_at, lease_expires_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6) ON CONFLICT (repository, issue_number) DO NOTHING",
        &[
            (&claim.issue.repository).into(),
            stored_issue_number(&claim.issue)?.into(),
            (&claim.holder).into(),
            claim_state_str(claim.state).into(),
            claim.claimed_at.into(),
            claim.lease_expires_at.into(),
        ],
    )?;
    Ok(inserted == 1)
}

/// Overwrite the issue's claim row (locked by [`read`]).
fn update<B: Backend>(b: &mut B, claim: &ClaimStatus, ctx: &str) -> Result<()> {
    b.execute(
        ctx,
        "UPDATE claims SET holder = ?3, state = ?4, claimed_at = ?5, lease_expires_at = ?6
         WHERE repository = ?1 AND issue_number = ?2",
        &[
            (&claim.issue.repository).into(),
            stored_issue_number(&claim.issue)?.into(),
            (&claim.holder).into(),
            claim_state_str(claim.state).into(),
            claim.claimed_at.into(),
            claim.lease_expires_at.into(),
        ],
    )?;
    Ok(())
}

/// Whether a claim may be taken by someone new: released, or held past its lease.
fn is_free(claim: &ClaimStatus, now: i64) -> bool {
    match claim.state {
        ClaimState::Done => false,
        ClaimState::Released => true,
        ClaimState::Held => claim.lease_expires_at <= now,
    }
}

pub(super) fn claim<B: Backend>(
    b: &mut B,
    request: &ClaimRequest,
    now: i64,
) -> Result<ClaimAttempt> {
    let ctx = "claiming an issue";
    let fresh = ClaimStatus {
        issue: request.issue.clone(),
        holder: request.holder.clone(),
        state: ClaimState::Held,
        claimed_at: now,
        lease_expires_at: lease_end(now, request.lease_secs),
    };
    retrying(b, ctx, |b| {
        let attempt = match read(b, &request.issue, ctx)? {
            None => {
                // Of concurrent first claimers one inserts; the others start again and find
                // its claim.
                if !insert(b, &fresh, ctx)? {
                    return Ok(Race::Lost);
                }
                return Ok(Race::Won(ClaimAttempt::Acquired(fresh.clone())));
            }
            Some(c) if c.state == ClaimState::Done => ClaimAttempt::Taken(c),
            Some(c) if is_free(&c, now) => ClaimAttempt::Acquired(fresh.clone()),
            Some(c) if c.holder == request.holder => ClaimAttempt::Renewed(ClaimStatus {
                lease_expires_at: fresh.lease_expires_at,
                ..c
            }),
            Some(c) => ClaimAttempt::Taken(c),
        };
        match &attempt {
            ClaimAttempt::Acquired(c) | ClaimAttempt::Renewed(c) => update(b, c, ctx)?,
            ClaimAttempt::Taken(_) => {}
        }
        Ok(Race::Won(attempt))
    })
}

pub(super) fn renew<B: Backend>(
    b: &mut B,
    request: &ClaimRequest,
    now: i64,
) -> Result<ClaimAttempt> {
    let ctx = "renewing a claim";
    atomically(b, ctx, |b| match read(b, &request.issue, ctx)? {
        Some(c) if c.state == ClaimState::Held && c.holder == request.holder => {
            // A lapsed lease nobody took over is still this holder's to extend: the worker
            // was slow, not dead, and nobody else has started on the issue.
            let renewed = ClaimStatus {
                lease_expires_at: lease_end(now, request.lease_secs),
                ..c
            };
            update(b, &renewed, ctx)?;
            Ok(ClaimAttempt::Renewed(renewed))
        }
        Some(c) if c.holder != request.holder => Ok(ClaimAttempt::Taken(c)),
        other => Err(Error::ClaimNotHeld {
            issue: request.issue.clone(),
            holder: request.holder.clone(),
            state: other
                .map_or("unclaimed", |c| claim_state_str(c.state))
                .to_owned(),
        }),
    })
}

pub(super) fn release<B: Backend>(
    b: &mut B,
    release: &ClaimRelease,
    now: i64,
) -> Result<ClaimStatus> {
    let ctx = "releasing a claim";
    atomically(b, ctx, |b| match read(b, &release.issue, ctx)? {
        Some(c) if c.state == ClaimState::Held && c.holder == release.holder => {
            let ended = ClaimStatus {
                state: match release.end {
                    ClaimEnd::Done => ClaimState::Done,
                    ClaimEnd::Abandoned => ClaimState::Released,
                },
                lease_expires_at: now,
                ..c
            };
            update(b, &ended, ctx)?;
            Ok(ended)
        }
        other => Err(Error::ClaimNotHeld {
            issue: release.issue.clone(),
            holder: release.holder.clone(),
            state: match other {
                Some(c) => format!("{} by {:?}", claim_state_str(c.state), c.holder),
                None => "unclaimed".to_owned(),
            },
        }),
    })
}

pub(super) fn enqueue_work<B: Backend>(b: &mut B, issues: &[IssueKey], now: i64) -> Result<usize> {
    let ctx = "queueing work";
    // Inserted in key order: two enqueuers of overlapping lists then wait for each other's
    // rows in the same order and never deadlock.
    let mut sorted: Vec<&IssueKey> = issues.iter().collect();
    sorted.sort_by(|a, b| (&a.repository, a.issue_number).cmp(&(&b.repository, b.issue_number)));
    let new = atomically(b, ctx, |b| {
        let mut new = 0;
        for issue in sorted {
            new += b.execute(
                ctx,
                "INSERT INTO work_queue (repository, issue_number, enqueued_at, attempts)
                 VALUES (?1, ?2, ?3, 0) ON CONFLICT (repository, issue_number) DO NOTHING",
                &[
                    (&issue.repository).into(),
                    stored_issue_number(issue)?.into(),
                    now.into(),
                ],
            )?;
        }
        Ok(new)
    })?;
    usize::try_from(new).map_err(|_| Error::StoreCorrupt {
        what: "work queue count".to_owned(),
        message: new.to_string(),
    })
}

pub(super) fn take_work<B: Backend>(
    b: &mut B,
    holder: &str,
    lease_secs: u64,
    repository: Option<&str>,
    now: i64,
) -> Result<Option<ClaimStatus>> {
    let ctx = "taking work";
    let sql = format!(
        "SELECT w.repository, w.issue_number FROM work_queue w
         LEFT JOIN claims c
           ON c.repository = w.repository AND c.issue_number = w.issue_number
         WHERE (CAST(?1 AS TEXT) IS NULL OR w.repository = ?1)
           AND (c.state IS NULL OR c.state = 'released'
                OR (c.state = 'held' AND c.lease_expires_at <= ?2))
         ORDER BY w.enqueued_at, w.repository, w.issue_number
         LIMIT 1{}",
        B::DIALECT.skip_locked_work
    );
    retrying(b, ctx, |b| {
        let Some(mut row) = b.query_opt(ctx, &sql, &[repository.into(), now.into()])? else {
            return Ok(Race::Won(None));
        };
        let n = row.int(1)?;
        let claim = ClaimStatus {
            issue: IssueKey {
                repository: row.text(0)?,
                issue_number: issue_number(n)?,
            },
            holder: holder.to_owned(),
            state: ClaimState::Held,
            claimed_at: now,
            lease_expires_at: lease_end(now, lease_secs),
        };
        // The join read the claim as of this statement's snapshot; a `claim` committed since
        // (not through the work queue, so not kept off by the row lock) wins: look again under
        // the claim's own lock, and start over when the issue is no longer free.
        match read(b, &claim.issue, ctx)? {
            None => {
                if !insert(b, &claim, ctx)? {
                    return Ok(Race::Lost);
                }
            }
            Some(current) if is_free(&current, now) => update(b, &claim, ctx)?,
            Some(_) => return Ok(Race::Lost),
        }
        b.execute(
            ctx,
            "UPDATE work_queue SET attempts = attempts + 1
             WHERE repository = ?1 AND issue_number = ?2",
            &[(&claim.issue.repository).into(), n.into()],
        )?;
        Ok(Race::Won(Some(claim)))
    })
}

/// A claim as read from columns `from..from + 4` (holder, state, claimed at, lease end) of a
/// row joined to `claims`; `None` where the join found no claim.
fn joined_claim(r: &mut Row, from: usize, issue: &IssueKey) -> Result<Option<ClaimStatus>> {
    let holder = r.opt_text(from)?;
    let state = r.opt_text(from + 1)?;
    let claimed_at = r.opt_int(from + 2)?;
    let lease = r.opt_int(from + 3)?;
    Ok(match (holder, state, claimed_at, lease) {
        (Some(holder), Some(state), Some(claimed_at), Some(lease_expires_at)) => {
            Some(ClaimStatus {
                issue: issue.clone(),
                holder,
                state: parse_claim_state(&state)?,
                claimed_at,
                lease_expires_at,
            })
        }
        _ => None,
    })
}

pub(super) fn work<B: Backend>(b: &mut B) -> Result<Vec<WorkEntry>> {
    b.query(
        "listing the work queue",
        "SELECT w.repository, w.issue_number, w.enqueued_at, w.attempts,
                c.holder, c.state, c.claimed_at, c.lease_expires_at
         FROM work_queue w
         LEFT JOIN claims c
           ON c.repository = w.repository AND c.issue_number = w.issue_number
         ORDER BY w.enqueued_at, w.repository, w.issue_number",
        &[],
    )?
    .into_iter()
    .map(|mut r| {
        let issue = IssueKey {
            repository: r.text(0)?,
            issue_number: issue_number(r.int(1)?)?,
        };
        Ok(WorkEntry {
            enqueued_at: r.int(2)?,
            attempts: attempts(r.int(3)?)?,
            claim: joined_claim(&mut r, 4, &issue)?,
            issue,
        })
    })
    .collect()
}

pub(super) fn all<B: Backend>(b: &mut B) -> Result<Vec<ClaimStatus>> {
    b.query(
        "listing claims",
        "SELECT repository, issue_number, holder, state, claimed_at, lease_expires_at
         FROM claims ORDER BY repository, issue_number",
        &[],
    )?
    .into_iter()
    .map(|mut r| {
        let issue = IssueKey {
            repository: r.text(0)?,
            issue_number: issue_number(r.int(1)?)?,
        };
        joined_claim(&mut r, 2, &issue)?.ok_or_else(|| Error::StoreCorrupt {
            what: "claim".to_owned(),
            message: format!("a NULL column in the claim of {issue:?}"),
        })
    })
    .collect()
}
