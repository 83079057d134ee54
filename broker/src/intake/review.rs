//! A reviewer agent's review of a pull request: schema → the pull request as the forge has it
//! (its head must be the one reviewed) → the diff from the merge base to the head, computed in
//! the broker's own clone from objects it fetched itself → every comment on a line of that
//! diff → queued for an approver as an item of kind review, one per run and one per head
//! commit while it stands.

use airlock_audit::Event;
use airlock_schemas::Review;

use super::refusal::{Halt, Refusal, Stage, Subject};
use crate::error::Error;
use crate::error::Result;
use crate::publish;
use crate::service::{Broker, lock, unix_now};
use crate::store::{NewQueueItem, QueueItem, ReviewItem, ReviewQueueing};
use airlock_protocol::{BrokerReply, PullRequestKey, ReviewSubmission, request_id_for};

/// A review the intake accepted: the queue item and what it is of.
struct AcceptedReview {
    item: NewQueueItem,
    review: ReviewItem,
}

impl Broker {
    /// Take in a reviewer agent's review. A resent submission of a run that has its item gets
    /// that item's reply.
    pub fn submit_review(&self, submission: &ReviewSubmission) -> Result<BrokerReply> {
        let run_id = submission.run_id.as_str();
        let run_lock = self.run_lock(run_id);
        let _serialised = lock(&run_lock);
        let text = submission.review.get();
        let request_id = request_id_for(run_id, text);
        if let Some(item) = self.store().queue_item_for_run(run_id)? {
            return Ok(match crate::service::reply_for(&item) {
                BrokerReply::Pending { queue_id } => BrokerReply::Queued { queue_id },
                other => other,
            });
        }
        let pull = &submission.pull;
        self.journal.record(
            run_id,
            Event::BrokerDecision {
                code: "REVIEW_SUBMITTED".to_owned(),
                detail: Some(format!("a review of {pull}")),
            },
        )?;
        let refused = |error: airlock_schemas::BrokerError| {
            let (code, detail) = (error.code.as_str().to_owned(), error.message.clone());
            (BrokerReply::Refused { error }, code, detail)
        };
        let (reply, code, detail) = match self.evaluate_review(submission) {
            Err(Halt::Failed(e)) => return Err(e),
            Err(Halt::Refused(refusal)) => refused(refusal.into_broker_error()),
            Ok(AcceptedReview { item, review }) => {
                // The store checks and queues in one transaction, so two runs reviewing the
                // same head (a redelivered event, a second trigger, another broker) queue one
                // review.
                let queueing =
                    self.store()
                        .queue_review(run_id, &request_id, &item, &review, unix_now())?;
                match queueing {
                    ReviewQueueing::HeadReviewed(earlier) => {
                        refused(one_review_per_head(&earlier, pull).into_broker_error())
                    }
                    ReviewQueueing::Queued(queued) => (
                        BrokerReply::Queued {
                            queue_id: queued.id,
                        },
                        "QUEUED".to_owned(),
                        format!("queue item {} (a review of {pull})", queued.id),
                    ),
                }
            }
        };
        self.journal.record(
            run_id,
            Event::BrokerDecision {
                code,
                detail: Some(detail),
            },
        )?;
        Ok(reply)
    }

