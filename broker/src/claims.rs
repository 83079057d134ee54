//! Claims on issues: which worker works on which issue, so no issue is worked twice. The store
//! keeps the claim (`store::Store::claim`, a holder and a lease); this module checks a request
//! before it reaches the store and bounds how often the broker changes the claim's label on the
//! forge ([`MarkLimiter`]), because a crowd of workers must not turn into a crowd of API calls.
//! The label's text is fixed here ([`CLAIM_LABEL`]): nothing a worker or an agent says reaches
//! the forge through a claim.
//!
//! The broker's claim requests are answered here too (`Broker::claim`, `take_work`,
//! `enqueue_work`, `release_claim`): each checked, then decided by the store, then labelled
//! on the forge best effort and recorded in the audit log.

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use airlock_audit::Event;

use crate::config::BrokerConfig;
use crate::error::{Error, Result};
use crate::protocol::{
    BrokerReply, ClaimEnd, ClaimRelease, ClaimRequest, ClaimStatus, ForgeMark, IssueKey, TakeWork,
};
use crate::service::{Broker, unix_now};
use crate::store::ClaimAttempt;

/// The label the broker puts on a claimed issue (and takes off when a claim is abandoned).
pub const CLAIM_LABEL: &str = "airlock-claimed";

/// The longest lease a claim may ask for: a worker renews well within it.
pub const MAX_LEASE_SECS: u64 = 24 * 60 * 60;

/// The most label changes per repository within [`MARK_WINDOW`].
pub const MARKS_PER_WINDOW: usize = 30;

/// The window [`MARKS_PER_WINDOW`] counts in.
pub const MARK_WINDOW: Duration = Duration::from_secs(60);

/// Check a claim request's fields against the configuration: the repository must be one this
/// broker serves, the holder a short printable name, the lease between 1 s and a day.
pub fn check_request(
    config: &BrokerConfig,
    issue: &IssueKey,
    holder: &str,
    lease_secs: Option<u64>,
) -> Result<()> {
    if !config.repositories.contains_key(&issue.repository) {
        return Err(Error::Claim(format!(
            "repository {:?} is not configured in broker.toml",
            issue.repository
        )));
    }
    if issue.issue_number == 0 || i64::try_from(issue.issue_number).is_err() {
        return Err(Error::Claim(format!(
            "issue number {} is not a forge issue number",
            issue.issue_number
        )));
    }
    check_holder(holder, lease_secs)
}

/// Check a holder's name and the lease it asks for (a `take_work` names no issue).
pub fn check_holder(holder: &str, lease_secs: Option<u64>) -> Result<()> {
    if holder.is_empty() || holder.len() > 200 || holder.chars().any(char::is_control) {
        return Err(Error::Claim(
            "holder must be 1 to 200 characters without control characters".to_owned(),
        ));
    }
    if let Some(lease) = lease_secs
        && !(1..=MAX_LEASE_SECS).contains(&lease)
    {
        return Err(Error::Claim(format!(
            "lease_secs must be between 1 and {MAX_LEASE_SECS} (got {lease})"
        )));
    }
    Ok(())
}

/// A sliding-window limit on label changes, per repository, in this broker process.
#[derive(Debug, Default)]
pub struct MarkLimiter {
    recent: Mutex<HashMap<String, VecDeque<Instant>>>,
}

impl MarkLimiter {
    /// Whether one more label change on `repository` is allowed at `now`; counts it when so.
    pub fn allow(&self, repository: &str, now: Instant) -> bool {
        let mut recent = self
            .recent
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let times = recent.entry(repository.to_owned()).or_default();
        while times
            .front()
            .is_some_and(|t| now.saturating_duration_since(*t) >= MARK_WINDOW)
        {
            times.pop_front();
        }
        if times.len() >= MARKS_PER_WINDOW {
            return false;
        }
        times.push_back(now);
        true
    }
}

impl Broker {
    /// Claim an issue (`renewal`: only extend a lease the holder has). A newly acquired claim
    /// puts [`CLAIM_LABEL`] on the issue, best effort: the claim is the store's
    /// row, the label only shows it, so a forge failure is reported, not fatal.
    pub fn claim(&self, request: &ClaimRequest, renewal: bool) -> Result<BrokerReply> {
        check_request(
            &self.config,
            &request.issue,
            &request.holder,
            Some(request.lease_secs),
        )?;
        let attempt = if renewal {
            self.store().renew_claim(request, unix_now())?
        } else {
            self.store().claim(request, unix_now())?
        };
        Ok(match attempt {
            ClaimAttempt::Acquired(claim) => {
                let forge = self.mark_claim(&claim.issue, true);
                self.journal_claim(&claim, "acquired", &forge)?;
                BrokerReply::Claimed {
                    claim,
                    acquired: true,
                    forge,
                }
            }
            ClaimAttempt::Renewed(claim) => BrokerReply::Claimed {
                claim,
                acquired: false,
                forge: ForgeMark::Unchanged,
            },
            ClaimAttempt::Taken(claim) => BrokerReply::ClaimTaken { claim },
        })
    }

