//! The intake record: where a run's issue (or pull request), its repository and its pin came
//! from. Written as `outcome.json`'s `intake`, in the trajectory's `run_started` entry and in
//! `parked.json`; the same JSON shape as it always had.

use serde::{Deserialize, Serialize};

/// Where a run's task came from, how its revision was chosen and what intake saved on the way.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct IntakeRecord {
    /// The task's source and what it said (`source` names it).
    #[serde(flatten)]
    pub source: IntakeSource,
    /// The revision pinned and why (every source but a review's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pin: Option<Pin>,
    /// The forge's merged pull requests saved for the history memory (a GitHub issue's run
    /// with `[history] forge` on).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub history_forge: Option<ForgeHistory>,
}

/// The source of a run's task, with what intake recorded of it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "source", rename_all = "snake_case")]
pub enum IntakeSource {
    /// An issue file (`--issue PATH`).
    File {
        /// The file.
        path: String,
    },
    /// A GitHub issue.
    Github {
        /// The reference as given.
        reference: String,
        /// `[github] api_url`.
        api_url: String,
        /// The number.
        number: Option<u64>,
        /// Its web address.
        url: Option<String>,
        /// Its author's login.
        author: Option<String>,
        /// Its state on the forge.
        state: Option<String>,
        /// How many comments were included in the body.
        comments_included: usize,
    },
    /// A GitLab issue.
    Gitlab {
        /// The reference as given (`GROUP/NAME#N`).
        reference: String,
        /// `[gitlab] api_url`.
        api_url: String,
        /// The number (its `iid`).
        number: Option<u64>,
        /// Its web address.
        url: Option<String>,
        /// Its author's username.
        author: Option<String>,
        /// Its state on the forge.
        state: Option<String>,
        /// How many notes were included in the body.
        comments_included: usize,
    },
    /// A merged pull request (an on-merge agent's task).
    GithubMergedPull {
        /// The reference as given.
        reference: String,
        /// `[github] api_url`.
        api_url: String,
        /// Its web address.
        url: Option<String>,
        /// Its author's login.
        author: Option<String>,
        /// How many files it changed.
        files: usize,
    },
    /// A follow-up on a queued pull request's change request.
    FollowUp {
        /// The broker's queue item.
        queue_id: i64,
        /// The branch the broker pushed.
        branch: Option<String>,
        /// The pull request's web address.
        pr_url: Option<String>,
        /// Who asked for the change.
        requested_by: String,
    },
    /// A pull request to review (`airlock review`).
    GithubPullRequest {
        /// The reference as given.
        reference: String,
        /// `[github] api_url`.
        api_url: String,
        /// Its web address.
        url: Option<String>,
        /// Its author's login.
        author: Option<String>,
        /// Its base commit.
        base_sha: String,
        /// Its head commit.
        head_sha: String,
        /// The merge base of the two: where the diff starts.
        merge_base: String,
        /// The files it changes, as the API lists them.
        files: Vec<String>,
    },
}

/// The revision a run pins and why.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Pin {
    /// The revision as chosen, before it was resolved.
    pub rev: String,
    /// Who chose it.
    pub from: PinFrom,
    /// The 40-hex commit it resolved to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub commit: Option<String>,
}

/// Who chose a pinned revision.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum PinFrom {
    /// A default branch's head, read at intake.
    DefaultBranch {
        /// The branch.
        default_branch: String,
    },
    /// A fixed reason: `--commit`, `merge_commit_sha`, the branch head the broker pushed.
    Named(String),
}

impl PinFrom {
    /// `--commit`.
    pub fn commit_flag() -> Self {
        PinFrom::Named("--commit".to_owned())
    }
}

/// What saving the forge's merged pull requests did.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum ForgeHistory {
    /// This many were saved.
    Saved {
        /// How many.
        saved: usize,
    },
    /// They could not be read or saved (the run goes on without them).
    Failed {
        /// Why.
        error: String,
    },
}

impl IntakeRecord {
    /// A record of `source` pinned at `pin`.
    pub fn pinned(source: IntakeSource, rev: String, from: PinFrom) -> Self {
        IntakeRecord {
            source,
            pin: Some(Pin {
                rev,
                from,
                commit: None,
            }),
            history_forge: None,
        }
    }

    /// The record as JSON (its keys sorted, as `outcome.json` has always written it).
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::to_value(self).unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn each_source_keeps_the_shape_it_was_written_in() {
        let mut github = IntakeRecord::pinned(
            IntakeSource::Github {
                reference: "acme/calc#7".into(),
                api_url: "https://api.github.com".into(),
                number: Some(7),
                url: None,
                author: Some("alice".into()),
                state: Some("open".into()),
                comments_included: 1,
            },
            "refs/heads/dev".into(),
            PinFrom::DefaultBranch {
                default_branch: "dev".into(),
            },
        );
        github.history_forge = Some(ForgeHistory::Saved { saved: 2 });
        if let Some(pin) = &mut github.pin {
            pin.commit = Some("c".repeat(40));
        }
        let expected = json!({
            "source": "github", "reference": "acme/calc#7", "api_url": "https://api.github.com",
            "number": 7, "url": null, "author": "alice", "state": "open",
            "comments_included": 1,
            "pin": {"rev": "refs/heads/dev", "from": {"default_branch": "dev"}, "commit": "c".repeat(40)},
            "history_forge": {"saved": 2},
        });
        assert_eq!(github.to_json(), expected);
        let back: IntakeRecord = serde_json::from_value(expected).unwrap();
        assert_eq!(back, github);

        let file = IntakeRecord::pinned(
            IntakeSource::File {
                path: "issue.json".into(),
            },
            "HEAD".into(),
            PinFrom::commit_flag(),
        );
        let expected = json!({"source": "file", "path": "issue.json", "pin": {"rev": "HEAD", "from": "--commit"}});
        assert_eq!(file.to_json(), expected);
        assert_eq!(
            serde_json::from_value::<IntakeRecord>(expected).unwrap(),
            file
        );

        let review = IntakeRecord {
            source: IntakeSource::GithubPullRequest {
                reference: "acme/calc#3".into(),
                api_url: "https://api.github.com".into(),
                url: Some("https://github.com/acme/calc/pull/3".into()),
                author: None,
                base_sha: "a".repeat(40),
                head_sha: "b".repeat(40),
                merge_base: "a".repeat(40),
                files: vec!["calc/ops.py".into()],
            },
            pin: None,
            history_forge: None,
        };
        let text = review.to_json().to_string();
        assert!(
            !text.contains("pin") && !text.contains("history_forge"),
            "{text}"
        );
        let back: IntakeRecord = serde_json::from_str(&text).unwrap();
        assert_eq!(back, review);
    }
}