    fn evaluate_review(&self, submission: &ReviewSubmission) -> Stage<AcceptedReview> {
        // 1. Schema.
        let review: Review = match airlock_schemas::parse::<Review>(submission.review.get()) {
            Ok(review) => review,
            Err(err) => {
                let violations = err.violations();
                if violations.is_empty() {
                    return Err(Error::Dependency(err.to_string()).into());
                }
                return Err(Refusal::Schema {
                    subject: Subject::Review,
                    violations,
                    weakenings: Vec::new(),
                }
                .into());
            }
        };
        // 2. The pull request: a configured repository, and its head now the one reviewed.
        let pull = &submission.pull;
        if !is_commit_id(&pull.head_sha) {
            return Err(Refusal::policy(
                "pull.head_sha",
                "head_sha_is_a_commit_id",
                &format!(
                    "{:?} is not a full 40-character lowercase hex commit id",
                    pull.head_sha
                ),
            )
            .into());
        }
        let slug = format!("{}/{}", pull.owner, pull.repo);
        let Some((repository, cfg)) = self
            .config
            .repositories
            .iter()
            .find(|(name, cfg)| cfg.forge_slug(name).eq_ignore_ascii_case(&slug))
        else {
            return Err(Refusal::policy(
                "pull",
                "repository_is_configured",
                &format!(
                    "no repository of broker.toml is the forge repository {slug:?}; add \
                     [repositories.\"{slug}\"] (or set forge_repo = \"{slug}\" on one)"
                ),
            )
            .into());
        };
        if cfg.forge_kind() == crate::config::forge::ForgeKind::GitLab {
            return Err(Refusal::policy(
                "pull",
                "review_on_github",
                &format!(
                    "{repository:?} is published to GitLab: the broker reviews GitHub pull \
                     requests only, and posts nothing on a merge request"
                ),
            )
            .into());
        }
        // The token, when this process has it (intake reads a private repository with it; a
        // public one is read without).
        let token = publish::forge_token(repository, cfg).ok().flatten();
        let forge_pull = self
            .forge
            .pull_request(cfg, repository, pull.number, token.as_deref())?;
        if forge_pull.head_sha != pull.head_sha {
            return Err(Refusal::policy(
                "pull.head_sha",
                "review_of_the_current_head",
                &format!(
                    "the review is of {} but pull request #{} is now at {}: review the \
                     current head",
                    pull.head_sha, pull.number, forge_pull.head_sha
                ),
            )
            .into());
        }
        // 3. The diff, from the broker's own objects.
        publish::fetch_pull_request(cfg, pull.number, &forge_pull.base_ref, token.as_deref())?;
        let diff = airlock_policies::diffmap::pull_request_diff(
            &cfg.clone,
            &forge_pull.base_sha,
            &forge_pull.head_sha,
        )
        .map_err(|e| Error::Forge(format!("the diff of pull request #{}: {e}", pull.number)))?;
        // 4. Every comment on a line of the diff.
        let off = diff.line_map().off_diff_comments(&review);
        if let Some(first) = off.first() {
            let all: Vec<String> = off.iter().map(ToString::to_string).collect();
            return Err(Refusal::policy(
                &format!("comments[{}]", first.index),
                "review_comment_on_a_diff_line",
                &format!(
                    "{} comment(s) are not on a line of the pull request's diff (RIGHT: an \
                     added or context line of the head; LEFT: a removed or context line of the \
                     base, inside a hunk): {}",
                    off.len(),
                    all.join("; ")
                ),
            )
            .into());
        }
        let title = format!(
            "Review of {slug}#{}: {} ({})",
            pull.number,
            forge_pull.title,
            review.verdict.github_event()
        );
        // A review's words are screened like a pull request body.
        let files = airlock_policies::parse_unified_diff(&diff.text).unwrap_or_default();
        let findings = airlock_protocol::merge_by_place(crate::screening::text_findings(
            &crate::screening::Screened {
                issue: None,
                title: &title,
                body: Some(&crate::screening::review_text(&review)),
                files: &files,
            },
        ));
        Ok(AcceptedReview {
            item: NewQueueItem {
                repository: repository.clone(),
                base_commit: diff.merge_base.clone(),
                issue_id: format!("{slug}#{}", pull.number),
                title,
                args: submission.review.get().to_owned(),
                diff: diff.text,
                digest: serde_json::json!({}),
                evidence: Vec::new(),
                flags: Vec::new(),
                gates: Vec::new(),
                network_blocked: Vec::new(),
                findings: Some(findings),
            },
            review: ReviewItem {
                pull: pull.clone(),
                base_sha: forge_pull.base_sha,
                merge_base: diff.merge_base,
                review,
            },
        })
    }
}

/// The refusal of a second review of one head commit.
fn one_review_per_head(earlier: &QueueItem, pull: &PullRequestKey) -> Refusal {
    Refusal::policy(
        "pull.head_sha",
        "one_review_per_head",
        &format!(
            "queue item {} ({}) already reviews {pull}; a pull request is reviewed once per \
             head commit: push a new commit for another review, or deny item {} first",
            earlier.id,
            earlier.status.as_str(),
            earlier.id
        ),
    )
}

/// 40 lower-case hex digits.
fn is_commit_id(text: &str) -> bool {
    text.len() == 40 && text.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}
