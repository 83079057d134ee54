//! GitLab's CI as checks: a pipeline's job is a check run (its id the job's, its name the
//! job's), failed when it failed without `allow_failure`; a commit's checks are the failed jobs
//! of the pipelines that ran on it; its log is the tail of the job's trace. GitLab has no
//! annotations.

use airlock_forge::EnvToken;
use airlock_forge::gitlab::{GitLab, Job};

use super::{Annotation, CheckOutput, CheckRun, Checks, LogTail};
use crate::config::RepositoryConfig;
use crate::config::forge::GitLabSettings;
use crate::error::{Error, Result};

/// The most pipelines of one commit read: the newest, where a re-run's jobs are.
const MAX_PIPELINES: usize = 5;

/// A GitLab project's pipelines, read with the repository's token.
pub(super) struct GitLabChecks {
    gitlab: GitLab,
}

impl GitLabChecks {
    /// The checks of `repository`, whose token variable the caller has found set.
    pub(super) fn new(
        repository: &str,
        cfg: &RepositoryConfig,
        settings: &GitLabSettings,
    ) -> Result<GitLabChecks> {
        let var = cfg.forge_token_env.clone().ok_or_else(|| {
            Error::FeedbackRefused(format!(
                "no forge token is configured for {repository}: the broker cannot read its \
                 pipelines (set forge.token_env)"
            ))
        })?;
        let gitlab = GitLab::new(
            &settings.api_url,
            settings.project.clone(),
            Box::new(EnvToken { var }),
        )?;
        Ok(GitLabChecks { gitlab })
    }
}

/// `job` as a check run: GitLab's statuses on the checks' scale (a failure by timeout is
/// `timed_out`, a cancelled job `cancelled`), its stage and failure reason as the title.
fn check_run(job: Job) -> CheckRun {
    let finished = matches!(
        job.status.as_str(),
        "failed" | "success" | "canceled" | "skipped"
    );
    let timed_out = matches!(
        job.failure_reason.as_deref(),
        Some("stuck_or_timeout_failure" | "job_execution_timeout")
    );
    let conclusion = match job.status.as_str() {
        "failed" if job.allow_failure => "neutral",
        "failed" if timed_out => "timed_out",
        "failed" => "failure",
        "canceled" => "cancelled",
        other => other,
    };
    let title = match &job.failure_reason {
        Some(reason) => format!("stage {}: {reason}", job.stage),
        None => format!("stage {}", job.stage),
    };
    CheckRun {
        id: job.id,
        name: job.name,
        head_sha: job.sha,
        status: Some(if finished { "completed" } else { "in_progress" }.to_owned()),
        conclusion: finished.then(|| conclusion.to_owned()),
        output: CheckOutput {
            title: Some(title),
            ..CheckOutput::default()
        },
        app: None,
    }
}

impl Checks for GitLabChecks {
    fn check_run(&self, id: u64) -> Result<CheckRun> {
        match self.gitlab.job(id) {
            Ok(job) => Ok(check_run(job)),
            Err(airlock_forge::Error::Status { status: 404, .. }) => Err(Error::FeedbackRefused(
                format!("job {id} does not exist in {}", self.gitlab.project()),
            )),
            Err(e) => Err(e.into()),
        }
    }

    fn runs_of(&self, sha: &str, name: Option<&str>) -> Result<Vec<CheckRun>> {
        Ok(self
            .gitlab
            .failed_jobs_on(sha, MAX_PIPELINES)?
            .into_iter()
            .filter(|job| name.is_none_or(|n| n == job.name))
            .map(check_run)
            .collect())
    }

    fn annotations(&self, _id: u64) -> Result<Vec<Annotation>> {
        Ok(Vec::new())
    }

    fn log(&self, run: &CheckRun) -> Result<Option<LogTail>> {
        let trace = match self.gitlab.job_trace(run.id) {
            Ok(trace) => trace,
            Err(airlock_forge::Error::Status { status: 404, .. }) => return Ok(None),
            Err(e) => return Err(e.into()),
        };
        Ok(Some(LogTail {
            text: trace.text,
            total_bytes: trace.total_bytes,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job(status: &str, allow_failure: bool, reason: Option<&str>) -> Job {
        Job {
            id: 9,
            name: "test".to_owned(),
            stage: "test".to_owned(),
            status: status.to_owned(),
            allow_failure,
            failure_reason: reason.map(str::to_owned),
            sha: "a".repeat(40),
            pipeline_id: Some(1),
        }
    }

    #[test]
    fn a_job_fails_as_a_check_only_when_its_failure_is_not_allowed() {
        let failed = check_run(job("failed", false, Some("script_failure")));
        assert!(failed.failed());
        assert_eq!(
            failed.output.title.as_deref(),
            Some("stage test: script_failure")
        );
        let timed_out = check_run(job("failed", false, Some("job_execution_timeout")));
        assert_eq!(timed_out.conclusion.as_deref(), Some("timed_out"));
        assert!(timed_out.failed());
        assert!(!check_run(job("failed", true, None)).failed());
        assert!(!check_run(job("canceled", false, None)).failed());
        assert!(!check_run(job("success", false, None)).failed());
        let running = check_run(job("running", false, None));
        assert!(!running.failed());
        assert_eq!(running.conclusion, None);
    }
}
