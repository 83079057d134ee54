//! The broker's [`Forge`] on GitLab, through `airlock_forge::gitlab::GitLab` (REST v4): draft
//! merge requests (found again by their source branch before one is opened, so a retry never
//! opens two), the claim and `needs-info` labels, notes on issues and merge requests, review
//! feedback from merge request discussions with each author's access level, and a merge
//! request's refs. The token is read from the repository's `token_env` at each request and
//! sent only to the configured instance; no error carries it (the forge crate redacts).

use airlock_forge::gitlab::{GitLab, ProjectId};
use airlock_forge::token::NoToken;
use airlock_forge::{DraftRequest, EnvToken, Forge as _, ReviewNote, TokenSource};
use airlock_protocol::{FeedbackKind, FeedbackSource};

use crate::config::RepositoryConfig;
use crate::config::forge::{GitLabSettings, access_name};
use crate::error::{Error, Result};
use crate::pr_text::OWN_COMMENT_PREFIX;
use crate::publish::{Forge, ForgeFeedback, ForgePull, Pushed, forge_token, pr_body};
use crate::store::{QueueItem, ReviewItem};

/// GitLab behind the broker's [`Forge`]; a client is built for each operation.
#[derive(Debug, Default)]
pub struct GitLabForge;

/// The GitLab settings of `repository`, or an error saying it is not a GitLab repository.
fn settings<'c>(repository: &str, cfg: &'c RepositoryConfig) -> Result<&'c GitLabSettings> {
    cfg.gitlab.as_ref().ok_or_else(|| {
        Error::Forge(format!(
            "repository {repository:?} is not published to GitLab (no [repositories.\
             \"{repository}\".forge] with kind = \"gitlab\")"
        ))
    })
}

/// A client of `repository`'s project with its token; `None` when no `token_env` is
/// configured (the branch is pushed, nothing is written on GitLab). An unset variable is the
/// broker's [`Error::MissingForgeToken`], naming it.
fn client(repository: &str, cfg: &RepositoryConfig) -> Result<Option<GitLab>> {
    let settings = settings(repository, cfg)?;
    let (Some(var), Some(_)) = (&cfg.forge_token_env, forge_token(repository, cfg)?) else {
        return Ok(None);
    };
    let token = EnvToken { var: var.clone() };
    build(settings, Box::new(token)).map(Some)
}

/// The full path GitLab reports for `repository`'s project when `broker.toml` names it by
/// numeric id (a webhook names a project by its path); `None` when it is named by path, is no
/// GitLab project, or no token is configured.
pub(crate) fn numeric_project_path(
    repository: &str,
    cfg: &RepositoryConfig,
) -> Result<Option<String>> {
    let Some(settings) = &cfg.gitlab else {
        return Ok(None);
    };
    if !matches!(settings.project, ProjectId::Id(_)) {
        return Ok(None);
    }
    let Some(gitlab) = client(repository, cfg)? else {
        return Ok(None);
    };
    Ok(Some(gitlab.project_full_path()?))
}

fn build(settings: &GitLabSettings, token: Box<dyn TokenSource>) -> Result<GitLab> {
    Ok(GitLab::new(
        &settings.api_url,
        settings.project.clone(),
        token,
    )?)
}

/// Where a person reads note `note` of issue `number`: the project's page when the project is
/// named by its path, else the note's API address.
fn note_url(settings: &GitLabSettings, number: u64, note: u64) -> String {
    let instance = settings.api_url.trim_end_matches("/api/v4");
    match &settings.project {
        ProjectId::Path(path) => format!("{instance}/{path}/-/issues/{number}#note_{note}"),
        ProjectId::Id(id) => {
            format!(
                "{}/projects/{id}/issues/{number}/notes/{note}",
                settings.api_url
            )
        }
    }
}

/// Whether `note` is one airlock posted (a CI check's, a question, an attestation).
fn is_own(note: &ReviewNote) -> bool {
    note.body.starts_with(OWN_COMMENT_PREFIX)
}

impl GitLabForge {
    fn label(
        &self,
        repository: &str,
        cfg: &RepositoryConfig,
        issue_number: u64,
        label: &str,
        on: bool,
    ) -> Result<bool> {
        let Some(gl) = client(repository, cfg)? else {
            return Ok(false);
        };
        if on {
            gl.add_label(issue_number, label)?;
        } else {
            gl.remove_label(issue_number, label)?;
        }
        Ok(true)
    }

