//! SQLite's `claims` table (one row per (repository, issue number), its holder, state and
//! lease) and `work_queue` table (the issues workers take, each claimed through `claims`).
//! Every change runs in an IMMEDIATE transaction, so SQLite's write lock serialises concurrent
//! claimers and takers (threads of one broker or several processes on one file) and exactly one
//! wins.
//! A lease is a point in time, not a process: a holder that dies stops renewing and its claim
//! lapses, so no crash leaves an issue claimed for longer than one lease.

use rusqlite::{Connection, OptionalExtension, TransactionBehavior, params};

use super::codec::{
    attempts, claim_state_str, issue_number, lease_end, parse_claim_state, stored_issue_number,
};
use super::{ClaimAttempt, WorkEntry};
use crate::error::{Error, Result};
use crate::protocol::{ClaimEnd, ClaimRelease, ClaimRequest, ClaimState, ClaimStatus, IssueKey};

fn read(tx: &Connection, issue: &IssueKey) -> Result<Option<ClaimStatus>> {
    let row: Option<(String, String, i64, i64)> = tx
        .query_row(
            "SELECT holder, state, claimed_at, lease_expires_at FROM claims
             WHERE repository = ?1 AND issue_number = ?2",
            params![issue.repository, stored_issue_number(issue)?],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)),
        )
        .optional()
        .map_err(Error::store("reading a claim"))?;
    row.map(|(holder, state, claimed_at, lease_expires_at)| {
        Ok(ClaimStatus {
            issue: issue.clone(),
            holder,
            state: parse_claim_state(&state)?,
            claimed_at,
            lease_expires_at,
        })
    })
    .transpose()
}

fn write(tx: &Connection, claim: &ClaimStatus) -> Result<()> {
    tx.execute(
        "INSERT INTO claims (repository, issue_number, holder, state, claimed_at, lease_expires_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6)
         ON CONFLICT(repository, issue_number) DO UPDATE SET
           holder = ?3, state = ?4, claimed_at = ?5, lease_expires_at = ?6",
        params![
            claim.issue.repository,
            stored_issue_number(&claim.issue)?,
            claim.holder,
            claim_state_str(claim.state),
            claim.claimed_at,
            claim.lease_expires_at
        ],
    )
    .map_err(Error::store("writing a claim"))?;
    Ok(())
}

/// Run `f` in an IMMEDIATE transaction and commit what it wrote.
fn in_transaction<T>(
    conn: &mut Connection,
    what: &str,
    f: impl FnOnce(&Connection) -> Result<T>,
) -> Result<T> {
    let tx = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(Error::store(what.to_owned()))?;
    let value = f(&tx)?;
    tx.commit().map_err(Error::store(what.to_owned()))?;
    Ok(value)
}

pub(super) fn claim(
    conn: &mut Connection,
    request: &ClaimRequest,
    now: i64,
) -> Result<ClaimAttempt> {
    in_transaction(conn, "claiming an issue", |tx| {
        let fresh = ClaimStatus {
            issue: request.issue.clone(),
            holder: request.holder.clone(),
            state: ClaimState::Held,
            claimed_at: now,
            lease_expires_at: lease_end(now, request.lease_secs),
        };
        let attempt = match read(tx, &request.issue)? {
            None => ClaimAttempt::Acquired(fresh),
            Some(c) if c.state == ClaimState::Done => return Ok(ClaimAttempt::Taken(c)),
            Some(c) if c.state == ClaimState::Released || c.lease_expires_at <= now => {
                ClaimAttempt::Acquired(fresh)
            }
            Some(c) if c.holder == request.holder => ClaimAttempt::Renewed(ClaimStatus {
                lease_expires_at: fresh.lease_expires_at,
                ..c
            }),
            Some(c) => return Ok(ClaimAttempt::Taken(c)),
        };
        match &attempt {
            ClaimAttempt::Acquired(c) | ClaimAttempt::Renewed(c) => write(tx, c)?,
            ClaimAttempt::Taken(_) => {}
        }
        Ok(attempt)
    })
}

pub(super) fn renew(
    conn: &mut Connection,
    request: &ClaimRequest,
    now: i64,
) -> Result<ClaimAttempt> {
    in_transaction(conn, "renewing a claim", |tx| {
        match read(tx, &request.issue)? {
            Some(c) if c.state == ClaimState::Held && c.holder == request.holder => {
                // A lapsed lease nobody took over is still this holder's to extend: the worker
                // was slow, not dead, and nobody else has started on the issue.
                let renewed = ClaimStatus {
                    lease_expires_at: lease_end(now, request.lease_secs),
                    ..c
                };
                write(tx, &renewed)?;
                Ok(ClaimAttempt::Renewed(renewed))
            }
            Some(c) if c.holder != request.holder => Ok(ClaimAttempt::Taken(c)),
            Some(c) => Err(Error::ClaimNotHeld {
                issue: request.issue.clone(),
                holder: request.holder.clone(),
                state: claim_state_str(c.state).to_owned(),
            }),
            None => Err(Error::ClaimNotHeld {
                issue: request.issue.clone(),
                holder: request.holder.clone(),
                state: "unclaimed".to_owned(),
            }),
        }
    })
}

