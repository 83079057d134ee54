//! Intake: the issue read from its source (a file, GitHub, a merged pull request, a follow-up
//! the broker describes), the repository and the revision to pin settled, and the typed record
//! of where each came from.

use super::{RunArgs, RunError, broker_endpoint};
use crate::adapters::BrokerSocket;
use crate::config::Config;
use crate::github::{GithubClient, IssueSource};
use crate::intake::{ForgeHistory, IntakeRecord, IntakeSource, PinFrom};
use crate::issue::Issue;
use airlock_protocol::FollowUpBrief;
use std::path::Path;

/// What intake settled before the pin: the issue, the repository, the revision to pin, and
/// the record of where each came from (`outcome.json`'s `intake`, and the trajectory's `run_started`).
pub(super) struct Intake {
    pub(super) issue: Issue,
    pub(super) repo: String,
    pub(super) rev: String,
    /// Fetch into an existing mirror first (the default branch's head must be today's).
    pub(super) refresh: bool,
    /// The read token for cloning, only when the repository is the issue's own on its forge.
    pub(super) clone_token: Option<String>,
    pub(super) record: IntakeRecord,
    /// For a follow-up run: the change request it answers.
    pub(super) follow_up: Option<FollowUpBrief>,
}

/// Read the issue from its source and settle the repository and the revision to pin.
pub(super) fn intake(args: &RunArgs, config: &Config) -> Result<Intake, RunError> {
    match &args.issue {
        IssueSource::File(path) => {
            let issue = Issue::read(path)?;
            let repo = args.repo.clone().ok_or_else(|| {
                RunError::Usage(
                    "--repo is needed with an issue file (only a GitHub issue names its \
                     repository)"
                        .into(),
                )
            })?;
            let rev = args.commit.clone().ok_or_else(|| {
                RunError::Usage(
                    "--commit is needed with an issue file (a GitHub issue pins its default \
                     branch's head when --commit is absent)"
                        .into(),
                )
            })?;
            let record = IntakeRecord::pinned(
                IntakeSource::File {
                    path: path.display().to_string(),
                },
                rev.clone(),
                PinFrom::commit_flag(),
            );
            Ok(Intake {
                issue,
                repo,
                rev,
                refresh: false,
                clone_token: None,
                record,
                follow_up: None,
            })
        }
        IssueSource::FollowUp(queue_id) => follow_up_intake(*queue_id, args, config),
        IssueSource::Merged(reference) => merged_intake(reference, args, config),
        IssueSource::GitLab(reference) => gitlab_intake(reference, args, config),
        IssueSource::GitHub(reference) => {
            let client = GithubClient::from_config(&config.github)?;
            let fetched = client.fetch_issue(reference, &config.github)?;
            let (repo, clone_token) = forge_clone(reference, args, config, &client)?;
            let (rev, refresh, from) = match &args.commit {
                Some(c) => (c.clone(), false, PinFrom::commit_flag()),
                None => {
                    let branch = client.default_branch(reference, &config.github)?;
                    (
                        format!("refs/heads/{branch}"),
                        true,
                        PinFrom::DefaultBranch {
                            default_branch: branch,
                        },
                    )
                }
            };
            let record = IntakeRecord::pinned(
                IntakeSource::Github {
                    reference: reference.to_string(),
                    api_url: config.github.api_url.clone(),
                    number: fetched.issue.number,
                    url: fetched.issue.url.clone(),
                    author: fetched.issue.author.clone(),
                    state: fetched.issue.state.clone(),
                    comments_included: fetched.comments,
                },
                rev.clone(),
                from,
            );
            Ok(Intake {
                issue: fetched.issue,
                repo,
                rev,
                refresh,
                clone_token,
                record,
                follow_up: None,
            })
        }
    }
}