    /// The note `source.id` of merge request `number` and its discussion, as feedback: for a
    /// comment the note alone; for a review its whole discussion (its notes by members at or
    /// above `feedback_min_access`, airlock's own left out), which requests changes while it is
    /// unresolved. The standing that decides is the note's author's.
    fn feedback(
        gl: &GitLab,
        settings: &GitLabSettings,
        number: u64,
        source: FeedbackSource,
    ) -> Result<ForgeFeedback> {
        let feedback = gl.review_feedback(number)?;
        let id = source.id;
        let (thread, note) = feedback
            .threads
            .iter()
            .find_map(|t| t.notes.iter().find(|n| n.id == id).map(|n| (t, n)))
            .ok_or_else(|| {
                Error::FeedbackRefused(format!(
                    "note {id} is no comment on merge request !{number} of {}",
                    settings.project
                ))
            })?;
        if is_own(note) {
            return Err(Error::FeedbackRefused(format!(
                "note {id} is one airlock posted, not feedback"
            )));
        }
        let mut body = Vec::new();
        let mut comments = Vec::new();
        let mut take = |n: &ReviewNote| match &n.line {
            Some(line) => comments.push((
                line.path.clone(),
                line.new_line.or(line.old_line),
                n.body.clone(),
            )),
            None => body.push(n.body.trim().to_owned()),
        };
        let state = match source.kind {
            FeedbackKind::IssueComment => {
                take(note);
                None
            }
            FeedbackKind::Review => {
                let counted = |n: &&ReviewNote| {
                    n.id == id
                        || (!is_own(n)
                            && n.access.is_some_and(|a| a >= settings.feedback_min_access))
                };
                thread.notes.iter().filter(counted).for_each(&mut take);
                Some(
                    if thread.resolved {
                        "RESOLVED"
                    } else {
                        "CHANGES_REQUESTED"
                    }
                    .to_owned(),
                )
            }
            FeedbackKind::CheckRun | FeedbackKind::HeadChecks => {
                return Err(Error::FeedbackRefused(format!(
                    "{id} names a CI job or pipeline, not a review or a comment"
                )));
            }
        };
        Ok(ForgeFeedback {
            author: note.author.username.clone(),
            association: note
                .access
                .map_or_else(|| "no member".to_owned(), access_name),
            access: note.access,
            state,
            body: body.join("\n\n"),
            comments,
        })
    }
}

impl Forge for GitLabForge {
    fn open_draft(
        &self,
        repository: &str,
        cfg: &RepositoryConfig,
        item: &QueueItem,
        pushed: &Pushed,
    ) -> Result<Option<String>> {
        let Some(gl) = client(repository, cfg)? else {
            return Ok(None);
        };
        // An earlier attempt may have opened it before the broker died: look first.
        if let Some(open) = gl.find_change_request(&pushed.branch)? {
            return Ok(Some(open.web_url));
        }
        let opened = gl.open_draft(&DraftRequest {
            title: item.item.title.clone(),
            description: pr_body(item),
            source_branch: pushed.branch.clone(),
            target_branch: cfg.base_branch.clone(),
        })?;
        Ok(Some(opened.web_url))
    }

    fn mark_claimed(
        &self,
        repository: &str,
        cfg: &RepositoryConfig,
        issue_number: u64,
        claimed: bool,
    ) -> Result<bool> {
        self.label(
            repository,
            cfg,
            issue_number,
            crate::claims::CLAIM_LABEL,
            claimed,
        )
    }

    fn set_issue_label(
        &self,
        repository: &str,
        cfg: &RepositoryConfig,
        issue_number: u64,
        label: &'static str,
        on: bool,
    ) -> Result<bool> {
        self.label(repository, cfg, issue_number, label, on)
    }

    fn read_feedback(
        &self,
        repository: &str,
        cfg: &RepositoryConfig,
        pull_request: u64,
        source: FeedbackSource,
    ) -> Result<Option<ForgeFeedback>> {
        let Some(gl) = client(repository, cfg)? else {
            return Ok(None);
        };
        Self::feedback(&gl, settings(repository, cfg)?, pull_request, source).map(Some)
    }

