//! What GitLab publication needs beyond [`crate::Forge`]: a merge request's branches and
//! commits (`diff_refs`), notes on a merge request (whose numbers are not an issue's), and a
//! pipeline's failed jobs with the tail of their logs (CI feedback).

use serde::Deserialize;
use serde_json::json;

use super::{GitLab, Method, reference::percent_encode, wire, within_limit};
use crate::error::{Error, Result};
use crate::types::Comment;

/// The most of a job's log kept, in bytes: its tail, where a failure is.
pub const MAX_TRACE_BYTES: usize = 64 * 1024;

/// A merge request's branches and commits as GitLab has them now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MergeRequestRefs {
    /// The project-scoped number (`iid`).
    pub number: u64,
    /// The title, repository text.
    pub title: String,
    /// The source (head) branch.
    pub source_branch: String,
    /// The target (base) branch.
    pub target_branch: String,
    /// `diff_refs.base_sha`: the merge base the diff is shown against.
    pub base_sha: String,
    /// `diff_refs.start_sha`: the target branch's head when the diff was computed.
    pub start_sha: String,
    /// `diff_refs.head_sha`: the source branch's head.
    pub head_sha: String,
    /// `opened`, `merged`, `closed`.
    pub state: String,
}

/// An open merge request: its number, source branch and head commit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OpenMergeRequest {
    /// The project-scoped number (`iid`).
    pub number: u64,
    /// The source (head) branch.
    pub source_branch: String,
    /// The source branch's head commit (`sha`).
    pub head_sha: String,
}

#[derive(Deserialize)]
struct WireOpenMergeRequest {
    iid: u64,
    source_branch: String,
    #[serde(default)]
    sha: Option<String>,
}

/// One CI job of a pipeline.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Job {
    /// The job's id (instance-wide).
    pub id: u64,
    /// Its name in `.gitlab-ci.yml`.
    pub name: String,
    /// Its stage.
    pub stage: String,
    /// `failed`, `success`, `canceled`, `skipped`, `running`, ...
    pub status: String,
    /// Whether its failure is allowed (a failed allowed job fails nothing).
    pub allow_failure: bool,
    /// GitLab's reason for a failure (`script_failure`, `stuck_or_timeout_failure`, ...).
    pub failure_reason: Option<String>,
    /// The commit it ran on.
    pub sha: String,
    /// The pipeline it belongs to.
    pub pipeline_id: Option<u64>,
}

impl Job {
    /// Whether it failed in a way that fails its pipeline.
    pub fn failed(&self) -> bool {
        self.status == "failed" && !self.allow_failure
    }
}

/// The tail of a job's log and the whole log's length.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobTrace {
    /// The last [`MAX_TRACE_BYTES`] at most, from a character boundary on.
    pub text: String,
    /// The whole log's length in bytes.
    pub total_bytes: u64,
}

#[derive(Deserialize)]
struct DiffRefs {
    base_sha: String,
    start_sha: String,
    head_sha: String,
}

#[derive(Deserialize)]
struct MergeRequestDetail {
    iid: u64,
    #[serde(default)]
    title: String,
    source_branch: String,
    target_branch: String,
    state: String,
    #[serde(default)]
    diff_refs: Option<DiffRefs>,
}

#[derive(Deserialize)]
struct WireCommit {
    id: String,
}

#[derive(Deserialize)]
struct WirePipeline {
    id: u64,
    #[serde(default)]
    sha: Option<String>,
}

#[derive(Deserialize)]
struct WireJob {
    id: u64,
    name: String,
    #[serde(default)]
    stage: String,
    status: String,
    #[serde(default)]
    allow_failure: bool,
    #[serde(default)]
    failure_reason: Option<String>,
    #[serde(default)]
    commit: Option<WireCommit>,
    #[serde(default)]
    pipeline: Option<WirePipeline>,
}

impl WireJob {
    fn into_job(self, url: &str) -> Result<Job> {
        let sha = self
            .commit
            .map(|c| c.id)
            .or_else(|| self.pipeline.as_ref().and_then(|p| p.sha.clone()))
            .ok_or_else(|| Error::Shape {
                method: "GET",
                url: url.to_owned(),
                problem: format!("job {} names no commit", self.id),
            })?;
        Ok(Job {
            id: self.id,
            name: self.name,
            stage: self.stage,
            status: self.status,
            allow_failure: self.allow_failure,
            failure_reason: self.failure_reason,
            sha,
            pipeline_id: self.pipeline.map(|p| p.id),
        })
    }
}

impl GitLab {
    /// Merge request `number`'s branches and commits (`GET .../merge_requests/:iid`). GitLab
    /// fills `diff_refs` a moment after the merge request opens: until then this is an error
    /// saying to try again.
    pub fn merge_request(&self, number: u64) -> Result<MergeRequestRefs> {
        let path = self.project_path(&format!("/merge_requests/{number}"));
        let mr: MergeRequestDetail = self.get(&path)?;
        let refs = mr.diff_refs.ok_or_else(|| Error::Shape {
            method: "GET",
            url: format!("{}{path}", self.api),
            problem: format!(
                "merge request !{number} has no diff_refs yet (GitLab is still computing its \
                 diff): try again in a moment"
            ),
        })?;
        Ok(MergeRequestRefs {
            number: mr.iid,
            title: mr.title,
            source_branch: mr.source_branch,
            target_branch: mr.target_branch,
            base_sha: refs.base_sha,
            start_sha: refs.start_sha,
            head_sha: refs.head_sha,
            state: mr.state,
        })
    }