/// A GitLab issue's intake: the issue read through the `Forge` trait, the project's clone URL
/// (or `--repo`), and its default branch's head pinned unless `--commit` names a revision.
/// The token is never handed to git: a private project is cloned through `--repo`.
fn gitlab_intake(
    reference: &airlock_forge::gitlab::GitLabIssueRef,
    args: &RunArgs,
    config: &Config,
) -> Result<Intake, RunError> {
    use airlock_forge::Forge;
    let cfg = &config.gitlab;
    let forge = crate::gitlab::client_for(reference, cfg)?;
    let fetched = crate::gitlab::fetch_issue(&forge, reference, cfg)?;
    let repo = match &args.repo {
        Some(repo) => repo.clone(),
        None => crate::gitlab::clone_url(reference, cfg).ok_or_else(|| {
            RunError::Usage(format!(
                "--repo is needed: the clone URL of {reference} cannot be told from a numeric \
                 project id"
            ))
        })?,
    };
    let (rev, refresh, from) = match &args.commit {
        Some(c) => (c.clone(), false, PinFrom::commit_flag()),
        None => {
            let branch = forge
                .default_branch()
                .map_err(crate::gitlab::GitlabError::from)?;
            (
                format!("refs/heads/{branch}"),
                true,
                PinFrom::DefaultBranch {
                    default_branch: branch,
                },
            )
        }
    };
    let record = IntakeRecord::pinned(
        IntakeSource::Gitlab {
            reference: reference.to_string(),
            api_url: cfg.api_url.clone(),
            number: fetched.issue.number,
            url: fetched.issue.url.clone(),
            author: fetched.issue.author.clone(),
            state: fetched.issue.state.clone(),
            comments_included: fetched.comments,
        },
        rev.clone(),
        from,
    );
    Ok(Intake {
        issue: fetched.issue,
        repo,
        rev,
        refresh,
        clone_token: None,
        record,
        follow_up: None,
    })
}

/// The repository a GitHub issue's (or merged pull request's) run clones and the token git may
/// send: `--repo` with none, else the reference's own repository on its forge with the read
/// token (it goes to git only there, never to a `--repo` the operator named elsewhere).
fn forge_clone(
    reference: &crate::github::GithubIssueRef,
    args: &RunArgs,
    config: &Config,
    client: &GithubClient,
) -> Result<(String, Option<String>), RunError> {
    if let Some(repo) = &args.repo {
        return Ok((repo.clone(), None));
    }
    let url = reference.clone_url(&config.github).ok_or_else(|| {
        RunError::Usage(format!(
            "--repo is needed: the clone URL of {reference} cannot be told from [github] \
             api_url {:?}",
            config.github.api_url
        ))
    })?;
    Ok((url, client.token().map(str::to_owned)))
}

/// An on-merge run's intake: the merged pull request's task ([`FetchedPull::merged_task`]),
/// pinned at its merge commit (`--commit` overrides), from the pull request's repository on its
/// forge (the read token goes there only) or `--repo`.
///
/// [`FetchedPull::merged_task`]: crate::github::FetchedPull::merged_task
fn merged_intake(
    reference: &crate::github::GithubIssueRef,
    args: &RunArgs,
    config: &Config,
) -> Result<Intake, RunError> {
    let client = GithubClient::from_config(&config.github)?;
    let pull = client.fetch_pull(reference, &config.github)?;
    let issue = pull.merged_task(reference, &config.github)?;
    let (repo, clone_token) = forge_clone(reference, args, config, &client)?;
    let (rev, from) = match (&args.commit, &pull.merge_commit) {
        (Some(c), _) => (c.clone(), PinFrom::commit_flag()),
        (None, Some(merge)) => (merge.clone(), PinFrom::Named("merge_commit_sha".to_owned())),
        (None, None) => {
            return Err(RunError::Usage(format!(
                "{reference} has no merge commit to pin; pass --commit"
            )));
        }
    };
    let record = IntakeRecord::pinned(
        IntakeSource::GithubMergedPull {
            reference: reference.to_string(),
            api_url: config.github.api_url.clone(),
            url: pull.url.clone(),
            author: pull.author.clone(),
            files: pull.files.len(),
        },
        rev.clone(),
        from,
    );
    Ok(Intake {
        issue,
        repo,
        rev,
        refresh: true,
        clone_token,
        record,
        follow_up: None,
    })
}

