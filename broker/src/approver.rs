//! The approver's side, one code path for every front end: the rows of the queue and the view
//! of one item, each with what the store and the audit log add to the queued submission (the
//! judge's score, the registered issue, the security team's confirmed findings, the approvals
//! so far); and the named approvers (`approver add|list|remove`), their tokens (shown once,
//! stored as SHA-256, compared in constant time) and who a decision is recorded as.
//! `airlock-broker queue|show|approve|deny` and the web page (`ui`) all call these.

use std::collections::BTreeMap;

use crate::config::BrokerConfig;
use crate::error::{Error, Result};
use crate::service::{Broker, unix_now};
use crate::store::{Approver, NewApprover};
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
        .with_confirmed_injections(confirmed)
        .with_approvals(broker.approvals(id)?)
        .opening_pull_request(broker.opens_pull_requests(&item.item.repository));
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

/// Who the command line records as deciding: `--by NAME`, else `$AIRLOCK_REVIEWER`, else
/// `$USER`; [`Error::NoDecider`] when none is set (never a placeholder name). Whether the name
/// is a registered approver is the broker's check ([`Broker::check_decider`]).
pub fn decider(by: Option<&str>) -> Result<String> {
    let var = |k: &str| std::env::var(k).ok();
    by.map(str::to_owned)
        .or_else(|| var("AIRLOCK_REVIEWER"))
        .or_else(|| var("USER"))
        .map(|name| name.trim().to_owned())
        .filter(|name| !name.is_empty())
        .ok_or(Error::NoDecider)
}

/// The SHA-256 of an approver's token, lowercase hex: all the store keeps of it.
pub fn token_sha256(token: &str) -> String {
    use sha2::Digest;
    hex::encode(sha2::Sha256::digest(token.trim().as_bytes()))
}

/// Equal without an early exit on the first differing byte.
pub fn same_secret(a: &str, b: &str) -> bool {
    use sha2::Digest;
    let (a, b) = (
        sha2::Sha256::digest(a.as_bytes()),
        sha2::Sha256::digest(b.as_bytes()),
    );
    a.iter()
        .zip(b.iter())
        .fold(0u8, |acc, (x, y)| acc | (x ^ y))
        == 0
}

/// The longest approver name taken.
pub const MAX_APPROVER_NAME: usize = 64;

/// A name that can be recorded and shown as it is: 1 to [`MAX_APPROVER_NAME`] characters, no
/// whitespace, control or invisible character (what a terminal would have to escape).
fn check_approver_name(name: &str) -> Result<()> {
    let count = name.chars().count();
    if count == 0 || count > MAX_APPROVER_NAME {
        return Err(Error::BadApproverName(format!(
            "a name has 1 to {MAX_APPROVER_NAME} characters"
        )));
    }
    if name.chars().any(char::is_whitespace)
        || airlock_policies::terminal::escaped_line(name) != name
    {
        return Err(Error::BadApproverName(format!(
            "{name:?} holds whitespace, a control or an invisible character"
        )));
    }
    Ok(())
}

/// A new approver and the token they log in with, shown only this once.
#[derive(Debug, Clone)]
pub struct AddedApprover {
    /// As stored.
    pub approver: Approver,
    /// The token (the store keeps only its hash).
    pub token: String,
}

impl Broker {
    /// Add a named approver with a fresh random token (32 bytes, hex), returned once.
    pub fn add_approver(&self, name: &str, senior: bool) -> Result<AddedApprover> {
        check_approver_name(name)?;
        let token = random_token()?;
        let approver = self.store().add_approver(
            &NewApprover {
                name: name.to_owned(),
                senior,
                token_sha256: token_sha256(&token),
            },
            unix_now(),
        )?;
        self.record_approver_change(&approver, "added")?;
        Ok(AddedApprover { approver, token })
    }

    fn record_approver_change(&self, approver: &Approver, change: &str) -> Result<()> {
        self.journal.record(
            &format!("approver:{}", approver.name),
            airlock_audit::Event::ApproverChanged {
                name: approver.name.clone(),
                senior: approver.senior,
                change: change.to_owned(),
            },
        )
    }

    /// Every named approver, by name (never a token).
    pub fn approvers(&self) -> Result<Vec<Approver>> {
        self.store().approvers()
    }

    /// Remove a named approver: their token logs in no more and their web sessions end; the
    /// approvals they gave stay on record.
    pub fn remove_approver(&self, name: &str) -> Result<Approver> {
        let removed = self.store().remove_approver(name)?;
        self.record_approver_change(&removed, "removed")?;
        Ok(removed)
    }

    /// The approver whose token `token` is: every stored hash is compared in constant time,
    /// with no early exit.
    pub fn approver_for_token(&self, token: &str) -> Result<Option<Approver>> {
        let hash = token_sha256(token);
        let mut found = None;
        for (approver, stored) in self.store().approver_credentials()? {
            if same_secret(&hash, &stored) && found.is_none() {
                found = Some(approver);
            }
        }
        Ok(found)
    }

    /// The registered approver named `by`, when approvers are registered (`None` when none
    /// is: then any name is recorded as given). An empty name is [`Error::NoDecider`]; a name
    /// that is not registered while others are is [`Error::UnknownApprover`].
    pub fn check_decider(&self, by: &str) -> Result<Option<Approver>> {
        if by.trim().is_empty() {
            return Err(Error::NoDecider);
        }
        let approvers = self.approvers()?;
        if approvers.is_empty() {
            return Ok(None);
        }
        approvers
            .into_iter()
            .find(|a| a.name == by)
            .map(Some)
            .ok_or_else(|| Error::UnknownApprover(by.to_owned()))
    }

    /// The approvals given on queue item `id`, oldest first.
    pub fn approvals(&self, id: i64) -> Result<Vec<crate::store::ApprovalRecord>> {
        self.store().approvals(id)
    }
}

/// Bytes of randomness in a token, a session id and a CSRF token.
const TOKEN_BYTES: usize = 32;

/// [`TOKEN_BYTES`] random bytes from the kernel, as hex: a login token, a session id or a
/// CSRF token.
pub fn random_token() -> Result<String> {
    use std::io::Read;
    let mut bytes = [0u8; TOKEN_BYTES];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut bytes))
        .map_err(Error::io("reading /dev/urandom for a token"))?;
    Ok(hex::encode(bytes))
}