    /// The project's full path (`GET /projects/:id`'s `path_with_namespace`): what a
    /// webhook names the project by, whichever way it was configured.
    pub fn project_full_path(&self) -> Result<String> {
        let path = self.project_path("");
        let project: wire::Project = self.get(&path)?;
        project
            .path_with_namespace
            .filter(|p| !p.is_empty())
            .ok_or_else(|| Error::Shape {
                method: "GET",
                url: format!("{}{path}", self.api),
                problem: "no `path_with_namespace`".to_owned(),
            })
    }

    /// The open merge requests whose source branch starts with `prefix`
    /// (`GET .../merge_requests?state=opened`, every page), by number; one GitLab lists with
    /// no head commit yet is left out.
    pub fn open_merge_requests(&self, prefix: &str) -> Result<Vec<OpenMergeRequest>> {
        let path = self.project_path("/merge_requests?state=opened");
        let listed: Vec<WireOpenMergeRequest> = self.get_all(&path)?;
        let mut open: Vec<OpenMergeRequest> = listed
            .into_iter()
            .filter(|m| m.source_branch.starts_with(prefix))
            .filter_map(|m| {
                Some(OpenMergeRequest {
                    number: m.iid,
                    source_branch: m.source_branch,
                    head_sha: m.sha.filter(|s| !s.is_empty())?,
                })
            })
            .collect();
        open.sort_by_key(|m| m.number);
        Ok(open)
    }

    /// Post `body` as a note on merge request `number` (`POST .../merge_requests/:iid/notes`).
    pub fn comment_on_merge_request(&self, number: u64, body: &str) -> Result<Comment> {
        within_limit("the note", body)?;
        let path = self.project_path(&format!("/merge_requests/{number}/notes"));
        let note: wire::Note = self.send_json(Method::Post, &path, &json!({ "body": body }))?;
        Ok(note.into_comment())
    }

    /// Job `id` of the project (`GET .../jobs/:id`).
    pub fn job(&self, id: u64) -> Result<Job> {
        let path = self.project_path(&format!("/jobs/{id}"));
        let job: WireJob = self.get(&path)?;
        job.into_job(&format!("{}{path}", self.api))
    }

    /// The failed jobs of pipeline `pipeline` (`GET .../pipelines/:id/jobs?scope[]=failed`),
    /// in GitLab's order, every page read.
    pub fn failed_jobs(&self, pipeline: u64) -> Result<Vec<Job>> {
        let path = self.project_path(&format!("/pipelines/{pipeline}/jobs?scope%5B%5D=failed"));
        let jobs: Vec<WireJob> = self.get_all(&path)?;
        let url = format!("{}{path}", self.api);
        jobs.into_iter().map(|j| j.into_job(&url)).collect()
    }

    /// The ids of the pipelines that ran on commit `sha` (`GET .../pipelines?sha=`), newest
    /// first as GitLab lists them.
    pub fn pipelines_of(&self, sha: &str) -> Result<Vec<u64>> {
        let path = self.project_path(&format!("/pipelines?sha={}", percent_encode(sha)));
        let pipelines: Vec<WirePipeline> = self.get_all(&path)?;
        Ok(pipelines.into_iter().map(|p| p.id).collect())
    }

    /// The failed jobs (`scope[]=failed`, allowed failures included: see [`Job::failed`]) that
    /// ran on commit `sha`, in its newest `pipelines` pipelines: what a commit's CI said.
    pub fn failed_jobs_on(&self, sha: &str, pipelines: usize) -> Result<Vec<Job>> {
        let mut jobs = Vec::new();
        for pipeline in self.pipelines_of(sha)?.into_iter().take(pipelines) {
            jobs.extend(
                self.failed_jobs(pipeline)?
                    .into_iter()
                    .filter(|job| job.sha == sha),
            );
        }
        Ok(jobs)
    }

    /// The tail of job `id`'s log (`GET .../jobs/:id/trace`), at most [`MAX_TRACE_BYTES`].
    pub fn job_trace(&self, id: u64) -> Result<JobTrace> {
        let path = self.project_path(&format!("/jobs/{id}/trace"));
        let answer = self.send(Method::Get, &path, None)?;
        Ok(tail(&answer.text))
    }
}

/// The last [`MAX_TRACE_BYTES`] of `text`, starting at a character boundary.
fn tail(text: &str) -> JobTrace {
    let total_bytes = text.len() as u64;
    let mut start = text.len().saturating_sub(MAX_TRACE_BYTES);
    while !text.is_char_boundary(start) {
        start += 1;
    }
    JobTrace {
        text: text[start..].to_owned(),
        total_bytes,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_long_trace_keeps_its_tail_from_a_character_boundary() {
        let mut text = "é".repeat(MAX_TRACE_BYTES);
        text.push_str("FAILED test_x");
        let t = tail(&text);
        assert_eq!(t.total_bytes, text.len() as u64);
        assert!(t.text.len() <= MAX_TRACE_BYTES);
        assert!(t.text.ends_with("FAILED test_x"));
        assert_eq!(tail("short").text, "short");
    }
}
