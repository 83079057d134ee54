//! The forge `serve` and the approver commands publish through: each call goes to the
//! repository's own forge ([`crate::config::forge::ForgeKind`]): GitHub ([`GitHubForge`]) or
//! GitLab ([`GitLabForge`]). Every method of [`Forge`] is forwarded here, so that none falls
//! back to a trait default for one forge by omission.

use airlock_protocol::FeedbackSource;

use crate::config::RepositoryConfig;
use crate::config::forge::ForgeKind;
use crate::error::Result;
use crate::forge_gitlab::GitLabForge;
use crate::publish::{Forge, ForgeFeedback, ForgePull, GitHubForge, Pushed};
use crate::store::{QueueItem, ReviewItem};

/// Both forges, chosen per repository.
#[derive(Default)]
pub struct Forges {
    github: GitHubForge,
    gitlab: GitLabForge,
}

impl Forges {
    fn of(&self, cfg: &RepositoryConfig) -> &dyn Forge {
        match cfg.forge_kind() {
            ForgeKind::GitHub => &self.github,
            ForgeKind::GitLab => &self.gitlab,
        }
    }
}

impl Forge for Forges {
    fn open_draft(
        &self,
        repository: &str,
        cfg: &RepositoryConfig,
        item: &QueueItem,
        pushed: &Pushed,
    ) -> Result<Option<String>> {
        self.of(cfg).open_draft(repository, cfg, item, pushed)
    }

    fn mark_claimed(
        &self,
        repository: &str,
        cfg: &RepositoryConfig,
        issue_number: u64,
        claimed: bool,
    ) -> Result<bool> {
        self.of(cfg)
            .mark_claimed(repository, cfg, issue_number, claimed)
    }

    fn set_issue_label(
        &self,
        repository: &str,
        cfg: &RepositoryConfig,
        issue_number: u64,
        label: &'static str,
        on: bool,
    ) -> Result<bool> {
        self.of(cfg)
            .set_issue_label(repository, cfg, issue_number, label, on)
    }

    fn read_feedback(
        &self,
        repository: &str,
        cfg: &RepositoryConfig,
        pull_request: u64,
        source: FeedbackSource,
    ) -> Result<Option<ForgeFeedback>> {
        self.of(cfg)
            .read_feedback(repository, cfg, pull_request, source)
    }

    fn pull_request(
        &self,
        cfg: &RepositoryConfig,
        repository: &str,
        number: u64,
        token: Option<&str>,
    ) -> Result<ForgePull> {
        self.of(cfg).pull_request(cfg, repository, number, token)
    }

    fn post_review(
        &self,
        cfg: &RepositoryConfig,
        repository: &str,
        item: &ReviewItem,
    ) -> Result<String> {
        self.of(cfg).post_review(cfg, repository, item)
    }

    fn post_comment(
        &self,
        repository: &str,
        cfg: &RepositoryConfig,
        number: u64,
        body: &str,
    ) -> Result<Option<String>> {
        self.of(cfg).post_comment(repository, cfg, number, body)
    }

    fn post_pull_comment(
        &self,
        repository: &str,
        cfg: &RepositoryConfig,
        number: u64,
        body: &str,
    ) -> Result<Option<String>> {
        self.of(cfg)
            .post_pull_comment(repository, cfg, number, body)
    }

    fn issue_thread(
        &self,
        repository: &str,
        cfg: &RepositoryConfig,
        issue_number: u64,
    ) -> Result<Option<crate::issue_thread::IssueThread>> {
        self.of(cfg).issue_thread(repository, cfg, issue_number)
    }
}
