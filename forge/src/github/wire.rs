//! GitHub's JSON shapes, only the fields airlock reads, and their conversion into the forge's
//! types. Fields GitHub always sends but a stand-in may leave out default to empty, as the
//! supervisor's and broker's readers of these answers always did.

use serde::Deserialize;

use crate::types::{AccessLevel, Author, ChangeRequest, Comment, LineRef, ReviewNote};

#[derive(Deserialize, Default)]
pub(super) struct User {
    #[serde(default)]
    id: u64,
    #[serde(default)]
    login: String,
}

impl User {
    fn into_author(self) -> Author {
        Author {
            id: self.id,
            username: self.login,
        }
    }
}

/// A label as the REST API lists it: an object with a `name`, or (in older answers) a string.
#[derive(Deserialize)]
#[serde(untagged)]
pub(super) enum Label {
    Named { name: String },
    Plain(String),
    Other(serde::de::IgnoredAny),
}

impl Label {
    fn name(self) -> Option<String> {
        match self {
            Label::Named { name } | Label::Plain(name) => Some(name),
            Label::Other(_) => None,
        }
    }
}

#[derive(Deserialize)]
pub(super) struct Issue {
    pub(super) number: u64,
    pub(super) title: String,
    #[serde(default)]
    pub(super) body: Option<String>,
    #[serde(default)]
    pub(super) state: Option<String>,
    #[serde(default)]
    pub(super) user: Option<User>,
    #[serde(default)]
    labels: Vec<Label>,
    #[serde(default)]
    pub(super) html_url: Option<String>,
    /// How many comments the issue has (GitHub's count; absent in some answers).
    #[serde(default)]
    pub(super) comments: Option<u64>,
    /// Present (and not null) when the "issue" is a pull request.
    #[serde(default)]
    pub(super) pull_request: Option<serde_json::Value>,
}

impl Issue {
    pub(super) fn is_pull_request(&self) -> bool {
        self.pull_request.as_ref().is_some_and(|p| !p.is_null())
    }

    pub(super) fn label_names(&mut self) -> Vec<String> {
        let mut names: Vec<String> = std::mem::take(&mut self.labels)
            .into_iter()
            .filter_map(Label::name)
            .collect();
        names.sort();
        names
    }

    pub(super) fn author(&mut self) -> Author {
        self.user.take().unwrap_or_default().into_author()
    }
}

/// An entry of an issue list: pull requests are issues too, marked by `pull_request`.
#[derive(Deserialize)]
pub(super) struct IssueNumber {
    #[serde(default)]
    pub(super) number: Option<u64>,
    #[serde(default)]
    pull_request: Option<serde_json::Value>,
}

impl IssueNumber {
    pub(super) fn is_pull_request(&self) -> bool {
        self.pull_request.as_ref().is_some_and(|p| !p.is_null())
    }
}

/// An issue comment (also a pull request's conversation comment).
#[derive(Deserialize)]
pub(super) struct IssueComment {
    #[serde(default)]
    id: u64,
    #[serde(default)]
    user: Option<User>,
    #[serde(default)]
    body: Option<String>,
    #[serde(default)]
    created_at: Option<String>,
    #[serde(default)]
    pub(super) html_url: Option<String>,
}

impl IssueComment {
    pub(super) fn into_comment(self) -> Comment {
        Comment {
            id: self.id,
            author: self.user.unwrap_or_default().into_author(),
            body: self.body.unwrap_or_default(),
            created_at: self.created_at.unwrap_or_default(),
        }
    }
}

#[derive(Deserialize)]
pub(super) struct BranchRef {
    #[serde(rename = "ref", default)]
    name: String,
}

#[derive(Deserialize)]
pub(super) struct Pull {
    pub(super) number: u64,
    pub(super) html_url: String,
    #[serde(default)]
    state: String,
    #[serde(default)]
    draft: bool,
    head: BranchRef,
    base: BranchRef,
}

impl Pull {
    pub(super) fn head(&self) -> &str {
        &self.head.name
    }

    pub(super) fn into_change(self) -> ChangeRequest {
        ChangeRequest {
            number: self.number,
            web_url: self.html_url,
            source_branch: self.head.name,
            target_branch: self.base.name,
            draft: self.draft,
            state: self.state,
        }
    }
}

/// A pull request review: a verdict with a body, and the line comments filed with it.
#[derive(Deserialize)]
pub(super) struct Review {
    pub(super) id: u64,
    #[serde(default)]
    user: Option<User>,
    #[serde(default)]
    body: Option<String>,
    #[serde(default)]
    author_association: Option<String>,
}

impl Review {
    /// The review's own text as the first note of its thread; `None` when it has none.
    pub(super) fn into_note(self) -> Option<ReviewNote> {
        let body = self.body.unwrap_or_default();
        if body.trim().is_empty() {
            return None;
        }
        Some(ReviewNote {
            id: self.id,
            access: super::access_of_association(self.author_association.as_deref()),
            author: self.user.unwrap_or_default().into_author(),
            body,
            line: None,
        })
    }
}

/// A line comment of a pull request review.
#[derive(Deserialize)]
pub(super) struct ReviewComment {
    pub(super) id: u64,
    #[serde(default)]
    pub(super) pull_request_review_id: Option<u64>,
    #[serde(default)]
    user: Option<User>,
    #[serde(default)]
    body: Option<String>,
    #[serde(default)]
    author_association: Option<String>,
    #[serde(default)]
    path: Option<String>,
    #[serde(default)]
    line: Option<u64>,
    #[serde(default)]
    original_line: Option<u64>,
    #[serde(default)]
    side: Option<String>,
}

impl ReviewComment {
    pub(super) fn into_note(self) -> ReviewNote {
        // `line` is on the side the comment was made on; `LEFT` is the old file.
        let line = self.line.or(self.original_line);
        let old_side = self.side.as_deref() == Some("LEFT");
        ReviewNote {
            id: self.id,
            access: super::access_of_association(self.author_association.as_deref()),
            author: self.user.unwrap_or_default().into_author(),
            body: self.body.unwrap_or_default(),
            line: self.path.map(|path| LineRef {
                path,
                new_line: if old_side { None } else { line },
                old_line: if old_side { line } else { None },
            }),
        }
    }
}

/// `GET /repos/O/R/collaborators/USER/permission`.
#[derive(Deserialize)]
pub(super) struct Permission {
    #[serde(default)]
    pub(super) permission: String,
}

impl Permission {
    /// GitHub's repository roles on GitLab's scale: `admin` is an owner, `maintain` a
    /// maintainer, `write` a developer, `triage` a reporter, `read` a guest; `none` no member.
    pub(super) fn access(&self) -> Option<AccessLevel> {
        match self.permission.as_str() {
            "admin" => Some(AccessLevel::OWNER),
            "maintain" => Some(AccessLevel::MAINTAINER),
            "write" => Some(AccessLevel::DEVELOPER),
            "triage" => Some(AccessLevel::REPORTER),
            "read" => Some(AccessLevel::GUEST),
            _ => None,
        }
    }
}

/// `GET /user/ID`: the login the permission endpoint is addressed by.
#[derive(Deserialize)]
pub(super) struct Account {
    pub(super) login: String,
}

/// `GET /repos/O/R`.
#[derive(Deserialize)]
pub(super) struct Repository {
    #[serde(default)]
    pub(super) default_branch: Option<String>,
}
