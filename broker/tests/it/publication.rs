//! A publication that fails fails only its item (`publish_failed`, `publish N` retries,
//! `abandon N` ends it) and never keeps `serve` down; one branch per queue item; the forge token
//! checked before anything is pushed; the draft pull request's body carries the evidence.

use crate::harness::*;
use airlock_broker::BrokerReply;
use airlock_broker::store::{Decision, SqliteStore, Store};
use serde_json::Value;

/// Put a commit the broker's commit does not descend from on the remote as `branch`, so the
/// broker's push is refused as non-fast-forward (the remote "rejects" until it is removed).
fn occupy_remote_branch(fx: &Fixture, branch: &str) {
    git(&fx.origin, &["checkout", "-q", "-b", "side"]);
    write(&fx.origin, "side.txt", "someone else's work\n");
    git(&fx.origin, &["add", "side.txt"]);
    git(&fx.origin, &["commit", "-q", "-m", "side"]);
    git(
        &fx.origin,
        &[
            "push",
            "-q",
            fx.remote.to_str().unwrap(),
            &format!("side:refs/heads/{branch}"),
        ],
    );
}

fn free_remote_branch(fx: &Fixture, branch: &str) {
    git(
        fx.dir.path(),
        &[
            "--git-dir",
            fx.remote.to_str().unwrap(),
            "update-ref",
            "-d",
            &format!("refs/heads/{branch}"),
        ],
    );
}

fn stored(fx: &Fixture, id: i64) -> airlock_broker::store::QueueItem {
    SqliteStore::open(&fx.db)
        .unwrap()
        .queue_item(id)
        .unwrap()
        .unwrap()
}

#[test]
fn a_rejected_push_fails_only_its_item_serve_restarts_and_publish_retries_it() {
    let mut fx = Fixture::new();
    fx.start();
    let id = queue_honest(&fx, "run-rejected");
    let branch = format!("airlock/CALC-42-{id}");
    occupy_remote_branch(&fx, &branch);
    let occupied = fx.remote_ref(&branch);

    let out = fx.cli(&["approve", &id.to_string()]);
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("publish_failed"), "{stderr}");
    assert!(stderr.contains(&format!("publish {id}")), "{stderr}");
    let item = stored(&fx, id);
    assert_eq!(item.status.as_str(), "publish_failed");
    let error = item.publish_error.expect("the error is stored");
    assert!(error.contains(&branch), "{error}");
    assert_eq!(
        fx.remote_ref(&branch),
        occupied,
        "the remote kept its branch"
    );
    // The run still waits: a human retries or abandons.
    assert_eq!(
        fx.client().decision("run-rejected").unwrap(),
        BrokerReply::Pending { queue_id: id }
    );
    let table = String::from_utf8_lossy(&fx.cli(&["queue"]).stdout).into_owned();
    assert!(table.contains("publish_failed"), "{table}");
    assert!(
        fx.audit_kinds()
            .iter()
            .any(|(k, p)| k == "broker_decision" && p["code"] == "PUBLISH_FAILED")
    );

    // The broker restarts with the failed item in its queue.
    fx.kill();
    fx.start();

    // Still rejected: the retry fails the same way and leaves the item as it was.
    let again = fx.cli(&["publish", &id.to_string()]);
    assert_eq!(again.status.code(), Some(2));
    assert_eq!(stored(&fx, id).status.as_str(), "publish_failed");

    free_remote_branch(&fx, &branch);
    let out = fx.cli(&["publish", &id.to_string()]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let pushed = fx
        .remote_ref(&branch)
        .expect("pushed once the remote accepts");
    let item = stored(&fx, id);
    assert_eq!(item.status.as_str(), "published");
    assert_eq!(item.publish_error, None);
    assert_eq!(
        fx.client().decision("run-rejected").unwrap(),
        BrokerReply::Approved {
            queue_id: id,
            branch: branch.clone(),
            commit: pushed,
            pr_url: None
        }
    );
    // Publishing a published item again is refused (nothing is pushed twice), as is
    // abandoning it.
    let head = fx.remote_ref(&branch);
    let again = fx.cli(&["publish", &id.to_string()]);
    assert_eq!(again.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&again.stderr).contains("is published already"),
        "{}",
        String::from_utf8_lossy(&again.stderr)
    );
    assert_eq!(fx.remote_ref(&branch), head);
    assert_eq!(
        fx.cli(&["abandon", &id.to_string(), "--reason", "late"])
            .status
            .code(),
        Some(1)
    );
}

