//! Decisions and publication: a run's decision (`decision`, its reply from `reply_for`), the
//! queue's expiry, the approver's actions (`approve`, `deny`, `abandon`) each audited, and
//! publication (`publish`: a review posted, a pull request's commit pushed and its draft pull
//! request opened, a follow-up's commit pushed onto its lineage's branch), resumed at start
//! when a crash cut it short.

use std::path::Path;

use airlock_audit::Event;

use crate::error::{Error, Result};
use crate::publish;
use crate::risk::Risk;
use crate::service::{Broker, open_clone, reply_for, unix_now};
use crate::store::{
    ApprovalRecord, Decision, JudgeScore, QueueItem, QueueStatus, RecordedApproval, RunRecord,
};
use airlock_protocol::BrokerReply;

/// An approver's approval, as every front end asks for it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ApprovalRequest {
    /// Who approves: a registered approver's name when any is registered.
    pub by: String,
    /// One line saying why; required on a risky item.
    pub reason: Option<String>,
    /// The approver confirmed the risk signals (`--confirm-risk`, or the item id typed on
    /// the page); required on a risky item.
    pub confirm_risk: bool,
}

impl ApprovalRequest {
    /// A plain approval by `by`: no reason, no confirmation.
    pub fn by(by: &str) -> Self {
        ApprovalRequest {
            by: by.to_owned(),
            ..ApprovalRequest::default()
        }
    }
}

/// What an approval did.
#[derive(Debug, Clone, PartialEq)]
pub enum Approval {
    /// The item is approved and published (or its publication resumed).
    Published(QueueItem),
    /// A senior-route item: the approval is recorded and the item stays queued for another.
    Pending {
        /// The item, still queued.
        item: QueueItem,
        /// Every approval so far, oldest first.
        approvals: Vec<ApprovalRecord>,
    },
}

impl Broker {
    /// The state of a run's pull request: pending, approved (with branch and draft PR), or the
    /// refusal that ended it (APPROVAL_DENIED with the reason, APPROVAL_TIMEOUT with the age).
    pub fn decision(&self, run_id: &str) -> Result<BrokerReply> {
        self.expire()?;
        let item = self.store().queue_item_for_run(run_id)?;
        let Some(item) = item else {
            if self.store().run(run_id)?.is_none() {
                return Err(Error::UnknownRun(run_id.to_owned()));
            }
            return Err(Error::Protocol(format!(
                "run {run_id:?} has no queued pull request"
            )));
        };
        Ok(reply_for(&item))
    }

    /// Expire queued items older than the configured age; each expiry is audited.
    pub fn expire(&self) -> Result<Vec<QueueItem>> {
        let now = unix_now();
        let max_age = i64::try_from(self.config.queue_max_age.as_secs()).unwrap_or(i64::MAX);
        let expired = self
            .store()
            .expire_queued_before(now.saturating_sub(max_age), now)?;
        for item in &expired {
            self.journal.record(
                &item.run_id,
                Event::BrokerDecision {
                    code: "APPROVAL_TIMEOUT".to_owned(),
                    detail: Some(format!(
                        "queue item {} expired after {} s",
                        item.id,
                        now - item.queued_at
                    )),
                },
            )?;
        }
        Ok(expired)
    }

    /// Every queue item (after expiring the overdue ones), oldest first.
    pub fn queue(&self) -> Result<Vec<QueueItem>> {
        self.expire()?;
        self.store().queue()
    }

    /// One queue item.
    pub fn queue_item(&self, id: i64) -> Result<QueueItem> {
        self.expire()?;
        self.store()
            .queue_item(id)?
            .ok_or(Error::UnknownQueueItem(id))
    }

    /// The judge's score attached to queue item `id` (by `airlock judge`), if any.
    pub fn judge_score(&self, id: i64) -> Result<Option<JudgeScore>> {
        self.store().judge_score(id)
    }

    /// A registered run, as stored.
    pub fn registered_run(&self, run_id: &str) -> Result<Option<RunRecord>> {
        self.store().run(run_id)
    }

