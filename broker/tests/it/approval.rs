//! The approver's commands and publication: push to a bare remote, the draft pull request on a
//! mock forge, denial with a reason, expiry.

use crate::harness::*;
use airlock_broker::BrokerReply;
use serde_json::Value;

#[test]
fn approval_commits_on_the_pin_and_pushes_the_branch() {
    let mut fx = Fixture::new();
    fx.start();
    let id = queue_honest(&fx, "run-approve");
    let out = fx.cli(&["approve", &id.to_string()]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let pushed = fx
        .remote_ref(&format!("airlock/CALC-42-{id}"))
        .expect("branch pushed to the remote");
    let reply = fx.client().decision("run-approve").unwrap();
    assert_eq!(
        reply,
        BrokerReply::Approved {
            queue_id: id,
            branch: format!("airlock/CALC-42-{id}"),
            commit: pushed.clone(),
            pr_url: None
        }
    );
    let git_dir = fx.remote.to_str().unwrap().to_owned();
    assert_eq!(
        git(
            fx.dir.path(),
            &["--git-dir", &git_dir, "rev-parse", &format!("{pushed}^")]
        ),
        fx.pin
    );
    assert_eq!(
        git(
            fx.dir.path(),
            &[
                "--git-dir",
                &git_dir,
                "show",
                &format!("{pushed}:calc/ops.py")
            ]
        ),
        FIXED_OPS.trim_end()
    );
    assert_eq!(
        git(
            fx.dir.path(),
            &[
                "--git-dir",
                &git_dir,
                "show",
                &format!("{pushed}:tests/test_clamp_high.py")
            ]
        ),
        NEW_TEST.trim_end()
    );
    let subject = git(
        fx.dir.path(),
        &["--git-dir", &git_dir, "log", "-1", "--format=%s", &pushed],
    );
    assert_eq!(subject, "fix: clamp respects the upper bound");
    // Approving twice is refused; the published item stays as it is.
    let again = fx.cli(&["approve", &id.to_string()]);
    assert_eq!(again.status.code(), Some(1));
    let events: Vec<(String, Value)> = fx.audit_kinds();
    let approval = events
        .iter()
        .find(|(k, _)| k == "approval")
        .expect("approval audited");
    assert_eq!(approval.1["reviewer"], "rev");
    assert!(
        events
            .iter()
            .any(|(k, p)| k == "broker_decision" && p["code"] == "PUBLISHED")
    );
}

#[test]
fn with_a_forge_token_a_draft_pull_request_is_opened_and_the_token_stays_in_the_broker() {
    let forge = MockForge::start();
    let mut fx = Fixture::with(Options {
        forge: Some((forge.base.clone(), "AIRLOCK_IT_FORGE_TOKEN".into())),
        ..Options::default()
    });
    fx.start();
    let id = queue_honest(&fx, "run-pr");
    let out = fx.cli_env(
        &["approve", &id.to_string()],
        &[("AIRLOCK_IT_FORGE_TOKEN", "s3cret-token-value")],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let posts: Vec<SeenRequest> = forge
        .requests()
        .into_iter()
        .filter(|r| r.method == "POST")
        .collect();
    // The draft pull request, then the witness attestation's comment on it.
    assert_eq!(posts.len(), 2);
    assert_eq!(posts[1].path, "/repos/acme/calc/issues/1/comments");
    let post = &posts[0];
    assert_eq!(post.path, "/repos/acme/calc/pulls");
    assert_eq!(
        post.header("authorization"),
        Some("Bearer s3cret-token-value")
    );
    let body: Value = serde_json::from_str(&post.body).unwrap();
    assert_eq!(body["draft"], true);
    assert_eq!(body["head"], format!("airlock/CALC-42-{id}"));
    assert_eq!(body["base"], "main");
    assert_eq!(body["title"], "fix: clamp respects the upper bound");
    assert!(
        body["body"]
            .as_str()
            .unwrap()
            .starts_with("clamp ignored hi.")
    );
    let reply = fx.client().decision("run-pr").unwrap();
    let BrokerReply::Approved { pr_url, .. } = reply else {
        panic!("{reply:?}")
    };
    assert_eq!(
        pr_url.as_deref(),
        Some("https://forge.example/acme/calc/pull/1")
    );
    for file in [&fx.audit, &fx.db] {
        let bytes = std::fs::read(file).unwrap();
        assert!(
            !String::from_utf8_lossy(&bytes).contains("s3cret-token-value"),
            "token leaked into {}",
            file.display()
        );
    }
}

#[test]
fn denial_needs_a_one_line_reason_which_goes_back_to_the_run() {
    let mut fx = Fixture::new();
    fx.start();
    let id = queue_honest(&fx, "run-deny");
    let id = id.to_string();
    assert_eq!(
        fx.cli(&["deny", &id]).status.code(),
        Some(2),
        "--reason is required"
    );
    assert_eq!(
        fx.cli(&["deny", &id, "--reason", "  "]).status.code(),
        Some(1)
    );
    assert_eq!(
        fx.cli(&["deny", &id, "--reason", "two\nlines"])
            .status
            .code(),
        Some(1)
    );
    let out = fx.cli(&[
        "deny",
        &id,
        "--reason",
        "the new test does not cover negative bounds",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let reply = fx.client().decision("run-deny").unwrap();
    let BrokerReply::Refused { error } = reply else {
        panic!("{reply:?}")
    };
    assert_eq!(error.code.as_str(), "APPROVAL_DENIED");
    assert!(!error.retryable);
    assert_eq!(
        error.details["reason"],
        "the new test does not cover negative bounds"
    );
    assert_eq!(
        fx.cli(&["approve", &id]).status.code(),
        Some(1),
        "a denied item cannot be approved"
    );
    assert!(fx.remote_ref(&format!("airlock/CALC-42-{id}")).is_none());
    let denial = fx
        .audit_kinds()
        .into_iter()
        .find(|(k, _)| k == "denial")
        .expect("denial audited");
    assert_eq!(
        denial.1["reason"],
        "the new test does not cover negative bounds"
    );
}

#[test]
fn past_the_queue_age_the_run_gets_approval_timeout_and_the_diff_is_kept() {
    let mut fx = Fixture::with(Options {
        queue_max_age: "0s",
        ..Options::default()
    });
    fx.start();
    let id = queue_honest(&fx, "run-expire");
    let reply = fx.client().decision("run-expire").unwrap();
    let BrokerReply::Refused { error } = reply else {
        panic!("{reply:?}")
    };
    assert_eq!(error.code.as_str(), "APPROVAL_TIMEOUT");
    assert!(error.details["queue_age_seconds"].is_u64());
    let table = String::from_utf8_lossy(&fx.cli(&["queue"]).stdout).into_owned();
    assert!(table.contains("expired"), "{table}");
    let show = String::from_utf8_lossy(&fx.cli(&["show", &id.to_string()]).stdout).into_owned();
    assert!(
        show.contains("+    return max(lo, min(x, hi))"),
        "the diff is retained: {show}"
    );
    assert_eq!(fx.cli(&["approve", &id.to_string()]).status.code(), Some(1));
    assert!(
        fx.audit_kinds()
            .iter()
            .any(|(k, p)| k == "broker_decision" && p["code"] == "APPROVAL_TIMEOUT")
    );
}