    fn pull_request(
        &self,
        cfg: &RepositoryConfig,
        repository: &str,
        number: u64,
        _token: Option<&str>,
    ) -> Result<ForgePull> {
        // The token is the repository's own, read by the client at the request.
        let gl = match client(repository, cfg)? {
            Some(gl) => gl,
            None => build(settings(repository, cfg)?, Box::new(NoToken))?,
        };
        let mr = gl.merge_request(number)?;
        Ok(ForgePull {
            base_sha: mr.base_sha,
            base_ref: mr.target_branch,
            head_sha: mr.head_sha,
            title: mr.title,
        })
    }

    fn post_review(
        &self,
        _cfg: &RepositoryConfig,
        repository: &str,
        item: &ReviewItem,
    ) -> Result<String> {
        Err(Error::Forge(format!(
            "repository {repository:?} is on GitLab: the broker posts reviews only on GitHub \
             pull requests, so the review of !{} was not posted; read it with `airlock-broker \
             show` and post it by hand",
            item.pull.number
        )))
    }

    fn post_comment(
        &self,
        repository: &str,
        cfg: &RepositoryConfig,
        number: u64,
        body: &str,
    ) -> Result<Option<String>> {
        let Some(gl) = client(repository, cfg)? else {
            return Ok(None);
        };
        let note = gl.comment_on_issue(number, body)?;
        Ok(Some(note_url(settings(repository, cfg)?, number, note.id)))
    }

    fn post_pull_comment(
        &self,
        repository: &str,
        cfg: &RepositoryConfig,
        number: u64,
        body: &str,
    ) -> Result<Option<String>> {
        let Some(gl) = client(repository, cfg)? else {
            return Ok(None);
        };
        let note = gl.comment_on_merge_request(number, body)?;
        let settings = settings(repository, cfg)?;
        let instance = settings.api_url.trim_end_matches("/api/v4");
        Ok(Some(match &settings.project {
            ProjectId::Path(path) => {
                format!(
                    "{instance}/{path}/-/merge_requests/{number}#note_{}",
                    note.id
                )
            }
            ProjectId::Id(id) => format!(
                "{}/projects/{id}/merge_requests/{number}/notes/{}",
                settings.api_url, note.id
            ),
        }))
    }

    fn issue_thread(
        &self,
        repository: &str,
        cfg: &RepositoryConfig,
        issue_number: u64,
    ) -> Result<Option<crate::issue_thread::IssueThread>> {
        use crate::issue_thread::{IssueThread, ThreadComment, ThreadState};
        let Some(gl) = client(repository, cfg)? else {
            return Ok(None);
        };
        let min_access = settings(repository, cfg)?.feedback_min_access;
        let issue = match gl.issue(issue_number) {
            Ok(issue) => issue,
            Err(airlock_forge::Error::Status { status: 404, .. }) => {
                return Ok(Some(IssueThread::Gone));
            }
            Err(e) => return Err(e.into()),
        };
        // Each author's standing is read from the project's members, once per author.
        let mut access = std::collections::BTreeMap::new();
        let mut comments = Vec::with_capacity(issue.comments.len());
        for note in issue.comments {
            let level = match access.get(&note.author.id) {
                Some(level) => *level,
                None => {
                    let level = gl.member_access(note.author.id)?;
                    access.insert(note.author.id, level);
                    level
                }
            };
            comments.push(ThreadComment {
                id: note.id,
                by: note.author.username,
                standing: level.map_or_else(|| "no member".to_owned(), access_name),
                member: level.is_some_and(|l| l >= min_access),
                body: note.body,
            });
        }
        Ok(Some(IssueThread::Present(ThreadState {
            forge: "gitlab",
            open: issue.state == "opened",
            author: issue.author.username,
            comments,
        })))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_notes_address_is_the_projects_page_or_the_api() {
        let mut s = GitLabSettings {
            api_url: "https://gitlab.example/api/v4".to_owned(),
            project: ProjectId::Path("plat/app".to_owned()),
            feedback_min_access: airlock_forge::AccessLevel::DEVELOPER,
        };
        assert_eq!(
            note_url(&s, 7, 99),
            "https://gitlab.example/plat/app/-/issues/7#note_99"
        );
        s.project = ProjectId::Id(42);
        assert_eq!(
            note_url(&s, 7, 99),
            "https://gitlab.example/api/v4/projects/42/issues/7/notes/99"
        );
    }
}
