//! GitLab's JSON shapes, only the fields airlock reads, and their conversion into the forge's
//! types.

use serde::Deserialize;

use crate::types::{AccessLevel, Author, ChangeRequest, Comment, ForgeIssue, LineRef, ReviewNote};

#[derive(Deserialize)]
pub(super) struct User {
    pub(super) id: u64,
    username: String,
}

impl User {
    fn into_author(self) -> Author {
        Author {
            id: self.id,
            username: self.username,
        }
    }
}

#[derive(Deserialize)]
pub(super) struct Issue {
    iid: u64,
    title: String,
    #[serde(default)]
    description: Option<String>,
    state: String,
    author: User,
    #[serde(default)]
    labels: Vec<String>,
    web_url: String,
}

impl Issue {
    pub(super) fn into_issue(self, notes: Vec<Note>) -> ForgeIssue {
        let mut labels = self.labels;
        labels.sort();
        ForgeIssue {
            number: self.iid,
            title: self.title,
            body: self.description.unwrap_or_default(),
            state: self.state,
            author: self.author.into_author(),
            labels,
            web_url: self.web_url,
            comments: notes
                .into_iter()
                .filter(|n| !n.system)
                .map(Note::into_comment)
                .collect(),
        }
    }
}

#[derive(Deserialize)]
pub(super) struct IssueNumber {
    pub(super) iid: u64,
}

#[derive(Deserialize)]
pub(super) struct Position {
    #[serde(default)]
    new_path: Option<String>,
    #[serde(default)]
    old_path: Option<String>,
    #[serde(default)]
    new_line: Option<u64>,
    #[serde(default)]
    old_line: Option<u64>,
}

#[derive(Deserialize)]
pub(super) struct Note {
    id: u64,
    body: String,
    pub(super) author: User,
    #[serde(default)]
    pub(super) system: bool,
    #[serde(default)]
    created_at: String,
    #[serde(default)]
    pub(super) resolvable: bool,
    #[serde(default)]
    pub(super) resolved: Option<bool>,
    #[serde(default)]
    position: Option<Position>,
}

impl Note {
    pub(super) fn into_comment(self) -> Comment {
        Comment {
            id: self.id,
            author: self.author.into_author(),
            body: self.body,
            created_at: self.created_at,
        }
    }

    pub(super) fn into_review_note(self, access: Option<AccessLevel>) -> ReviewNote {
        let line = self.position.and_then(|p| {
            let path = p.new_path.or(p.old_path)?;
            Some(LineRef {
                path,
                new_line: p.new_line,
                old_line: p.old_line,
            })
        });
        ReviewNote {
            id: self.id,
            author: self.author.into_author(),
            access,
            body: self.body,
            line,
        }
    }
}

#[derive(Deserialize)]
pub(super) struct Discussion {
    pub(super) id: String,
    #[serde(default)]
    pub(super) notes: Vec<Note>,
}

#[derive(Deserialize)]
pub(super) struct MergeRequest {
    iid: u64,
    web_url: String,
    pub(super) source_branch: String,
    target_branch: String,
    #[serde(default)]
    draft: bool,
    #[serde(default)]
    work_in_progress: bool,
    state: String,
}

impl MergeRequest {
    pub(super) fn into_change(self) -> ChangeRequest {
        ChangeRequest {
            number: self.iid,
            web_url: self.web_url,
            source_branch: self.source_branch,
            target_branch: self.target_branch,
            draft: self.draft || self.work_in_progress,
            state: self.state,
        }
    }
}

#[derive(Deserialize)]
pub(super) struct Member {
    pub(super) access_level: u16,
}

#[derive(Deserialize)]
pub(super) struct Project {
    #[serde(default)]
    pub(super) default_branch: Option<String>,
    #[serde(default)]
    pub(super) path_with_namespace: Option<String>,
}