    /// Approve a queued item and publish it, as `request.by`. When the repository's
    /// `forge_token_env` is configured but unset or empty in this process, the approval is
    /// refused before anything is recorded or pushed: the item stays queued. Every front end
    /// comes here, so the rules hold for all of them, each checked before anything is recorded:
    /// when approvers are registered, `by` is one of them; a risky item ([`Risk::is_risky`])
    /// needs `confirm_risk` and a one-line reason; a senior-route item ([`Risk::needs_senior`])
    /// needs two approvals by two registered approvers, one of them senior, and stays queued
    /// ([`Approval::Pending`]) after the first.
    pub fn approve(&self, id: i64, request: &ApprovalRequest) -> Result<Approval> {
        self.expire()?;
        let current = self
            .store()
            .queue_item(id)?
            .ok_or(Error::UnknownQueueItem(id))?;
        // Approved before, publication cut short (a crash): finish it rather than refuse.
        if current.status == QueueStatus::Approved {
            return self.publish(id).map(Approval::Published);
        }
        if current.status != QueueStatus::Queued {
            return Err(Error::WrongState {
                id,
                status: current.status.as_str().to_owned(),
                action: "approve".to_owned(),
            });
        }
        let by = request.by.trim();
        let approver = self.check_decider(by)?;
        let reason = request
            .reason
            .as_deref()
            .map(str::trim)
            .filter(|r| !r.is_empty());
        if reason.is_some_and(|r| r.contains(['\n', '\r'])) {
            return Err(Error::BadApprovalReason);
        }
        let risk = Risk::of(&current);
        if risk.is_risky() {
            let mut missing = Vec::new();
            if !request.confirm_risk {
                missing.push(
                    "a confirmation of the risk (--confirm-risk; on the page, the item id typed)",
                );
            }
            if reason.is_none() {
                missing.push("a one-line reason (--reason TEXT)");
            }
            if !missing.is_empty() {
                return Err(Error::RiskNotConfirmed {
                    id,
                    summary: risk.summary(),
                    missing: missing.join(" and "),
                });
            }
        }
        let senior_route = risk.needs_senior();
        if senior_route && approver.is_none() {
            return Err(Error::SeniorRouteWithoutApprovers {
                id,
                summary: risk.summary(),
            });
        }
        publish::forge_token(&current.item.repository, self.repo_cfg(&current)?)?;
        let record = ApprovalRecord {
            approver: by.to_owned(),
            senior: approver.as_ref().is_some_and(|a| a.senior),
            reason: reason.map(str::to_owned),
            approved_at: unix_now(),
        };
        let complete =
            |so_far: &[ApprovalRecord]| !senior_route || crate::risk::senior_route_complete(so_far);
        let recorded = self.store().record_approval(id, &record, &complete)?;
        self.journal.record(
            &current.run_id,
            Event::Approval {
                reviewer: Some(by.to_owned()),
                reason: record.reason.clone(),
            },
        )?;
        match recorded {
            RecordedApproval::Approved(_) => self.publish(id).map(Approval::Published),
            RecordedApproval::Pending(approvals) => {
                let progress = crate::risk::pending_words(&approvals);
                self.journal.record(
                    &current.run_id,
                    Event::BrokerDecision {
                        code: "APPROVAL_PENDING".to_owned(),
                        detail: Some(format!("queue item {id}: {progress}")),
                    },
                )?;
                Ok(Approval::Pending {
                    item: self.queue_item(id)?,
                    approvals,
                })
            }
        }
    }

    fn repo_cfg(&self, item: &QueueItem) -> Result<&crate::config::RepositoryConfig> {
        self.config
            .repositories
            .get(&item.item.repository)
            .ok_or_else(|| {
                Error::Registration(format!(
                    "repository {:?} is no longer configured",
                    item.item.repository
                ))
            })
    }

    /// Give up a queue item whose publication failed (`publish_failed`): a final state, with
    /// who and why, audited; the run's decision becomes APPROVAL_DENIED with the reason.
    pub fn abandon(&self, id: i64, by: &str, reason: &str) -> Result<QueueItem> {
        let reason = reason.trim();
        if reason.is_empty() || reason.contains(['\n', '\r']) {
            return Err(Error::BadReason);
        }
        self.check_decider(by)?;
        let item = self.store().abandon(id, by, reason, unix_now())?;
        self.journal.record(
            &item.run_id,
            Event::Denial {
                reviewer: Some(by.to_owned()),
                reason: format!("abandoned queue item {id} after a failed publication: {reason}"),
            },
        )?;
        Ok(item)
    }

    /// Deny a queued item with a one-line reason, which goes back to the run.
    pub fn deny(&self, id: i64, by: &str, reason: &str) -> Result<QueueItem> {
        let reason = reason.trim();
        if reason.is_empty() || reason.contains(['\n', '\r']) {
            return Err(Error::BadReason);
        }
        self.check_decider(by)?;
        self.expire()?;
        let item = self.store().decide(
            id,
            &Decision::Deny {
                by: by.to_owned(),
                reason: reason.to_owned(),
            },
            unix_now(),
        )?;
        self.journal.record(
            &item.run_id,
            Event::Denial {
                reviewer: Some(by.to_owned()),
                reason: reason.to_owned(),
            },
        )?;
        Ok(item)
    }