    /// Take the oldest ready issue of the shared work queue for `take.holder` (a claim with a
    /// lease, labelled on the forge like any claim), or [`BrokerReply::NoWork`].
    pub fn take_work(&self, take: &TakeWork) -> Result<BrokerReply> {
        check_holder(&take.holder, Some(take.lease_secs))?;
        if let Some(repository) = &take.repository
            && !self.config.repositories.contains_key(repository)
        {
            return Err(Error::Claim(format!(
                "repository {repository:?} is not configured in broker.toml"
            )));
        }
        let taken = self.store().take_work(
            &take.holder,
            take.lease_secs,
            take.repository.as_deref(),
            unix_now(),
        )?;
        let Some(claim) = taken else {
            return Ok(BrokerReply::NoWork);
        };
        let forge = self.mark_claim(&claim.issue, true);
        self.journal_claim(&claim, "acquired", &forge)?;
        Ok(BrokerReply::Claimed {
            claim,
            acquired: true,
            forge,
        })
    }

    /// Put issues on the shared work queue (`airlock-broker work add`): each must be an issue
    /// of a repository this broker serves. Returns how many were not queued already.
    pub fn enqueue_work(&self, issues: &[IssueKey], by: &str) -> Result<usize> {
        if issues.len() > MAX_ENQUEUE {
            return Err(Error::Claim(format!(
                "{} issues in one request; queue at most {MAX_ENQUEUE} at a time",
                issues.len()
            )));
        }
        for issue in issues {
            check_request(&self.config, issue, by, None)?;
        }
        let added = self.store().enqueue_work(issues, unix_now())?;
        for issue in issues {
            self.journal.record(
                &format!("claim:{}#{}", issue.repository, issue.issue_number),
                Event::Claim {
                    repository: issue.repository.clone(),
                    issue_number: issue.issue_number,
                    holder: by.to_owned(),
                    change: "enqueued".to_owned(),
                    label: "unchanged".to_owned(),
                },
            )?;
        }
        Ok(added)
    }

    /// The shared work queue, oldest first, each issue with its claim.
    pub fn work(&self) -> Result<Vec<crate::store::WorkEntry>> {
        self.store().work()
    }

    /// End a claim; an abandoned one has its label taken off (a done one keeps it: the issue
    /// was worked on, and its pull request says how).
    pub fn release_claim(&self, release: &ClaimRelease) -> Result<BrokerReply> {
        check_request(&self.config, &release.issue, &release.holder, None)?;
        let claim = self.store().release_claim(release, unix_now())?;
        let (forge, change) = match release.end {
            ClaimEnd::Done => (ForgeMark::Unchanged, "done"),
            ClaimEnd::Abandoned => (self.mark_claim(&claim.issue, false), "abandoned"),
        };
        self.journal_claim(&claim, change, &forge)?;
        Ok(BrokerReply::Released { claim, forge })
    }

    /// The audit log's `claim` record of a change to `claim`.
    fn journal_claim(&self, claim: &ClaimStatus, change: &str, forge: &ForgeMark) -> Result<()> {
        let label = match forge {
            ForgeMark::Posted => "posted".to_owned(),
            ForgeMark::Unchanged => "unchanged".to_owned(),
            ForgeMark::NotConfigured => "not_configured".to_owned(),
            ForgeMark::RateLimited => "rate_limited".to_owned(),
            ForgeMark::Failed { message } => format!("failed: {message}"),
        };
        self.journal.record(
            &format!(
                "claim:{}#{}",
                claim.issue.repository, claim.issue.issue_number
            ),
            Event::Claim {
                repository: claim.issue.repository.clone(),
                issue_number: claim.issue.issue_number,
                holder: claim.holder.clone(),
                change: change.to_owned(),
                label,
            },
        )
    }

    /// Every claim the store holds.
    pub fn claims(&self) -> Result<Vec<ClaimStatus>> {
        self.store().claims()
    }

    fn mark_claim(&self, issue: &IssueKey, claimed: bool) -> ForgeMark {
        let Some(cfg) = self.config.repositories.get(&issue.repository) else {
            return ForgeMark::NotConfigured;
        };
        if cfg.forge_token_env.is_none() {
            return ForgeMark::NotConfigured;
        }
        if !self
            .claim_marks
            .allow(&issue.repository, std::time::Instant::now())
        {
            return ForgeMark::RateLimited;
        }
        match self
            .forge
            .mark_claimed(&issue.repository, cfg, issue.issue_number, claimed)
        {
            Ok(true) => ForgeMark::Posted,
            Ok(false) => ForgeMark::NotConfigured,
            Err(e) => ForgeMark::Failed {
                message: e.to_string(),
            },
        }
    }
}

/// The most issues one `enqueue_work` (or `work add`) may queue.
pub const MAX_ENQUEUE: usize = 1000;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn label_changes_are_limited_per_repository_and_window() {
        let limiter = MarkLimiter::default();
        let start = Instant::now();
        for _ in 0..MARKS_PER_WINDOW {
            assert!(limiter.allow("acme/calc", start));
        }
        assert!(!limiter.allow("acme/calc", start));
        assert!(limiter.allow("acme/other", start));
        assert!(limiter.allow("acme/calc", start + MARK_WINDOW));
    }
}