#[test]
fn serve_starts_when_resuming_a_publication_fails_and_reports_broken_repositories() {
    let mut fx = Fixture::new();
    fx.start();
    let id = queue_honest(&fx, "run-resume-fails");
    fx.kill();
    // Approved, publication never finished (as after a crash), and the remote now refuses it.
    SqliteStore::open(&fx.db)
        .unwrap()
        .decide(
            id,
            &Decision::Approve {
                by: "rev".to_owned(),
            },
            1,
        )
        .unwrap();
    let branch = format!("airlock/CALC-42-{id}");
    occupy_remote_branch(&fx, &branch);
    fx.start();
    assert_eq!(stored(&fx, id).status.as_str(), "publish_failed");
    assert_eq!(
        fx.client().decision("run-resume-fails").unwrap(),
        BrokerReply::Pending { queue_id: id }
    );
    fx.kill();

    // A clone that no longer opens is reported, and serve still starts.
    let clone = fx.dir.path().join("broker-clone");
    std::fs::rename(&clone, fx.dir.path().join("moved-clone")).unwrap();
    let mut child = std::process::Command::new(BIN)
        .arg("--config")
        .arg(&fx.config)
        .arg("serve")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while std::os::unix::net::UnixStream::connect(&fx.socket).is_err() {
        assert!(
            std::time::Instant::now() < deadline,
            "serve did not start with a broken repository"
        );
        assert!(child.try_wait().unwrap().is_none(), "serve exited");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    child.kill().unwrap();
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("repository \"acme/calc\"") && stderr.contains("broker-clone"),
        "{stderr}"
    );
}