    /// `airlock-broker publish N`: [`Broker::publish`], refused for an item published already
    /// (a person asking twice is told so; nothing is pushed again).
    pub fn publish_requested(&self, id: i64) -> Result<QueueItem> {
        let item = self.queue_item(id)?;
        if item.status == QueueStatus::Published {
            return Err(Error::AlreadyPublished {
                id,
                what: self.published_words(&item),
            });
        }
        self.publish(id)
    }

    /// Whether approving an item of `repository` opens a draft pull request: only with a forge
    /// token (`forge_token_env` in broker.toml); without one the branch is only pushed.
    pub fn opens_pull_requests(&self, repository: &str) -> bool {
        self.config
            .repositories
            .get(repository)
            .is_some_and(|cfg| cfg.forge_token_env.is_some())
    }

    /// What a published item's publication did, for a person: the branch and commit pushed,
    /// and the draft pull request or why there is none.
    pub fn published_words(&self, item: &QueueItem) -> String {
        let pushed = format!(
            "pushed {} at {}",
            item.branch.as_deref().unwrap_or("(no branch)"),
            item.commit.as_deref().unwrap_or("(no commit)")
        );
        match (
            &item.pr_url,
            self.opens_pull_requests(&item.item.repository),
        ) {
            (Some(url), _) => format!("{pushed}; draft pull request {url}"),
            (None, false) => format!("{pushed}; no pull request: no forge token configured"),
            (None, true) => format!("{pushed}; no pull request"),
        }
    }

    /// Publish an approved item, or retry one whose publication failed (idempotent: a
    /// publication cut short by a crash resumes). A failure fails only this item: it is left
    /// `publish_failed` with the error (audited), and the error is returned. A missing forge
    /// token is refused before anything is pushed.
    pub fn publish(&self, id: i64) -> Result<QueueItem> {
        let item = self
            .store()
            .queue_item(id)?
            .ok_or(Error::UnknownQueueItem(id))?;
        match item.status {
            QueueStatus::Published => return Ok(item),
            QueueStatus::Approved | QueueStatus::PublishFailed => {}
            _ => {
                return Err(Error::WrongState {
                    id,
                    status: item.status.as_str().to_owned(),
                    action: "publish".to_owned(),
                });
            }
        }
        let outcome = self
            .repo_cfg(&item)
            .map(|cfg| (item.item.repository.clone(), cfg.clone()))
            .and_then(|(repository, cfg)| {
                // Checked before the item moves: a retry without the token stays as it was.
                publish::forge_token(&repository, &cfg)?;
                let item = self.store().retry_publication(id)?;
                self.publish_approved(&repository, &cfg, &item)
            });
        match outcome {
            Ok(()) => {}
            Err(e) => {
                let message = e.to_string();
                if self
                    .store()
                    .queue_item(id)?
                    .is_some_and(|i| i.status == QueueStatus::Approved)
                {
                    self.store().record_publish_failed(id, &message)?;
                    self.journal.record(
                        &item.run_id,
                        Event::BrokerDecision {
                            code: "PUBLISH_FAILED".to_owned(),
                            detail: Some(format!("queue item {id}: {message}")),
                        },
                    )?;
                    return Err(Error::PublishFailed { id, message });
                }
                return Err(e);
            }
        }
        self.store()
            .queue_item(id)?
            .ok_or(Error::UnknownQueueItem(id))
    }

