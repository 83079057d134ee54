//! Follow-ups: a reviewer's request for changes on a queue item (`request_changes`, or
//! `pr_feedback` for a review on the forge, checked against the forge and `feedback_from`), and
//! what a follow-up run starts from (`follow_up`): the item's lineage, the branch it or the item
//! it follows up was pushed to, whose head is the latest published item's commit, else the pin.
//! A follow-up's registration is held to that head (`check_follow_up`), at registration and
//! again at intake.

use airlock_audit::Event;

use crate::error::{Error, Result};
use crate::publish;
use crate::service::{Broker, unix_now};
use crate::store::{QueueItem, QueueStatus};
use airlock_protocol::RunRegistration;

impl Broker {
    /// What a follow-up run on queue item `queue_id` starts from: the change request a
    /// reviewer made on it, the issue, and the head the follow-up must start from.
    pub fn follow_up(&self, queue_id: i64) -> Result<airlock_protocol::FollowUpBrief> {
        let item = self
            .store()
            .queue_item(queue_id)?
            .ok_or(Error::UnknownQueueItem(queue_id))?;
        let request = self.store().change_request(queue_id)?.ok_or_else(|| {
            Error::Protocol(format!(
                "no change request on queue item {queue_id}: `airlock-broker request-changes \
                 {queue_id} --feedback TEXT` records one"
            ))
        })?;
        let issue = self
            .store()
            .run(&item.run_id)?
            .and_then(|r| r.registration.issue);
        let lineage = self.lineage(&item)?;
        let base_commit = self.follow_up_base(&item, lineage.as_ref())?;
        Ok(airlock_protocol::FollowUpBrief {
            queue_id,
            repository: item.item.repository.clone(),
            issue_id: item.item.issue_id.clone(),
            issue_number: item.issue_number,
            issue,
            base_commit,
            branch: lineage.as_ref().map(|l| l.branch.clone()),
            pr_url: lineage.and_then(|l| l.pr_url),
            feedback: request.feedback,
            requested_by: request.requested_by,
        })
    }

    /// A reviewer acted on pull request `feedback.pull_request` (a webhook saw it): read the
    /// review or comment from the forge, check it, record it as a change request on the pull
    /// request's latest published queue item, and answer what the follow-up starts from.
    ///
    /// Nothing the asker says is believed: the pull request must be one this broker opened (its
    /// queue, not a heading in the pull request's body, says so), the text is the forge's, a
    /// review must request changes, its author's `author_association` must be in the
    /// repository's `feedback_from`, and no follow-up of the same pull request may be waiting
    /// for a decision.
    pub fn pr_feedback(
        &self,
        feedback: &airlock_protocol::PrFeedback,
    ) -> Result<airlock_protocol::FollowUpBrief> {
        if matches!(
            feedback.source.kind,
            airlock_protocol::FeedbackKind::CheckRun | airlock_protocol::FeedbackKind::HeadChecks
        ) {
            return self.ci_feedback(feedback);
        }
        let refused = |why: String| Error::FeedbackRefused(why);
        let n = feedback.pull_request;
        let pull = self.published_pull(&feedback.forge_repo, n)?;
        let (name, cfg, item) = (pull.repository.as_str(), pull.config, pull.item);
        if let Some(waiting) = self.waiting_follow_up(name, n)? {
            return Err(refused(format!(
                "queue item {waiting}, a follow-up of pull request #{n}, waits for a decision: \
                 approve or deny it first"
            )));
        }
        let read = self
            .forge
            .read_feedback(name, cfg, n, feedback.source)?
            .ok_or_else(|| {
                refused(format!(
                    "no forge token is configured for {name}: the broker cannot read the review \
                     to check it (set forge_token_env)"
                ))
            })?;
        if feedback.source.kind == airlock_protocol::FeedbackKind::Review
            && read.state.as_deref() != Some("CHANGES_REQUESTED")
            && !airlock_protocol::mentions_airlock(&read.text())
        {
            return Err(refused(format!(
                "review {} is {:?}: only a review that requests changes, or that mentions \
                 @airlock, starts a follow-up",
                feedback.source.id,
                read.state.as_deref().unwrap_or("")
            )));
        }
        if let Some(gitlab) = &cfg.gitlab {
            if read.access.is_none_or(|a| a < gitlab.feedback_min_access) {
                let why = format!(
                    "{:?} is {} on {}; follow-ups are taken from members at or above {} \
                     (forge.feedback_min_access in broker.toml)",
                    read.author,
                    read.association,
                    feedback.forge_repo,
                    crate::config::forge::access_name(gitlab.feedback_min_access)
                );
                self.journal.record(
                    &format!("review:{}!{n}", feedback.forge_repo),
                    Event::BrokerDecision {
                        code: "FEEDBACK_REFUSED".to_owned(),
                        detail: Some(why.clone()),
                    },
                )?;
                return Err(refused(why));
            }
        } else if !cfg
            .feedback_from
            .iter()
            .any(|a| a.eq_ignore_ascii_case(&read.association))
        {
            return Err(refused(format!(
                "{:?} is {:?} on {}; follow-ups are taken from {} (feedback_from in broker.toml)",
                read.author,
                read.association,
                feedback.forge_repo,
                cfg.feedback_from.join(", ")
            )));
        }
        let text = read.text();
        let by = match cfg.forge_kind() {
            crate::config::forge::ForgeKind::GitHub => format!("github:{}", read.author),
            crate::config::forge::ForgeKind::GitLab => format!("gitlab:{}", read.author),
        };
        self.record_changes_requested(item.id, &by, &text)?;
        self.follow_up(item.id)
    }

