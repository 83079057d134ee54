//! Publication over a real smart-HTTP git server on loopback (`git http-backend` behind Basic
//! authentication) and the mock GitHub API: the token is the push credential, a wrong one is
//! an error naming its variable, a refused push fails only its item, and a broker killed during
//! publication pushes and opens its pull request exactly once.

use std::time::{Duration, Instant};

use crate::harness::*;
use airlock_broker::BrokerReply;
use airlock_broker::store::{SqliteStore, Store};
use airlock_testkit::githttp::GitHttpServer;

const VAR: &str = "AIRLOCK_IT_HTTP_TOKEN";
const TOKEN: &str = "tok-http-7f3a9c";

/// A fixture whose remote is `remote.git` served over HTTP, and the forge mock.
fn http_fixture() -> (Fixture, GitHttpServer, MockForge) {
    let forge = MockForge::start();
    let fx = Fixture::with(Options {
        forge: Some((forge.base.clone(), VAR.into())),
        ..Options::default()
    });
    let server = GitHttpServer::start(fx.dir.path(), "x-access-token", TOKEN);
    fx.use_remote(&server.url("remote.git"));
    (fx, server, forge)
}

fn stored(fx: &Fixture, id: i64) -> airlock_broker::store::QueueItem {
    SqliteStore::open(&fx.db)
        .unwrap()
        .queue_item(id)
        .unwrap()
        .unwrap()
}

/// Nothing the broker wrote holds the token: not the audit log, not the state database.
fn assert_token_nowhere(fx: &Fixture, token: &str) {
    let audit = std::fs::read(&fx.audit).unwrap_or_default();
    assert!(
        !String::from_utf8_lossy(&audit).contains(token),
        "the token is in the audit log"
    );
    for entry in std::fs::read_dir(fx.db.parent().unwrap()).unwrap() {
        let bytes = std::fs::read(entry.unwrap().path()).unwrap_or_default();
        assert!(
            !String::from_utf8_lossy(&bytes).contains(token),
            "the token is in the state database"
        );
    }
}

