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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::{SqliteStore, Store};

    fn req(holder: &str, n: u64, lease_secs: u64) -> ClaimRequest {
        ClaimRequest {
            issue: IssueKey {
                repository: "acme/calc".to_owned(),
                issue_number: n,
            },
            holder: holder.to_owned(),
            lease_secs,
        }
    }

    fn release(holder: &str, n: u64, end: ClaimEnd) -> ClaimRelease {
        ClaimRelease {
            issue: req(holder, n, 0).issue,
            holder: holder.to_owned(),
            end,
        }
    }

    #[test]
    fn a_lapsed_lease_is_taken_over_and_its_old_holder_told_to_stop() {
        let dir = tempfile::tempdir().unwrap();
        let mut store = SqliteStore::open(&dir.path().join("s.db")).unwrap();
        let now = 1_000;
        assert!(matches!(
            store.claim(&req("a", 7, 2), now).unwrap(),
            ClaimAttempt::Acquired(c) if c.lease_expires_at == 1_002
        ));
        // Within the lease: the holder renews, anyone else is refused.
        assert!(matches!(
            store.claim(&req("b", 7, 2), now + 1).unwrap(),
            ClaimAttempt::Taken(c) if c.holder == "a"
        ));
        assert!(matches!(
            store.claim(&req("a", 7, 2), now + 1).unwrap(),
            ClaimAttempt::Renewed(c) if c.lease_expires_at == 1_003 && c.claimed_at == now
        ));
        // The lease lapses (a dead worker stops renewing): the next claimer takes it.
        assert!(matches!(
            store.claim(&req("b", 7, 60), now + 3).unwrap(),
            ClaimAttempt::Acquired(c) if c.holder == "b"
        ));
        // The old holder's renewal learns it lost the issue; its release is refused.
        assert!(matches!(
            store.renew_claim(&req("a", 7, 2), now + 4).unwrap(),
            ClaimAttempt::Taken(c) if c.holder == "b"
        ));
        let err = store
            .release_claim(&release("a", 7, ClaimEnd::Done), now + 4)
            .unwrap_err();
        assert!(err.to_string().contains("\"b\""), "{err}");
        // Done: nobody claims it again, not even after its lease time.
        let done = store
            .release_claim(&release("b", 7, ClaimEnd::Done), now + 5)
            .unwrap();
        assert_eq!(done.state, ClaimState::Done);
        assert!(matches!(
            store.claim(&req("c", 7, 60), now + 1_000).unwrap(),
            ClaimAttempt::Taken(c) if c.state == ClaimState::Done
        ));
        // Abandoned: free at once.
        store.claim(&req("a", 8, 60), now).unwrap();
        store
            .release_claim(&release("a", 8, ClaimEnd::Abandoned), now + 1)
            .unwrap();
        assert!(matches!(
            store.claim(&req("c", 8, 60), now + 1).unwrap(),
            ClaimAttempt::Acquired(_)
        ));
        // A renewal of a claim nobody holds is an error, not a silent claim.
        assert!(store.renew_claim(&req("a", 9, 60), now).is_err());
        // It all survives reopening.
        drop(store);
        let mut store = SqliteStore::open(&dir.path().join("s.db")).unwrap();
        let claims = store.claims().unwrap();
        assert_eq!(
            claims
                .iter()
                .map(|c| (c.issue.issue_number, c.holder.as_str(), c.state))
                .collect::<Vec<_>>(),
            vec![(7, "b", ClaimState::Done), (8, "c", ClaimState::Held)]
        );
    }

    #[test]
    fn work_is_taken_oldest_first_and_a_lapsed_one_again_but_never_a_done_one() {
        let dir = tempfile::tempdir().unwrap();
        let mut store = SqliteStore::open(&dir.path().join("s.db")).unwrap();
        let key = |n| req("x", n, 0).issue;
        assert_eq!(store.enqueue_work(&[key(3), key(1)], 10).unwrap(), 2);
        assert_eq!(store.enqueue_work(&[key(1), key(2)], 20).unwrap(), 1);
        let first = store.take_work("a", 5, None, 100).unwrap().unwrap();
        assert_eq!((first.issue.issue_number, first.lease_expires_at), (1, 105));
        // Held: another holder's claim of it is refused.
        assert!(matches!(
            store.claim(&req("b", 1, 60), 101).unwrap(),
            ClaimAttempt::Taken(c) if c.holder == "a"
        ));
        assert_eq!(
            store
                .take_work("b", 5, None, 101)
                .unwrap()
                .unwrap()
                .issue
                .issue_number,
            3
        );
        assert!(
            store
                .take_work("c", 5, Some("other/repo"), 101)
                .unwrap()
                .is_none()
        );
        store
            .release_claim(&release("b", 3, ClaimEnd::Done), 102)
            .unwrap();
        assert_eq!(
            store
                .take_work("c", 5, None, 102)
                .unwrap()
                .unwrap()
                .issue
                .issue_number,
            2
        );
        assert!(store.take_work("c", 5, None, 104).unwrap().is_none());
        // Issue 1's lease ends at 105: it is taken again, issue 3 (done) never.
        let again = store.take_work("d", 5, None, 105).unwrap().unwrap();
        assert_eq!((again.issue.issue_number, again.holder.as_str()), (1, "d"));
        // Both lapsed leases are ready again: the older issue comes first.
        let late = store.take_work("e", 5, None, 1_000_000).unwrap().unwrap();
        assert_eq!(late.issue.issue_number, 1);
        let work = store.work().unwrap();
        assert_eq!(
            work.iter()
                .map(|w| (w.issue.issue_number, w.attempts))
                .collect::<Vec<_>>(),
            vec![(1, 3), (3, 1), (2, 1)]
        );
        assert_eq!(
            work[1].claim.as_ref().map(|c| c.state),
            Some(ClaimState::Done)
        );
    }

    #[test]
    fn of_concurrent_claimers_on_separate_connections_exactly_one_wins() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("s.db");
        SqliteStore::open(&db).unwrap();
        let barrier = std::sync::Arc::new(std::sync::Barrier::new(8));
        let handles: Vec<_> = (0..8)
            .map(|i| {
                let (db, barrier) = (db.clone(), barrier.clone());
                std::thread::spawn(move || {
                    let mut store = SqliteStore::open(&db).unwrap();
                    barrier.wait();
                    (0..5)
                        .map(|n| store.claim(&req(&format!("w{i}"), n, 60), 1_000).unwrap())
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        let results: Vec<Vec<ClaimAttempt>> =
            handles.into_iter().map(|h| h.join().unwrap()).collect();
        for n in 0..5 {
            let winners = results
                .iter()
                .filter(|r| matches!(r[n], ClaimAttempt::Acquired(_)))
                .count();
            assert_eq!(winners, 1, "issue {n}: {results:?}");
        }
    }
}
