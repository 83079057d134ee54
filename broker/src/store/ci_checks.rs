//! The failed CI checks the broker acted on, written once over [`Backend`]: a record is
//! inserted `ON CONFLICT DO NOTHING` on its (repository, pull request, head, check name), so of
//! two deliveries of one failure the first decides and the second finds it.

use super::sql::{Backend, Row};
use super::{CiCheckOutcome, CiCheckRecord};
use crate::error::{Error, Result};

fn to_i64(n: u64, what: &str) -> Result<i64> {
    i64::try_from(n).map_err(|_| Error::StoreCorrupt {
        what: what.to_owned(),
        message: format!("{n} does not fit a 64-bit integer"),
    })
}

fn to_u64(n: i64, what: &str) -> Result<u64> {
    u64::try_from(n).map_err(|_| Error::StoreCorrupt {
        what: what.to_owned(),
        message: format!("{n} is negative"),
    })
}

pub(super) fn record<B: Backend>(b: &mut B, r: &CiCheckRecord) -> Result<bool> {
    let inserted = b.execute(
        "recording a CI check",
        "INSERT INTO ci_checks (repository, pull_request, head_sha, check_name, check_run_id,
         outcome, queue_id, recorded_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)
         ON CONFLICT DO NOTHING",
        &[
            r.repository.as_str().into(),
            to_i64(r.pull_request, "pull request number")?.into(),
            r.head_sha.as_str().into(),
            r.check_name.as_str().into(),
            to_i64(r.check_run_id, "check run id")?.into(),
            r.outcome.as_str().into(),
            r.queue_id.into(),
            r.recorded_at.into(),
        ],
    )?;
    Ok(inserted == 1)
}

fn ci_check(r: &mut Row) -> Result<CiCheckRecord> {
    let outcome = r.text(5)?;
    Ok(CiCheckRecord {
        repository: r.text(0)?,
        pull_request: to_u64(r.int(1)?, "ci_checks.pull_request")?,
        head_sha: r.text(2)?,
        check_name: r.text(3)?,
        check_run_id: to_u64(r.int(4)?, "ci_checks.check_run_id")?,
        outcome: CiCheckOutcome::parse(&outcome).ok_or_else(|| Error::StoreCorrupt {
            what: "ci_checks.outcome".to_owned(),
            message: format!("unknown outcome {outcome:?}"),
        })?,
        queue_id: r.int(6)?,
        recorded_at: r.int(7)?,
    })
}

pub(super) fn of_pull<B: Backend>(
    b: &mut B,
    repository: &str,
    pull_request: u64,
) -> Result<Vec<CiCheckRecord>> {
    b.query(
        "reading the CI checks of a pull request",
        "SELECT repository, pull_request, head_sha, check_name, check_run_id, outcome, queue_id,
         recorded_at FROM ci_checks WHERE repository = ?1 AND pull_request = ?2
         ORDER BY recorded_at, check_run_id",
        &[
            repository.into(),
            to_i64(pull_request, "pull request number")?.into(),
        ],
    )?
    .into_iter()
    .map(|mut r| ci_check(&mut r))
    .collect()
}
