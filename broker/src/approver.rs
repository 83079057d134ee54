//! The approver's read operations, one code path for every front end: the rows of the queue
//! and the view of one item, each with what the store and the audit log add to the queued
//! submission (the judge's score, the registered issue, the security team's confirmed
//! findings). `airlock-broker queue|show` and the web page (`ui`) both call these.

use std::collections::BTreeMap;

use crate::config::BrokerConfig;
use crate::error::{Error, Result};
use crate::service::Broker;
use crate::view::{ItemView, QueueRow};

pub use crate::store::JudgeScore;

/// One queue row with its judge score.
#[derive(Debug, Clone, PartialEq)]
pub struct ScoredRow {
    /// The row `queue` prints.
    pub row: QueueRow,
    /// The judge's stored score, when `airlock judge` has run.
    pub judge: Option<JudgeScore>,
}

/// Every queue row (after expiring the overdue items), oldest first, with the number of its
/// run's confirmed injection findings.
pub fn queue_rows(broker: &Broker) -> Result<Vec<QueueRow>> {
    let confirmed = confirmed_injections(broker.config())?;
    Ok(broker
        .queue()?
        .iter()
        .map(|item| {
            let count = confirmed.get(&item.run_id).map_or(0, Vec::len);
            QueueRow::of(item).with_confirmed_injections(count)
        })
        .collect())
}

/// [`queue_rows`] with each item's judge score.
pub fn scored_queue_rows(broker: &Broker) -> Result<Vec<ScoredRow>> {
    let rows = queue_rows(broker)?;
    rows.into_iter()
        .map(|row| {
            let judge = broker.judge_score(row.id)?;
            Ok(ScoredRow { row, judge })
        })
        .collect()
}

/// The view `show` renders of queue item `id`, and its judge score.
pub fn item_view(broker: &Broker, id: i64) -> Result<(ItemView, Option<JudgeScore>)> {
    let item = broker.queue_item(id)?;
    let score = broker.judge_score(id)?;
    let issue = broker
        .registered_run(&item.run_id)?
        .and_then(|run| run.registration.issue);
    let branch = broker.branch_to_push(&item)?;
    let confirmed = confirmed_injections(broker.config())?
        .remove(&item.run_id)
        .unwrap_or_default();
    let view = ItemView::of(&item, issue, score.as_ref().map(|(j, _)| j.clone()), branch)
        .with_confirmed_injections(confirmed);
    Ok((view, score))
}

/// The confirmed injection findings of every run, by run id, from the audit log the broker
/// writes to (the security team triages in the same log).
pub fn confirmed_injections(
    config: &BrokerConfig,
) -> Result<BTreeMap<String, Vec<airlock_audit::ConfirmedFinding>>> {
    let scan = airlock_audit::scan(&config.audit_log).map_err(|e| Error::Audit(e.to_string()))?;
    Ok(airlock_audit::confirmed_by_run(&scan))
}

/// Who decides: `$AIRLOCK_REVIEWER`, else `$USER`, else `unknown`. The CLI and the web page
/// record the same name for the same operator.
pub fn reviewer() -> String {
    std::env::var("AIRLOCK_REVIEWER")
        .or_else(|_| std::env::var("USER"))
        .unwrap_or_else(|_| "unknown".to_owned())
}
