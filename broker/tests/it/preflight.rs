//! What a person is told before and after a run: `preflight` (the check a run makes before it
//! pins) names the issue's open items and whether the repository is configured; approving
//! without a forge token says it pushes only, on the page and in the CLI; `publish` on a
//! published item is refused; a `clone` that does not exist is named with the fix.

use airlock_broker::BrokerReply;
use airlock_protocol::{OpenItem, Preflight, Request};
use axum::http::StatusCode;

use crate::harness::{Fixture, queue_honest};
use crate::ui::Page;

fn preflight(fx: &Fixture, repository: &str) -> BrokerReply {
    fx.client()
        .request(&Request::Preflight(Preflight {
            repository: repository.to_owned(),
            issue_id: "CALC-42".to_owned(),
        }))
        .unwrap()
}

#[test]
fn preflight_names_the_issues_open_items_and_whether_the_repository_is_configured() {
    let mut fx = Fixture::new();
    fx.start();
    assert_eq!(
        preflight(&fx, "acme/calc"),
        BrokerReply::Preflight {
            repository_known: true,
            open_items: Vec::new()
        }
    );
    let id = queue_honest(&fx, "run-pre-1");
    assert_eq!(
        preflight(&fx, "acme/calc"),
        BrokerReply::Preflight {
            repository_known: true,
            open_items: vec![OpenItem {
                queue_id: id,
                run_id: "run-pre-1".to_owned(),
                status: "queued".to_owned(),
            }]
        }
    );
    assert_eq!(
        preflight(&fx, "acme/other"),
        BrokerReply::Preflight {
            repository_known: false,
            open_items: Vec::new()
        }
    );
    // Published, the item is open no more.
    let out = fx.cli(&["approve", &id.to_string()]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        preflight(&fx, "acme/calc"),
        BrokerReply::Preflight {
            repository_known: true,
            open_items: Vec::new()
        }
    );
}

#[test]
fn without_a_forge_token_approval_promises_and_claims_no_pull_request_and_publish_again_is_refused()
{
    let mut fx = Fixture::new();
    fx.start();
    let by_page = queue_honest(&fx, "run-pre-page");
    let by_cli = queue_honest(&fx, "run-pre-cli");
    let page = Page::new(&fx);
    let (cookie, csrf) = page.login();
    let item = page.get(&format!("/items/{by_page}"), Some(&cookie)).body;
    assert!(
        item.contains("Approve: push the branch (no pull request: no forge token configured)"),
        "{item}"
    );
    assert!(!item.contains("open the draft pull request"), "{item}");
    let reply = page.post(
        &format!("/items/{by_page}/approve"),
        Some(&cookie),
        &[("csrf", &csrf)],
    );
    assert_eq!(reply.status, StatusCode::SEE_OTHER, "{}", reply.body);
    let shown = page
        .get(&format!("/items/{by_page}?done=pushed"), Some(&cookie))
        .body;
    assert!(
        shown.contains("Approved: pushed; no pull request: no forge token configured."),
        "{shown}"
    );
    assert!(
        shown.contains("none: pushed; no pull request: no forge token configured"),
        "{shown}"
    );

    let approve = fx.cli(&["approve", &by_cli.to_string()]);
    let stdout = String::from_utf8_lossy(&approve.stdout);
    assert!(
        approve.status.success(),
        "{}",
        String::from_utf8_lossy(&approve.stderr)
    );
    assert!(
        stdout.contains("; no pull request: no forge token configured"),
        "{stdout}"
    );
    let show = fx.cli(&["show", &by_cli.to_string()]);
    let shown = String::from_utf8_lossy(&show.stdout);
    assert!(
        shown.contains("pr:         none: pushed; no pull request: no forge token configured"),
        "{shown}"
    );
    let json: serde_json::Value =
        serde_json::from_slice(&fx.cli(&["show", &by_cli.to_string(), "--json"]).stdout).unwrap();
    assert_eq!(json["status"], "published");
    assert_eq!(json["pr_url"], serde_json::Value::Null);
    assert_eq!(json["opens_pull_request"], false);

    // Publishing it again is refused like the broker's other refusals, and pushes nothing.
    let branch = format!("airlock/CALC-42-{by_cli}");
    let pushed = fx.remote_ref(&branch).expect("pushed");
    let again = fx.cli(&["publish", &by_cli.to_string()]);
    let stderr = String::from_utf8_lossy(&again.stderr);
    assert_eq!(again.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "queue item {by_cli} is published already (pushed {branch} at"
        )),
        "{stderr}"
    );
    assert!(stderr.contains("nothing to publish again"), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert_eq!(fx.remote_ref(&branch), Some(pushed));
}

#[test]
fn a_clone_that_does_not_exist_is_named_with_the_fix_not_a_libgit2_code() {
    let mut fx = Fixture::new();
    let text = std::fs::read_to_string(&fx.config).unwrap();
    let clone = fx.dir.path().join("broker-clone");
    let missing = fx.dir.path().join("no-such-clone");
    std::fs::write(
        &fx.config,
        text.replace(
            &format!("clone = \"{}\"", clone.display()),
            &format!("clone = \"{}\"", missing.display()),
        ),
    )
    .unwrap();
    fx.start();
    let wt = fx.worktree("run-no-clone");
    let reply = fx
        .client()
        .register_run(&fx.registration("run-no-clone", &wt))
        .unwrap();
    let BrokerReply::Failed { message } = reply else {
        panic!("{reply:?}")
    };
    assert!(
        message.contains(&format!(
            "the broker's clone {} does not exist: create it with `git clone REMOTE {}`",
            missing.display(),
            missing.display()
        )),
        "{message}"
    );
    assert!(
        message.contains("or fix `clone` in broker.toml"),
        "{message}"
    );
    assert!(!message.contains("class=Os"), "{message}");
    assert!(!message.contains("code=NotFound"), "{message}");
}