    fn publish_approved(
        &self,
        repository: &str,
        repo_cfg: &crate::config::RepositoryConfig,
        item: &QueueItem,
    ) -> Result<()> {
        let id = item.id;
        if let Some(review) = &item.review {
            // A review is posted, never pushed: one call, by the broker, with its token.
            let url = self.forge.post_review(repo_cfg, repository, review)?;
            self.store().record_published(id, Some(&url))?;
            self.journal.record(
                &item.run_id,
                Event::BrokerDecision {
                    code: "PUBLISHED".to_owned(),
                    detail: Some(format!(
                        "review of {} posted ({}): {url}",
                        review.pull,
                        review.review.verdict.github_event()
                    )),
                },
            )?;
            return Ok(());
        }
        // A follow-up's commit goes on top of the branch its lineage was pushed to, as a
        // fast-forward, and the pull request that branch belongs to shows it: no new one.
        let lineage = self.follow_up_lineage(item)?;
        if let Some(l) = &lineage {
            let head = self.branch_head(repository, &l.branch)?.unwrap_or_default();
            if head != item.item.base_commit {
                return Err(Error::FollowUpStale {
                    id,
                    branch: l.branch.clone(),
                    base: item.item.base_commit.clone(),
                    head,
                });
            }
        }
        let branch = lineage.as_ref().map(|l| l.branch.as_str());
        let signing = self.config.signing.as_ref();
        let pushed = publish::commit_and_push(repository, repo_cfg, item, branch, signing)?;
        self.store()
            .record_push(id, &pushed.branch, &pushed.commit)?;
        let pr_url = match &lineage {
            Some(l) => l.pr_url.clone(),
            None => self.forge.open_draft(repository, repo_cfg, item, &pushed)?,
        };
        self.store().record_published(id, pr_url.as_deref())?;
        let pull = match (&lineage, &pr_url) {
            (Some(_), Some(url)) => format!("; pull request {url} updated"),
            (None, Some(url)) => format!("; draft pull request {url}"),
            _ => String::new(),
        };
        self.journal.record(
            &item.run_id,
            Event::BrokerDecision {
                code: "PUBLISHED".to_owned(),
                detail: Some(format!(
                    "pushed {} at {}{}{pull}",
                    pushed.branch,
                    pushed.commit,
                    if lineage.is_some() {
                        " (a follow-up commit)"
                    } else {
                        ""
                    }
                )),
            },
        )?;
        // The attestation goes on the pull request after the item is published: a comment the
        // forge refuses is audited and never un-publishes it.
        if let Some(url) = &pr_url {
            crate::attestation::comment_on_publication(self, repository, repo_cfg, item, url);
        }
        Ok(())
    }

    /// Finish every publication a crash interrupted. Never fails: an item whose publication
    /// fails again is left `publish_failed` and reported on stderr. Returns the ids published.
    pub fn resume_publications(&self) -> Vec<i64> {
        let pending: Vec<i64> = match self.store().queue() {
            Ok(items) => items
                .into_iter()
                .filter(|i| i.status == QueueStatus::Approved)
                .map(|i| i.id)
                .collect(),
            Err(e) => {
                eprintln!("airlock-broker: listing interrupted publications: {e}");
                return Vec::new();
            }
        };
        let mut published = Vec::new();
        for id in pending {
            match self.publish(id) {
                Ok(_) => published.push(id),
                Err(e) => eprintln!("airlock-broker: resuming publications: {e}"),
            }
        }
        published
    }

    /// What is wrong with each configured repository, for `serve` to report at start: the
    /// clone does not open, a pinned commit of an undecided or unpublished item is missing,
    /// or the remote is neither a remote of the clone nor a URL or existing path. Empty when
    /// all is well.
    pub fn check_repositories(&self) -> Vec<(String, String)> {
        let items = self.store().queue().unwrap_or_default();
        let mut problems = Vec::new();
        for (name, cfg) in &self.config.repositories {
            let repo = match open_clone(&cfg.clone) {
                Ok(r) => r,
                Err(e) => {
                    problems.push((name.clone(), e.to_string()));
                    continue;
                }
            };
            for item in items.iter().filter(|i| {
                &i.item.repository == name
                    && matches!(
                        i.status,
                        QueueStatus::Queued | QueueStatus::Approved | QueueStatus::PublishFailed
                    )
            }) {
                let found = git2::Oid::from_str(&item.item.base_commit)
                    .and_then(|oid| repo.find_commit(oid))
                    .is_ok();
                if !found {
                    problems.push((
                        name.clone(),
                        format!(
                            "queue item {}: pinned commit {} is not in the clone {}",
                            item.id,
                            item.item.base_commit,
                            cfg.clone.display()
                        ),
                    ));
                }
            }
            let remote = &cfg.remote;
            let known = repo.find_remote(remote).is_ok()
                || remote.contains("://")
                || (remote.contains(':') && !remote.starts_with('/'))
                || Path::new(remote).exists()
                || cfg.clone.join(remote).exists();
            if !known {
                problems.push((
                    name.clone(),
                    format!(
                        "remote {remote:?} is neither a remote of the clone {} nor a URL or an existing path",
                        cfg.clone.display()
                    ),
                ));
            }
        }
        problems
    }
}
