//! The requests and replies of [`crate::Forge`], the same whichever forge answers them.

use serde::{Deserialize, Serialize};

/// A person on the forge.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Author {
    /// The forge's numeric user id.
    pub id: u64,
    /// The login (`username` on GitLab).
    pub username: String,
}

/// An issue and its comments, as text to be treated as data.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ForgeIssue {
    /// The project-scoped number (GitLab's `iid`).
    pub number: u64,
    /// The title.
    pub title: String,
    /// The description (empty when there is none).
    pub body: String,
    /// `opened`/`open` or `closed`, as the forge says it.
    pub state: String,
    /// Who opened it.
    pub author: Author,
    /// Its labels, sorted.
    pub labels: Vec<String>,
    /// Where a person reads it.
    pub web_url: String,
    /// The comments people wrote (system notes left out), oldest first.
    pub comments: Vec<Comment>,
}

/// One comment (a GitLab note) on an issue.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Comment {
    /// The forge's id of the comment.
    pub id: u64,
    /// Who wrote it.
    pub author: Author,
    /// The text.
    pub body: String,
    /// When, as the forge wrote it (RFC 3339).
    pub created_at: String,
}

/// A draft change request to open: the branch is pushed already.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DraftRequest {
    /// The title, without any draft marker (the forge adds its own).
    pub title: String,
    /// The description (Markdown).
    pub description: String,
    /// The pushed branch with the change.
    pub source_branch: String,
    /// The branch it is to merge into.
    pub target_branch: String,
}

/// A change request (pull request, merge request) as the forge reports it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChangeRequest {
    /// The project-scoped number (GitLab's `iid`).
    pub number: u64,
    /// Where a person reads it.
    pub web_url: String,
    /// The head (source) branch.
    pub source_branch: String,
    /// The base (target) branch.
    pub target_branch: String,
    /// Whether the forge holds it as a draft.
    pub draft: bool,
    /// `opened`/`open`, `merged`, `closed`, as the forge says it.
    pub state: String,
}

/// A member's standing in a project, on GitLab's scale (its `access_level` numbers), so that
/// "at or above developer" is a comparison.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct AccessLevel(pub u16);

impl AccessLevel {
    /// Guest (10).
    pub const GUEST: AccessLevel = AccessLevel(10);
    /// Reporter (20).
    pub const REPORTER: AccessLevel = AccessLevel(20);
    /// Developer (30).
    pub const DEVELOPER: AccessLevel = AccessLevel(30);
    /// Maintainer (40).
    pub const MAINTAINER: AccessLevel = AccessLevel(40);
    /// Owner (50).
    pub const OWNER: AccessLevel = AccessLevel(50);
}

/// Where on the change a line comment sits.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LineRef {
    /// The file, in the new tree (the old one for a removed line).
    pub path: String,
    /// The line in the new file, when the comment is on a new or unchanged line.
    pub new_line: Option<u64>,
    /// The line in the old file, when the comment is on a removed or unchanged line.
    pub old_line: Option<u64>,
}

/// One comment of a review thread.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReviewNote {
    /// The forge's id of the comment.
    pub id: u64,
    /// Who wrote it.
    pub author: Author,
    /// The author's standing in the project; `None` for someone who is no member.
    pub access: Option<AccessLevel>,
    /// The text.
    pub body: String,
    /// Where on the diff, for a line comment.
    pub line: Option<LineRef>,
}

/// A thread of review comments (a GitLab discussion).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReviewThread {
    /// The forge's id of the thread.
    pub id: String,
    /// Whether the thread was resolved (false for one that cannot be).
    pub resolved: bool,
    /// Its comments, oldest first, system notes left out.
    pub notes: Vec<ReviewNote>,
}

/// The review feedback on a change request.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct ReviewFeedback {
    /// The change request's number.
    pub number: u64,
    /// Its threads, in the forge's order, those with no comment by a person left out.
    pub threads: Vec<ReviewThread>,
}

impl ReviewFeedback {
    /// The comments by members at or above `level` (the analogue of `feedback_from`), in
    /// thread order; everyone else's are left out.
    pub fn from_at_least(&self, level: AccessLevel) -> Vec<&ReviewNote> {
        self.threads
            .iter()
            .flat_map(|t| &t.notes)
            .filter(|n| n.access.is_some_and(|a| a >= level))
            .collect()
    }
}