#[test]
fn abandon_ends_a_failed_publication_with_who_and_why() {
    let mut fx = Fixture::new();
    fx.start();
    let id = queue_honest(&fx, "run-abandon");
    let sid = id.to_string();
    // Only a failed publication can be abandoned.
    assert_eq!(
        fx.cli(&["abandon", &sid, "--reason", "x"]).status.code(),
        Some(1)
    );
    occupy_remote_branch(&fx, &format!("airlock/CALC-42-{id}"));
    assert_eq!(fx.cli(&["approve", &sid]).status.code(), Some(2));
    assert_eq!(
        fx.cli(&["abandon", &sid]).status.code(),
        Some(2),
        "--reason is required"
    );
    assert_eq!(
        fx.cli(&["abandon", &sid, "--reason", " "]).status.code(),
        Some(1)
    );
    let out = fx.cli(&["abandon", &sid, "--reason", "the branch is taken upstream"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let item = stored(&fx, id);
    assert_eq!(item.status.as_str(), "abandoned");
    assert_eq!(item.abandoned_by.as_deref(), Some("rev"));
    assert_eq!(
        item.abandon_reason.as_deref(),
        Some("the branch is taken upstream")
    );
    let reply = fx.client().decision("run-abandon").unwrap();
    let BrokerReply::Refused { error } = reply else {
        panic!("{reply:?}")
    };
    assert_eq!(error.code.as_str(), "APPROVAL_DENIED");
    assert!(!error.retryable);
    let reason = error.details["reason"].as_str().unwrap();
    assert!(
        reason.contains("the branch is taken upstream") && reason.contains("rev"),
        "{reason}"
    );
    // Final: neither publish nor abandon again.
    assert_eq!(fx.cli(&["publish", &sid]).status.code(), Some(1));
    assert_eq!(
        fx.cli(&["abandon", &sid, "--reason", "again"])
            .status
            .code(),
        Some(1)
    );
    let denial = fx
        .audit_kinds()
        .into_iter()
        .find(|(k, _)| k == "denial")
        .expect("abandonment audited");
    assert!(
        denial.1["reason"]
            .as_str()
            .unwrap()
            .contains("the branch is taken upstream")
    );
    assert_eq!(denial.1["reviewer"], "rev");
}

#[test]
fn two_runs_on_one_issue_publish_on_two_branches_with_two_pull_requests() {
    let forge = MockForge::start();
    let mut fx = Fixture::with(Options {
        forge: Some((forge.base.clone(), "AIRLOCK_IT_FORGE_TOKEN".into())),
        ..Options::default()
    });
    fx.start();
    let first = queue_honest(&fx, "run-one");
    let second = queue_honest(&fx, "run-two");
    assert_ne!(first, second);
    for id in [first, second] {
        let out = fx.cli_env(
            &["approve", &id.to_string()],
            &[("AIRLOCK_IT_FORGE_TOKEN", "tok")],
        );
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let a = fx
        .remote_ref(&format!("airlock/CALC-42-{first}"))
        .expect("first branch");
    let b = fx
        .remote_ref(&format!("airlock/CALC-42-{second}"))
        .expect("second branch");
    assert_ne!(a, b, "two commits, one per queue item");
    assert!(fx.remote_ref("airlock/CALC-42").is_none());
    let heads: Vec<String> = forge
        .requests()
        .into_iter()
        .filter(|r| r.method == "POST" && r.path.ends_with("/pulls"))
        .map(|r| {
            serde_json::from_str::<Value>(&r.body).unwrap()["head"]
                .as_str()
                .unwrap()
                .to_owned()
        })
        .collect();
    assert_eq!(
        heads,
        vec![
            format!("airlock/CALC-42-{first}"),
            format!("airlock/CALC-42-{second}")
        ]
    );
    let BrokerReply::Approved { pr_url, .. } = fx.client().decision("run-two").unwrap() else {
        panic!()
    };
    assert_eq!(
        pr_url.as_deref(),
        Some("https://forge.example/acme/calc/pull/2")
    );
}

#[test]
fn approval_without_the_configured_token_refuses_before_pushing_and_names_the_variable() {
    let forge = MockForge::start();
    let mut fx = Fixture::with(Options {
        forge: Some((forge.base.clone(), "AIRLOCK_IT_MISSING_TOKEN".into())),
        ..Options::default()
    });
    fx.start();
    let id = queue_honest(&fx, "run-no-token");
    for env in [vec![], vec![("AIRLOCK_IT_MISSING_TOKEN", "")]] {
        let mut cmd = std::process::Command::new(BIN);
        cmd.arg("--config")
            .arg(&fx.config)
            .args(["approve", &id.to_string()])
            .env("AIRLOCK_REVIEWER", "rev")
            .env_remove("AIRLOCK_IT_MISSING_TOKEN");
        for (k, v) in &env {
            cmd.env(k, v);
        }
        let out = cmd.output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        assert_eq!(out.status.code(), Some(1), "{stderr}");
        assert!(stderr.contains("AIRLOCK_IT_MISSING_TOKEN"), "{stderr}");
        assert_eq!(stored(&fx, id).status.as_str(), "queued");
        assert!(fx.remote_ref(&format!("airlock/CALC-42-{id}")).is_none());
        assert!(forge.requests().is_empty());
    }
    assert!(
        !fx.audit_kinds().iter().any(|(k, _)| k == "approval"),
        "nothing was approved"
    );
    // With the token, the same item is approved and published.
    let out = fx.cli_env(
        &["approve", &id.to_string()],
        &[("AIRLOCK_IT_MISSING_TOKEN", "tok")],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(fx.remote_ref(&format!("airlock/CALC-42-{id}")).is_some());
}

#[test]
fn the_draft_pull_request_body_carries_the_evidence_and_the_audit_run_id() {
    let forge = MockForge::start();
    let mut fx = Fixture::with(Options {
        forge: Some((forge.base.clone(), "AIRLOCK_IT_FORGE_TOKEN".into())),
        ..Options::default()
    });
    fx.start();
    let id = queue_honest(&fx, "run-body");
    let out = fx.cli_env(
        &["approve", &id.to_string()],
        &[("AIRLOCK_IT_FORGE_TOKEN", "tok-body-secret")],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let post = forge
        .requests()
        .into_iter()
        .find(|r| r.method == "POST")
        .expect("a pull request");
    let body: Value = serde_json::from_str(&post.body).unwrap();
    let text = body["body"].as_str().unwrap();
    assert!(text.starts_with("clamp ignored hi."), "{text}");
    for needle in [
        &format!("Fail-to-pass test: `{NEW_TEST_NAME}`"),
        "Witness `pinned_selected`",
        "Witness `patched_full`",
        "Base inventory: ",
        "Detector flags",
        "audit run id `run-body`",
    ] {
        assert!(text.contains(needle), "{needle:?} missing from:\n{text}");
    }
    // CALC-42 maps to no GitHub issue number: no `Closes`.
    assert!(!text.contains("Closes #"), "{text}");
    assert!(!text.contains("tok-body-secret"));
}
