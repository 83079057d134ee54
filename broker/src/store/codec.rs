//! How the store's types are kept as text and numbers, the same for every backend: JSON columns,
//! the queue row, run and claim states, issue numbers and leases.

use super::sql::Row;
use super::{NewQueueItem, QueueItem, QueueStatus, RunState};
use crate::error::{Error, Result};
use airlock_protocol::{ClaimState, IssueKey};

pub(super) fn from_json<T: serde::de::DeserializeOwned>(what: &str, text: &str) -> Result<T> {
    serde_json::from_str(text).map_err(|e| Error::StoreCorrupt {
        what: what.to_owned(),
        message: e.to_string(),
    })
}

pub(super) fn to_json<T: serde::Serialize>(what: &str, value: &T) -> Result<String> {
    serde_json::to_string(value).map_err(|e| Error::StoreCorrupt {
        what: what.to_owned(),
        message: e.to_string(),
    })
}

/// The columns [`queue_item`] reads, in its order (the issue number comes from the run's
/// registration).
pub(super) const QUEUE_COLUMNS: &str = "id, run_id, request_id, repository, base_commit, issue_id, title, args, diff, digest, evidence, flags, status, queued_at, decided_at, decided_by, reason, branch, commit_oid, pr_url, publish_error, abandoned_by, abandon_reason, abandoned_at, (SELECT issue_number FROM runs WHERE runs.run_id = queue.run_id), review, gates, network_blocked, findings";

/// A stored queue row (`SELECT {QUEUE_COLUMNS}`) as the store's type; a malformed column is
/// [`Error::StoreCorrupt`].
pub(super) fn queue_item(mut r: Row) -> Result<QueueItem> {
    let status = r.text(12)?;
    let status = QueueStatus::parse(&status).ok_or_else(|| Error::StoreCorrupt {
        what: "queue status".to_owned(),
        message: format!("{status:?}"),
    })?;
    Ok(QueueItem {
        id: r.int(0)?,
        run_id: r.text(1)?,
        request_id: r.text(2)?,
        item: NewQueueItem {
            repository: r.text(3)?,
            base_commit: r.text(4)?,
            issue_id: r.text(5)?,
            title: r.text(6)?,
            args: r.text(7)?,
            diff: r.text(8)?,
            digest: from_json("queue digest", &r.text(9)?)?,
            evidence: from_json("queue evidence", &r.text(10)?)?,
            flags: from_json("queue flags", &r.text(11)?)?,
            // Items queued before the gates existed have none.
            gates: r
                .opt_text(26)?
                .map(|text| from_json("queue gates", &text))
                .transpose()?
                .unwrap_or_default(),
            // Items queued before runs reported it have none.
            network_blocked: r
                .opt_text(27)?
                .map(|text| from_json("queue network_blocked", &text))
                .transpose()?
                .unwrap_or_default(),
            // Items queued before findings were stored have none (`show` screens them again).
            findings: r
                .opt_text(28)?
                .map(|text| from_json("queue findings", &text))
                .transpose()?,
        },
        status,
        queued_at: r.int(13)?,
        decided_at: r.opt_int(14)?,
        decided_by: r.opt_text(15)?,
        reason: r.opt_text(16)?,
        branch: r.opt_text(17)?,
        commit: r.opt_text(18)?,
        pr_url: r.opt_text(19)?,
        publish_error: r.opt_text(20)?,
        abandoned_by: r.opt_text(21)?,
        abandon_reason: r.opt_text(22)?,
        abandoned_at: r.opt_int(23)?,
        issue_number: r.opt_int(24)?.and_then(|n| u64::try_from(n).ok()),
        review: r
            .opt_text(25)?
            .map(|text| from_json("queued review", &text))
            .transpose()?,
    })
}

/// A stored run state.
pub(super) fn parse_run_state(s: &str) -> Result<RunState> {
    Ok(match s {
        "active" => RunState::Active,
        "queued" => RunState::Queued,
        "ended" => RunState::Ended,
        other => {
            return Err(Error::StoreCorrupt {
                what: "run state".to_owned(),
                message: format!("{other:?}"),
            });
        }
    })
}

/// A claim state as stored.
pub(super) fn claim_state_str(state: ClaimState) -> &'static str {
    match state {
        ClaimState::Held => "held",
        ClaimState::Done => "done",
        ClaimState::Released => "released",
    }
}

/// A stored claim state.
pub(super) fn parse_claim_state(text: &str) -> Result<ClaimState> {
    match text {
        "held" => Ok(ClaimState::Held),
        "done" => Ok(ClaimState::Done),
        "released" => Ok(ClaimState::Released),
        other => Err(Error::StoreCorrupt {
            what: "claim state".to_owned(),
            message: format!("{other:?}"),
        }),
    }
}

/// An issue's number as stored (a signed 64-bit integer in both backends).
pub(super) fn stored_issue_number(issue: &IssueKey) -> Result<i64> {
    i64::try_from(issue.issue_number).map_err(|_| {
        Error::Claim(format!(
            "issue number {} is out of range",
            issue.issue_number
        ))
    })
}

/// A stored issue number as the protocol's.
pub(super) fn issue_number(n: i64) -> Result<u64> {
    u64::try_from(n).map_err(|_| Error::StoreCorrupt {
        what: "claim issue number".to_owned(),
        message: n.to_string(),
    })
}

/// A stored count of attempts.
pub(super) fn attempts(n: i64) -> Result<u32> {
    u32::try_from(n).map_err(|_| Error::StoreCorrupt {
        what: "work attempts".to_owned(),
        message: n.to_string(),
    })
}

/// When a lease of `lease_secs` taken at `now` ends (saturating: a huge lease never wraps).
pub(super) fn lease_end(now: i64, lease_secs: u64) -> i64 {
    now.saturating_add(i64::try_from(lease_secs).unwrap_or(i64::MAX))
}