    /// Pull request `n` of the forge repository `forge_repo` as this broker opened it: the
    /// repository of `broker.toml` it belongs to and its latest published queue item. Its
    /// queue, not anything the pull request says, decides that it is the broker's.
    pub(crate) fn published_pull(&self, forge_repo: &str, n: u64) -> Result<PublishedPull<'_>> {
        let repositories = &self.config.repositories;
        let (name, cfg) = repositories
            .iter()
            .find(|(name, cfg)| cfg.forge_slug(name).eq_ignore_ascii_case(forge_repo))
            // A GitLab project named by its numeric id is known by the path GitLab reports.
            .or_else(|| {
                repositories.iter().find(|(name, cfg)| {
                    crate::forge_gitlab::numeric_project_path(name, cfg)
                        .ok()
                        .flatten()
                        .is_some_and(|path| path.eq_ignore_ascii_case(forge_repo))
                })
            })
            .ok_or_else(|| {
                Error::FeedbackRefused(format!(
                    "{forge_repo:?} is no repository of broker.toml (by name, forge_repo, or \
                     the path of a GitLab project named by id)"
                ))
            })?;
        let item = self
            .store()
            .queue()?
            .into_iter()
            .filter(|i| i.status == QueueStatus::Published && is_pull(i, name, n))
            .max_by_key(|i| i.id)
            .ok_or_else(|| {
                Error::FeedbackRefused(format!(
                    "pull request #{n} of {forge_repo} was not opened by this broker"
                ))
            })?;
        Ok(PublishedPull {
            repository: name.clone(),
            config: cfg,
            item,
        })
    }

    /// A follow-up of pull request `n` of `repository` that waits for a decision, by queue id.
    pub(crate) fn waiting_follow_up(&self, repository: &str, n: u64) -> Result<Option<i64>> {
        let queue = self.store().queue()?;
        for waiting in queue.iter().filter(|i| i.status == QueueStatus::Queued) {
            let parent = self
                .store()
                .run(&waiting.run_id)?
                .and_then(|r| r.registration.follow_up_of);
            if let Some(parent) = parent
                && let Some(parent) = self.store().queue_item(parent)?
                && is_pull(&parent, repository, n)
            {
                return Ok(Some(waiting.id));
            }
        }
        Ok(None)
    }

    /// The pinned base of the line of follow-ups `item` belongs to: the pin of the item that
    /// first pushed its branch.
    pub(crate) fn lineage_pin(&self, item: &QueueItem) -> Result<String> {
        let mut current = item.clone();
        // Each step goes to an older queue item; the bound guards a damaged store.
        for _ in 0..1000 {
            let parent = self
                .store()
                .run(&current.run_id)?
                .and_then(|r| r.registration.follow_up_of);
            match parent.filter(|p| *p < current.id) {
                Some(parent) => {
                    current = self
                        .store()
                        .queue_item(parent)?
                        .ok_or(Error::UnknownQueueItem(parent))?;
                }
                None => break,
            }
        }
        Ok(current.item.base_commit)
    }

    /// The pushed branch (and its pull request) a queue item belongs to: its own when it was
    /// published, else the one of the item it follows up, if any.
    pub(crate) fn lineage(&self, item: &QueueItem) -> Result<Option<Lineage>> {
        let mut current = item.clone();
        // Each step goes to an older queue item, so the walk ends; the bound guards a damaged
        // store.
        for _ in 0..1000 {
            if current.status == QueueStatus::Published
                && let Some(branch) = &current.branch
            {
                return Ok(Some(Lineage {
                    branch: branch.clone(),
                    pr_url: current.pr_url.clone(),
                }));
            }
            let parent = self
                .store()
                .run(&current.run_id)?
                .and_then(|r| r.registration.follow_up_of);
            let Some(parent) = parent.filter(|p| *p < current.id) else {
                return Ok(None);
            };
            current = self
                .store()
                .queue_item(parent)?
                .ok_or(Error::UnknownQueueItem(parent))?;
        }
        Ok(None)
    }

    /// For a follow-up's queue item, the branch (and pull request) its commit goes to.
    pub(crate) fn follow_up_lineage(&self, item: &QueueItem) -> Result<Option<Lineage>> {
        let follow_up_of = self
            .store()
            .run(&item.run_id)?
            .and_then(|r| r.registration.follow_up_of);
        match follow_up_of {
            Some(parent) => {
                let parent = self
                    .store()
                    .queue_item(parent)?
                    .ok_or(Error::UnknownQueueItem(parent))?;
                self.lineage(&parent)
            }
            None => Ok(None),
        }
    }

    /// The branch approving `item` pushes: a follow-up's lineage branch, else the item's own.
    pub fn branch_to_push(&self, item: &QueueItem) -> Result<String> {
        Ok(match self.follow_up_lineage(item)? {
            Some(l) => l.branch,
            None => publish::branch_name(&item.item.issue_id, item.id),
        })
    }

    /// The head of `branch` as the broker pushed it: the commit of the latest published item
    /// on it.
    pub(crate) fn branch_head(&self, repository: &str, branch: &str) -> Result<Option<String>> {
        Ok(self
            .store()
            .queue()?
            .into_iter()
            .filter(|i| {
                i.status == QueueStatus::Published
                    && i.item.repository == repository
                    && i.branch.as_deref() == Some(branch)
            })
            .max_by_key(|i| i.id)
            .and_then(|i| i.commit))
    }

    /// Where a follow-up of `item` must start: the head of the branch its lineage was pushed
    /// to, or the item's own pin when nothing was published.
    pub(crate) fn follow_up_base(
        &self,
        item: &QueueItem,
        lineage: Option<&Lineage>,
    ) -> Result<String> {
        match lineage {
            Some(l) => self
                .branch_head(&item.item.repository, &l.branch)?
                .ok_or_else(|| {
                    Error::Protocol(format!(
                        "branch {} of queue item {} has no published commit",
                        l.branch, item.id
                    ))
                }),
            None => Ok(item.item.base_commit.clone()),
        }
    }

    /// A follow-up's registration is checked against what the broker did: the queue item
    /// exists, changes were requested on it, it is of the same repository and issue, and the
    /// run starts from the head of the branch the broker pushed.
    pub(crate) fn check_follow_up(&self, run: &RunRegistration, queue_id: i64) -> Result<()> {
        let item = self.store().queue_item(queue_id)?.ok_or_else(|| {
            Error::Registration(format!(
                "follow_up_of names queue item {queue_id}, which does not exist"
            ))
        })?;
        if self.store().change_request(queue_id)?.is_none() {
            return Err(Error::Registration(format!(
                "follow_up_of names queue item {queue_id}, on which no changes were requested"
            )));
        }
        if item.item.repository != run.repository || item.item.issue_id != run.issue_id {
            return Err(Error::Registration(format!(
                "queue item {queue_id} is for {} {}, not {} {}",
                item.item.repository, item.item.issue_id, run.repository, run.issue_id
            )));
        }
        let lineage = self.lineage(&item)?;
        let base = self.follow_up_base(&item, lineage.as_ref())?;
        if run.base_commit != base {
            return Err(Error::Registration(format!(
                "a follow-up of queue item {queue_id} must start from {base}, {}; base_commit {} \
                 is not",
                match &lineage {
                    Some(l) => format!("the head of branch {} the broker pushed", l.branch),
                    None => "the item's pin (nothing was published)".to_owned(),
                },
                run.base_commit
            )));
        }
        Ok(())
    }

    /// Record a reviewer's request for changes on queue item `id`, with their feedback (the
    /// follow-up run's input; a person's text, shown to the agent as data). A queued item is
    /// denied with the feedback as the reason (the run is told APPROVAL_DENIED); a published
    /// one stays published, its branch and pull request waiting for the follow-up's commit.
    pub fn request_changes(&self, id: i64, by: &str, feedback: &str) -> Result<QueueItem> {
        check_feedback(feedback)?;
        self.check_decider(by)?;
        self.record_changes_requested(id, by, feedback)
    }

    /// [`Self::request_changes`] for a reviewer whose standing the forge vouched for (their
    /// association, held to `feedback_from`): not one of the broker's named approvers, who
    /// decide items, but a person of the project asking for changes on its pull request.
    fn record_changes_requested(&self, id: i64, by: &str, feedback: &str) -> Result<QueueItem> {
        check_feedback(feedback)?;
        let feedback = feedback.trim();
        self.expire()?;
        let item = self
            .store()
            .queue_item(id)?
            .ok_or(Error::UnknownQueueItem(id))?;
        let item = match item.status {
            QueueStatus::Queued => self.deny(id, by, &change_request_reason(feedback))?,
            QueueStatus::Published => {
                self.journal.record(
                    &item.run_id,
                    Event::BrokerDecision {
                        code: "CHANGES_REQUESTED".to_owned(),
                        detail: Some(format!(
                            "queue item {id}, branch {}: {by} requested changes",
                            item.branch.as_deref().unwrap_or("")
                        )),
                    },
                )?;
                item
            }
            other => {
                return Err(Error::WrongState {
                    id,
                    status: other.as_str().to_owned(),
                    action: "request changes".to_owned(),
                });
            }
        };
        self.store()
            .record_change_request(id, by, feedback, unix_now())?;
        Ok(item)
    }
}

