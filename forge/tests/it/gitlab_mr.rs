//! [`GitLab`]'s merge-request and pipeline reads against `airlock_testkit::mockgitlab`: the
//! refs a follow-up starts from, notes on a merge request, and failed jobs with their logs.

use airlock_forge::gitlab::{GitLab, MAX_TRACE_BYTES, ProjectId};
use airlock_forge::{Error, TokenSource};
use airlock_testkit::mockgitlab::MockGitLab;
use serde_json::json;

const TOKEN: &str = "glpat-mr-token-456";

struct Fixed;

impl TokenSource for Fixed {
    fn token(&self) -> airlock_forge::Result<Option<String>> {
        Ok(Some(TOKEN.to_owned()))
    }
    fn describe(&self) -> String {
        "GITLAB_TOKEN".to_owned()
    }
}

fn client(mock: &MockGitLab) -> GitLab {
    GitLab::new(
        &mock.api_url,
        ProjectId::parse("plat/app").unwrap(),
        Box::new(Fixed),
    )
    .unwrap()
}

#[test]
fn a_merge_requests_refs_come_from_its_diff_refs_and_their_absence_says_try_again() {
    let mock = MockGitLab::start();
    mock.require_token(TOKEN);
    mock.route(
        "/projects/plat%2Fapp/merge_requests/3",
        200,
        json!({"iid": 3, "title": "Draft: fix", "source_branch": "airlock/APP-7-1",
               "target_branch": "main", "state": "opened",
               "diff_refs": {"base_sha": "b".repeat(40), "start_sha": "s".repeat(40),
                             "head_sha": "h".repeat(40)}}),
    );
    mock.route(
        "/projects/plat%2Fapp/merge_requests/4",
        200,
        json!({"iid": 4, "title": "new", "source_branch": "x", "target_branch": "main",
               "state": "opened", "diff_refs": null}),
    );
    let gl = client(&mock);
    let refs = gl.merge_request(3).unwrap();
    assert_eq!(refs.number, 3);
    assert_eq!(refs.base_sha, "b".repeat(40));
    assert_eq!(refs.head_sha, "h".repeat(40));
    assert_eq!(refs.target_branch, "main");
    assert_eq!(refs.source_branch, "airlock/APP-7-1");
    let err = gl.merge_request(4).unwrap_err();
    assert!(matches!(err, Error::Shape { .. }), "{err}");
    assert!(err.to_string().contains("try again"), "{err}");
    let err = gl.merge_request(5).unwrap_err();
    assert!(matches!(err, Error::Status { status: 404, .. }), "{err}");
}

#[test]
fn a_note_on_a_merge_request_goes_to_its_notes_not_an_issues() {
    let mock = MockGitLab::start();
    let comment = client(&mock)
        .comment_on_merge_request(2, "CI failed")
        .unwrap();
    assert_eq!(comment.body, "CI failed");
    assert_eq!(
        mock.posted_notes(),
        [(
            "/api/v4/projects/plat%2Fapp/merge_requests/2/notes".to_owned(),
            "CI failed".to_owned()
        )]
    );
    let long = "x".repeat(airlock_forge::gitlab::MAX_TEXT_CHARS + 1);
    let err = client(&mock)
        .comment_on_merge_request(2, &long)
        .unwrap_err();
    assert!(matches!(err, Error::TooLong { .. }), "{err}");
    assert_eq!(
        mock.posted_notes().len(),
        1,
        "a note too long is never sent"
    );
}

#[test]
fn a_pipelines_failed_jobs_are_listed_with_their_commit_and_a_log_keeps_its_tail() {
    let mock = MockGitLab::start();
    mock.route_page(
        "/projects/plat%2Fapp/pipelines/90/jobs?scope%5B%5D=failed&per_page=100&page=1",
        json!([
            {"id": 901, "name": "test", "stage": "test", "status": "failed",
             "allow_failure": false, "failure_reason": "script_failure",
             "commit": {"id": "c".repeat(40)}, "pipeline": {"id": 90, "sha": "c".repeat(40)}},
            {"id": 902, "name": "lint", "stage": "test", "status": "failed",
             "allow_failure": true, "pipeline": {"id": 90, "sha": "c".repeat(40)}}
        ]),
        None,
    );
    mock.route_page(
        &format!(
            "/projects/plat%2Fapp/pipelines?sha={}&per_page=100&page=1",
            "c".repeat(40)
        ),
        json!([{"id": 90, "sha": "c".repeat(40)}]),
        None,
    );
    let mut log = "setup\n".repeat(MAX_TRACE_BYTES / 6 + 10);
    log.push_str("AssertionError: 4 != 3\n");
    mock.route_text("/projects/plat%2Fapp/jobs/901/trace", 200, &log);
    mock.route(
        "/projects/plat%2Fapp/jobs/901",
        200,
        json!({"id": 901, "name": "test", "status": "failed", "commit": {"id": "c".repeat(40)},
               "pipeline": {"id": 90}}),
    );
    let gl = client(&mock);
    let jobs = gl.failed_jobs(90).unwrap();
    assert_eq!(jobs.len(), 2);
    assert_eq!(jobs[0].sha, "c".repeat(40));
    assert!(
        jobs[0].failed() && !jobs[1].failed(),
        "an allowed failure fails nothing"
    );
    assert_eq!(
        jobs[1].sha,
        "c".repeat(40),
        "the pipeline's sha when no commit"
    );
    assert_eq!(gl.pipelines_of(&"c".repeat(40)).unwrap(), [90]);
    let job = gl.job(901).unwrap();
    assert_eq!((job.name.as_str(), job.pipeline_id), ("test", Some(90)));
    let trace = gl.job_trace(901).unwrap();
    assert_eq!(trace.total_bytes, log.len() as u64);
    assert!(trace.text.len() <= MAX_TRACE_BYTES);
    assert!(trace.text.ends_with("AssertionError: 4 != 3\n"));
}
