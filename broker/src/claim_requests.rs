//! The broker's answers to claim requests (claim, renew, release) and to the shared work
//! queue's (take, enqueue, list): each request checked by `claims`, decided by the store in one
//! transaction, the forge's `airlock-claimed` label changed best effort (the store's row is the
//! claim, the label only shows it), and every change recorded in the audit log.

use airlock_audit::Event;

use crate::claims::{check_holder, check_request};
use crate::error::{Error, Result};
use crate::service::{Broker, unix_now};
use crate::store::ClaimAttempt;
use airlock_protocol::{
    BrokerReply, ClaimEnd, ClaimRelease, ClaimRequest, ClaimStatus, ForgeMark, IssueKey, TakeWork,
};

impl Broker {
    /// Claim an issue (`renewal`: only extend a lease the holder has). A newly acquired claim
    /// puts [`crate::claims::CLAIM_LABEL`] on the issue, best effort: the claim is the store's
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