/// The longest feedback a request for changes takes, in characters.
pub const MAX_FEEDBACK_CHARS: usize = 16_000;

/// Whether `item` is of `repository` and published as its pull request `n`.
fn is_pull(item: &QueueItem, repository: &str, n: u64) -> bool {
    item.item.repository == repository
        && item
            .pr_url
            .as_deref()
            .and_then(|u| u.trim_end_matches('/').rsplit('/').next())
            .and_then(|n| n.parse::<u64>().ok())
            == Some(n)
}

/// A pull request the broker opened: its repository and latest published queue item.
pub(crate) struct PublishedPull<'c> {
    /// The repository's name in `broker.toml`.
    pub(crate) repository: String,
    /// Its configuration.
    pub(crate) config: &'c crate::config::RepositoryConfig,
    /// The latest published queue item on the pull request.
    pub(crate) item: QueueItem,
}

/// The branch (and its pull request) a line of follow-ups is pushed to.
pub(crate) struct Lineage {
    /// The pushed branch.
    pub(crate) branch: String,
    /// Its pull request, when one was opened.
    pub(crate) pr_url: Option<String>,
}

/// The denial reason a request for changes on a queued item becomes: its lines joined into one
/// (a reason is one line), marked as a change request.
pub fn change_request_reason(feedback: &str) -> String {
    let joined = feedback.split_whitespace().collect::<Vec<_>>().join(" ");
    if joined.is_empty() {
        String::new()
    } else {
        format!("changes requested: {joined}")
    }
}

/// Feedback a follow-up can start from: not empty, and within [`MAX_FEEDBACK_CHARS`].
fn check_feedback(feedback: &str) -> Result<()> {
    let feedback = feedback.trim();
    if feedback.is_empty() || feedback.chars().count() > MAX_FEEDBACK_CHARS {
        return Err(Error::BadFeedback {
            max: MAX_FEEDBACK_CHARS,
        });
    }
    Ok(())
}