/// A follow-up run's intake: the broker says where it starts (the head of the branch it pushed
/// for the queue item, or the item's pin), which issue it is for and what the reviewer asked.
/// The repository is the operator's `--repo` (where the branch was pushed), fetched so the
/// head is there.
fn follow_up_intake(queue_id: i64, args: &RunArgs, config: &Config) -> Result<Intake, RunError> {
    let endpoint = broker_endpoint(config, "the configuration")?;
    let brief = BrokerSocket::new(
        endpoint,
        config.broker.reply_timeout(config.tests.timeout_secs),
    )
    .follow_up(queue_id)
    .map_err(|e| RunError::FollowUp {
        queue_id,
        message: e.to_string(),
    })?;
    let repo = args.repo.clone().ok_or_else(|| {
        RunError::Usage(
            "--repo is needed with --follow-up: the repository the branch was pushed to".into(),
        )
    })?;
    if args.commit.is_some() {
        return Err(RunError::Usage(
            "--commit cannot be given with --follow-up: a follow-up starts from the branch head \
             the broker pushed"
                .into(),
        ));
    }
    let text = brief.issue.clone().unwrap_or(airlock_protocol::IssueText {
        title: format!("Follow-up on {}", brief.issue_id),
        body: String::new(),
    });
    let issue = Issue {
        id: brief.issue_id.clone(),
        title: text.title,
        body: text.body,
        labels: Vec::new(),
        number: brief.issue_number,
        author: None,
        state: None,
        url: None,
    };
    let record = IntakeRecord::pinned(
        IntakeSource::FollowUp {
            queue_id,
            branch: brief.branch.clone(),
            pr_url: brief.pr_url.clone(),
            requested_by: brief.requested_by.clone(),
        },
        brief.base_commit.clone(),
        PinFrom::Named("the branch head the broker pushed".to_owned()),
    );
    Ok(Intake {
        issue,
        repo,
        rev: brief.base_commit.clone(),
        // The head was pushed after the mirror was taken.
        refresh: true,
        clone_token: None,
        record,
        follow_up: Some(brief),
    })
}

/// With a GitHub issue, `[github] token_env` set and `[history] forge` on: read the issue's
/// repository's merged pull requests from the forge and save them beside the
/// index, where the run's history memory finds them (only those merged into the pin's history
/// are visible to it). Returns what the intake record says of it; a failure costs the run only
/// the forge's records, so it is recorded, not fatal.
pub(super) fn save_forge_history(
    args: &RunArgs,
    config: &Config,
    mirror: &Path,
) -> Option<ForgeHistory> {
    let IssueSource::GitHub(reference) = &args.issue else {
        return None;
    };
    if config.github.token_env.is_none() || !config.history.forge {
        return None;
    }
    let index_dir = &config.paths.index_dir;
    let key = airlock_codegraph::store::repo_key(mirror);
    let saved = (|| -> Result<usize, String> {
        let client = GithubClient::from_config(&config.github).map_err(|e| e.to_string())?;
        let known = airlock_codegraph::history::saved_forge_numbers(index_dir, &key)
            .map_err(|e| e.to_string())?;
        let pulls = client
            .merged_pulls(
                &reference.owner,
                &reference.repo,
                config.history.forge_max_pulls,
                &known,
                &config.github,
            )
            .map_err(|e| e.to_string())?;
        airlock_codegraph::history::save_forge_pulls(index_dir, &key, &pulls)
            .map_err(|e| e.to_string())?;
        Ok(pulls.len())
    })();
    Some(match saved {
        Ok(saved) => ForgeHistory::Saved { saved },
        Err(error) => ForgeHistory::Failed { error },
    })
}