pub(super) fn release(
    conn: &mut Connection,
    release: &ClaimRelease,
    now: i64,
) -> Result<ClaimStatus> {
    in_transaction(conn, "releasing a claim", |tx| {
        match read(tx, &release.issue)? {
            Some(c) if c.state == ClaimState::Held && c.holder == release.holder => {
                let ended = ClaimStatus {
                    state: match release.end {
                        ClaimEnd::Done => ClaimState::Done,
                        ClaimEnd::Abandoned => ClaimState::Released,
                    },
                    lease_expires_at: now,
                    ..c
                };
                write(tx, &ended)?;
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
        }
    })
}

pub(super) fn enqueue_work(conn: &mut Connection, issues: &[IssueKey], now: i64) -> Result<usize> {
    in_transaction(conn, "queueing work", |tx| {
        let mut new = 0;
        for issue in issues {
            new += tx
                .execute(
                    "INSERT INTO work_queue (repository, issue_number, enqueued_at, attempts)
                     VALUES (?1, ?2, ?3, 0) ON CONFLICT(repository, issue_number) DO NOTHING",
                    params![issue.repository, stored_issue_number(issue)?, now],
                )
                .map_err(Error::store("queueing work"))?;
        }
        Ok(new)
    })
}

pub(super) fn take_work(
    conn: &mut Connection,
    holder: &str,
    lease_secs: u64,
    repository: Option<&str>,
    now: i64,
) -> Result<Option<ClaimStatus>> {
    in_transaction(conn, "taking work", |tx| {
        let next: Option<(String, i64)> = tx
            .query_row(
                "SELECT w.repository, w.issue_number FROM work_queue w
                 LEFT JOIN claims c
                   ON c.repository = w.repository AND c.issue_number = w.issue_number
                 WHERE (?1 IS NULL OR w.repository = ?1)
                   AND (c.state IS NULL OR c.state = 'released'
                        OR (c.state = 'held' AND c.lease_expires_at <= ?2))
                 ORDER BY w.enqueued_at, w.repository, w.issue_number
                 LIMIT 1",
                params![repository, now],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .optional()
            .map_err(Error::store("taking work"))?;
        let Some((repository, n)) = next else {
            return Ok(None);
        };
        let claim = ClaimStatus {
            issue: IssueKey {
                repository,
                issue_number: issue_number(n)?,
            },
            holder: holder.to_owned(),
            state: ClaimState::Held,
            claimed_at: now,
            lease_expires_at: lease_end(now, lease_secs),
        };
        write(tx, &claim)?;
        tx.execute(
            "UPDATE work_queue SET attempts = attempts + 1
             WHERE repository = ?1 AND issue_number = ?2",
            params![claim.issue.repository, n],
        )
        .map_err(Error::store("taking work"))?;
        Ok(Some(claim))
    })
}

pub(super) fn work(conn: &Connection) -> Result<Vec<WorkEntry>> {
    let ctx = "listing the work queue";
    let mut stmt = conn
        .prepare(
            "SELECT w.repository, w.issue_number, w.enqueued_at, w.attempts,
                    c.holder, c.state, c.claimed_at, c.lease_expires_at
             FROM work_queue w
             LEFT JOIN claims c
               ON c.repository = w.repository AND c.issue_number = w.issue_number
             ORDER BY w.enqueued_at, w.repository, w.issue_number",
        )
        .map_err(Error::store(ctx))?;
    type Row = (
        String,
        i64,
        i64,
        i64,
        Option<String>,
        Option<String>,
        Option<i64>,
        Option<i64>,
    );
    let rows: Vec<Row> = stmt
        .query_map([], |r| {
            Ok((
                r.get(0)?,
                r.get(1)?,
                r.get(2)?,
                r.get(3)?,
                r.get(4)?,
                r.get(5)?,
                r.get(6)?,
                r.get(7)?,
            ))
        })
        .map_err(Error::store(ctx))?
        .collect::<rusqlite::Result<_>>()
        .map_err(Error::store(ctx))?;
    rows.into_iter()
        .map(
            |(repository, n, enqueued_at, tries, holder, state, claimed_at, lease)| {
                let issue = IssueKey {
                    repository,
                    issue_number: issue_number(n)?,
                };
                let claim = match (holder, state, claimed_at, lease) {
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
                };
                Ok(WorkEntry {
                    issue,
                    enqueued_at,
                    attempts: attempts(tries)?,
                    claim,
                })
            },
        )
        .collect()
}

pub(super) fn all(conn: &Connection) -> Result<Vec<ClaimStatus>> {
    let mut stmt = conn
        .prepare(
            "SELECT repository, issue_number, holder, state, claimed_at, lease_expires_at
             FROM claims ORDER BY repository, issue_number",
        )
        .map_err(Error::store("listing claims"))?;
    let rows: Vec<(String, i64, String, String, i64, i64)> = stmt
        .query_map([], |r| {
            Ok((
                r.get(0)?,
                r.get(1)?,
                r.get(2)?,
                r.get(3)?,
                r.get(4)?,
                r.get(5)?,
            ))
        })
        .map_err(Error::store("listing claims"))?
        .collect::<rusqlite::Result<_>>()
        .map_err(Error::store("listing claims"))?;
    rows.into_iter()
        .map(
            |(repository, n, holder, state, claimed_at, lease_expires_at)| {
                Ok(ClaimStatus {
                    issue: IssueKey {
                        repository,
                        issue_number: issue_number(n)?,
                    },
                    holder,
                    state: parse_claim_state(&state)?,
                    claimed_at,
                    lease_expires_at,
                })
            },
        )
        .collect()
}