#[test]
fn approve_pushes_over_https_with_the_token_and_opens_a_draft_pr_that_closes_the_issue() {
    let (mut fx, server, forge) = http_fixture();
    fx.start();
    let first = queue_honest_numbered(&fx, "run-http-1", 42);
    let out = fx.cli_env(&["approve", &first.to_string()], &[(VAR, TOKEN)]);
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    );
    assert!(out.status.success(), "{stderr}");
    let branch = format!("airlock/CALC-42-{first}");
    let pushed = fx.remote_ref(&branch).expect("pushed over HTTP");
    assert!(
        stdout.contains(&branch) && stdout.contains(&pushed),
        "{stdout}"
    );
    assert_eq!(server.receive_pack_posts(), 1);
    assert!(
        server
            .requests()
            .iter()
            .any(|r| !r.authorized && r.status == 401),
        "git was asked for credentials"
    );
    let pulls = forge.created_pulls();
    assert_eq!(pulls.len(), 1);
    assert_eq!(pulls[0]["draft"], true);
    assert_eq!(pulls[0]["head"], branch.as_str());
    let body = pulls[0]["body"].as_str().unwrap();
    assert!(body.contains("\nCloses #42\n"), "{body}");
    assert!(body.contains("audit run id `run-http-1`"), "{body}");
    assert_eq!(
        fx.client().decision("run-http-1").unwrap(),
        BrokerReply::Approved {
            queue_id: first,
            branch: branch.clone(),
            commit: pushed.clone(),
            pr_url: Some("https://forge.example/acme/calc/pull/1".into())
        }
    );

    // A second run on the same issue gets its own branch and pull request.
    let second = queue_honest_numbered(&fx, "run-http-2", 42);
    let out = fx.cli_env(&["approve", &second.to_string()], &[(VAR, TOKEN)]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let other = fx
        .remote_ref(&format!("airlock/CALC-42-{second}"))
        .expect("second branch");
    assert_ne!(other, pushed);
    assert_eq!(fx.remote_ref(&branch).as_deref(), Some(pushed.as_str()));
    assert_eq!(server.receive_pack_posts(), 2);
    let heads: Vec<_> = forge
        .created_pulls()
        .iter()
        .map(|p| p["head"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(heads, [branch, format!("airlock/CALC-42-{second}")]);
    assert!(!stdout.contains(TOKEN) && !stderr.contains(TOKEN));
    assert_token_nowhere(&fx, TOKEN);
}

#[test]
fn a_wrong_token_is_an_error_naming_its_variable_and_leaves_the_item_publish_failed() {
    let (mut fx, server, forge) = http_fixture();
    fx.start();
    let id = queue_honest_numbered(&fx, "run-http-wrong", 7);
    let wrong = "tok-wrong-51d0e2";
    let out = fx.cli_env(&["approve", &id.to_string()], &[(VAR, wrong)]);
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains(VAR), "the variable is named: {stderr}");
    assert!(stderr.contains("refused the credentials"), "{stderr}");
    assert!(stderr.contains("publish_failed"), "{stderr}");
    assert!(!stderr.contains(wrong) && !stdout.contains(wrong));
    let item = stored(&fx, id);
    assert_eq!(item.status.as_str(), "publish_failed");
    let error = item.publish_error.unwrap();
    assert!(error.contains(VAR) && !error.contains(wrong), "{error}");
    assert!(fx.remote_ref(&format!("airlock/CALC-42-{id}")).is_none());
    assert_eq!(server.receive_pack_posts(), 0);
    assert!(
        forge.created_pulls().is_empty(),
        "no pull request without a push"
    );
    assert_token_nowhere(&fx, wrong);

    // With the right token, `publish N` finishes it.
    let out = fx.cli_env(&["publish", &id.to_string()], &[(VAR, TOKEN)]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(stored(&fx, id).status.as_str(), "published");
    assert!(fx.remote_ref(&format!("airlock/CALC-42-{id}")).is_some());
    assert_eq!(forge.created_pulls().len(), 1);
    assert_token_nowhere(&fx, TOKEN);
}

#[test]
fn a_push_the_server_rejects_fails_its_item_serve_restarts_and_publish_succeeds_later() {
    let (mut fx, server, forge) = http_fixture();
    fx.start_with_env(&[(VAR, TOKEN)]);
    let id = queue_honest(&fx, "run-http-rejected");
    server.reject_pushes("remote.git", true);
    let out = fx.cli_env(&["approve", &id.to_string()], &[(VAR, TOKEN)]);
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("publish_failed"), "{stderr}");
    let item = stored(&fx, id);
    assert_eq!(item.status.as_str(), "publish_failed");
    let error = item.publish_error.unwrap();
    assert!(
        error.contains("pre-receive hook declined") || error.contains("pushes are closed"),
        "{error}"
    );
    assert!(fx.remote_ref(&format!("airlock/CALC-42-{id}")).is_none());
    assert!(forge.created_pulls().is_empty());

    // The broker restarts with the failed item, and the run still waits.
    fx.kill();
    fx.start_with_env(&[(VAR, TOKEN)]);
    assert_eq!(
        fx.client().decision("run-http-rejected").unwrap(),
        BrokerReply::Pending { queue_id: id }
    );
    assert_eq!(
        fx.cli_env(&["publish", &id.to_string()], &[(VAR, TOKEN)])
            .status
            .code(),
        Some(2),
        "still rejected"
    );

    server.reject_pushes("remote.git", false);
    let out = fx.cli_env(&["publish", &id.to_string()], &[(VAR, TOKEN)]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let pushed = fx
        .remote_ref(&format!("airlock/CALC-42-{id}"))
        .expect("pushed once the server accepts");
    assert_eq!(stored(&fx, id).status.as_str(), "published");
    assert_eq!(forge.created_pulls().len(), 1);
    let BrokerReply::Approved { commit, .. } = fx.client().decision("run-http-rejected").unwrap()
    else {
        panic!("not approved")
    };
    assert_eq!(commit, pushed);
}

#[test]
fn kill_9_during_publication_over_https_then_restart_pushes_once_and_opens_one_pr() {
    let (mut fx, server, forge) = http_fixture();
    fx.start();
    let id = queue_honest_numbered(&fx, "run-http-crash", 9);
    forge
        .stall_posts
        .store(true, std::sync::atomic::Ordering::SeqCst);
    let mut approve = std::process::Command::new(BIN)
        .arg("--config")
        .arg(&fx.config)
        .args(["approve", &id.to_string()])
        .env("AIRLOCK_REVIEWER", "rev")
        .env(VAR, TOKEN)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(120);
    while forge.created_pulls().is_empty() {
        assert!(Instant::now() < deadline, "no pull request request");
        std::thread::sleep(Duration::from_millis(10));
    }
    approve.kill().unwrap(); // SIGKILL
    approve.wait().unwrap();
    fx.kill();
    let branch = format!("airlock/CALC-42-{id}");
    let pushed = fx.remote_ref(&branch).expect("pushed before the kill");
    assert_eq!(stored(&fx, id).status.as_str(), "approved");
    assert_eq!(server.receive_pack_posts(), 1);

    forge
        .stall_posts
        .store(false, std::sync::atomic::Ordering::SeqCst);
    // `serve` resumes the publication at start, with the token in its environment.
    fx.start_with_env(&[(VAR, TOKEN)]);
    assert_eq!(
        fx.client().decision("run-http-crash").unwrap(),
        BrokerReply::Approved {
            queue_id: id,
            branch: branch.clone(),
            commit: pushed.clone(),
            pr_url: Some("https://forge.example/acme/calc/pull/1".into())
        }
    );
    assert_eq!(
        server.receive_pack_posts(),
        1,
        "the same commit again is no second push"
    );
    assert_eq!(forge.created_pulls().len(), 1, "no second pull request");
    let refs = git(
        fx.dir.path(),
        &[
            "--git-dir",
            fx.remote.to_str().unwrap(),
            "for-each-ref",
            "--format=%(refname)",
            "refs/heads/airlock/",
        ],
    );
    assert_eq!(refs, format!("refs/heads/{branch}"), "one branch");
    assert_token_nowhere(&fx, TOKEN);
}
