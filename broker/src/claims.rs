//! Claims on issues: which worker works on which issue, so no issue is worked twice. The store
//! keeps the claim (`store::Store::claim`, a holder and a lease); this module checks a request
//! before it reaches the store and bounds how often the broker changes the claim's label on the
//! forge ([`MarkLimiter`]), because a crowd of workers must not turn into a crowd of API calls.
//! The label's text is fixed here ([`CLAIM_LABEL`]): nothing a worker or an agent says reaches
//! the forge through a claim.

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::config::BrokerConfig;
use crate::error::{Error, Result};
use airlock_protocol::IssueKey;

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
