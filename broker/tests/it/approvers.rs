//! Named approvers through the real `airlock-broker` binary: `approver add|list|remove`, who a
//! decision is recorded as (`--by`, `$USER`, refused when neither names anyone and when the name
//! is not a registered approver), a risky item's `--confirm-risk` and `--reason`, and the senior
//! route's two approvals.

use std::process::{Command, Output};

use crate::harness::*;
use crate::ui::INJECTED_LINE;
use airlock_broker::BrokerReply;
use serde_json::{Value, json};

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn show_json(fx: &Fixture, id: i64) -> Value {
    serde_json::from_slice(&fx.cli(&["show", &id.to_string(), "--json"]).stdout).unwrap()
}

/// The CLI with no name in the environment at all (no `$USER`, no `$AIRLOCK_REVIEWER`).
fn cli_nameless(fx: &Fixture, args: &[&str]) -> Output {
    Command::new(BIN)
        .arg("--config")
        .arg(&fx.config)
        .args(args)
        .env_remove("USER")
        .env_remove("AIRLOCK_REVIEWER")
        .output()
        .unwrap()
}

/// `approver add`; the token it printed.
fn add_approver(fx: &Fixture, name: &str, senior: bool) -> String {
    let mut args = vec!["approver", "add", name];
    if senior {
        args.push("--senior");
    }
    let out = fx.cli(&args);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    let token = text.lines().last().unwrap().trim().to_owned();
    assert_eq!(token.len(), 64, "{text}");
    assert!(token.chars().all(|c| c.is_ascii_hexdigit()), "{text}");
    token
}

/// Queue the honest fix plus a file whose added line the broker's screening flags.
fn queue_flagged(fx: &Fixture, run_id: &str) -> i64 {
    let wt = fx.register(run_id);
    apply_fix(&wt);
    write(&wt, "calc/notes.py", format!("{INJECTED_LINE}\n"));
    match fx.client().open_pr(run_id, honest_args(fx, &wt)).unwrap() {
        BrokerReply::Queued { queue_id } => queue_id,
        other => panic!("expected queued, got {other:?}"),
    }
}

/// Queue the honest fix declaring a `test_change_reason`: the senior route.
pub fn queue_senior(fx: &Fixture, run_id: &str) -> i64 {
    let wt = fx.register(run_id);
    apply_fix(&wt);
    let mut args = honest_args(fx, &wt);
    args["test_change_reason"] = json!("existing-test-asserts-the-buggy-behaviour");
    match fx.client().open_pr(run_id, args).unwrap() {
        BrokerReply::Queued { queue_id } => queue_id,
        other => panic!("expected queued, got {other:?}"),
    }
}

fn approvals_recorded(fx: &Fixture) -> Vec<Value> {
    fx.audit_kinds()
        .into_iter()
        .filter(|(kind, _)| kind == "approval")
        .map(|(_, payload)| payload)
        .collect()
}

#[test]
fn an_approver_token_is_printed_once_stored_hashed_and_never_listed() {
    let mut fx = Fixture::new();
    fx.start();
    let empty = fx.cli(&["approver", "list"]);
    assert!(empty.status.success(), "{}", stderr(&empty));
    assert!(
        stdout(&empty).contains("approver add NAME"),
        "{}",
        stdout(&empty)
    );

    let token = add_approver(&fx, "alice", true);
    let bob = add_approver(&fx, "bob", false);
    assert_ne!(token, bob);
    let list = fx.cli(&["approver", "list"]);
    let text = stdout(&list);
    assert!(text.contains("alice\tsenior"), "{text}");
    assert!(text.contains("bob\t-"), "{text}");
    assert!(!text.contains(&token) && !text.contains(&bob), "{text}");
    let json: Value =
        serde_json::from_slice(&fx.cli(&["approver", "list", "--json"]).stdout).unwrap();
    assert_eq!(json[0]["name"], "alice");
    assert_eq!(json[0]["senior"], true);
    assert!(!json.to_string().contains(&token), "{json}");
    // The database keeps the token's hash, never the token.
    let mut bytes = Vec::new();
    for entry in std::fs::read_dir(fx.db.parent().unwrap()).unwrap() {
        bytes.extend(std::fs::read(entry.unwrap().path()).unwrap_or_default());
    }
    let db = String::from_utf8_lossy(&bytes);
    assert!(!db.contains(&token), "the token is stored in the clear");
    assert!(db.contains(&airlock_broker::approver::token_sha256(&token)));

    // A name is taken once; a name a terminal would have to escape is refused.
    let again = fx.cli(&["approver", "add", "alice"]);
    assert_eq!(again.status.code(), Some(1), "{}", stderr(&again));
    assert!(
        stderr(&again).contains("already exists"),
        "{}",
        stderr(&again)
    );
    let hidden = fx.cli(&["approver", "add", "eve\u{1b}[2K\u{202e}"]);
    assert_eq!(hidden.status.code(), Some(1), "{}", stderr(&hidden));
    assert!(
        stderr(&hidden).contains("\\u{1b}") && !stderr(&hidden).contains('\u{1b}'),
        "{}",
        stderr(&hidden)
    );

    let removed = fx.cli(&["approver", "remove", "bob"]);
    assert!(removed.status.success(), "{}", stderr(&removed));
    assert!(!stdout(&fx.cli(&["approver", "list"])).contains("bob"));
    let unknown = fx.cli(&["approver", "remove", "bob"]);
    assert_eq!(unknown.status.code(), Some(1), "{}", stderr(&unknown));

    // Every change to the list is in the audit log, never a token or its hash.
    let changes: Vec<(String, Value)> = fx
        .audit_kinds()
        .into_iter()
        .filter(|(kind, _)| kind == "approver_changed")
        .collect();
    let summary: Vec<(String, String, bool)> = changes
        .iter()
        .map(|(_, p)| {
            (
                p["name"].as_str().unwrap().to_owned(),
                p["change"].as_str().unwrap().to_owned(),
                p["senior"].as_bool().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        summary,
        vec![
            ("alice".to_owned(), "added".to_owned(), true),
            ("bob".to_owned(), "added".to_owned(), false),
            ("bob".to_owned(), "removed".to_owned(), false),
        ]
    );
    let log = std::fs::read_to_string(&fx.audit).unwrap();
    assert!(
        !log.contains(&token) && !log.contains(&bob),
        "a token reached the audit log"
    );
    assert!(!log.contains(&airlock_broker::approver::token_sha256(&token)));
}

#[test]
fn a_flagged_item_is_approved_only_with_confirm_risk_and_a_reason_as_the_by_name() {
    let mut fx = Fixture::new();
    fx.start();
    let id = queue_flagged(&fx, "run-flagged");
    let sid = id.to_string();
    let view = show_json(&fx, id);
    assert!(view["risk"]["findings"].as_u64().unwrap() > 0, "{view}");

    // No confirmation: refused, naming what is missing and the risk; nothing recorded.
    let out = fx.cli(&["approve", &sid, "--reason", "read every finding"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(err.contains("--confirm-risk"), "{err}");
    assert!(err.contains("finding"), "{err}");
    assert!(err.contains("nothing was recorded"), "{err}");
    // Confirmed, but no reason (or an empty one): refused the same way.
    for args in [
        vec!["approve", &sid, "--confirm-risk"],
        vec!["approve", &sid, "--confirm-risk", "--reason", "  "],
    ] {
        let out = fx.cli(&args);
        assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
        assert!(stderr(&out).contains("--reason"), "{}", stderr(&out));
    }
    assert_eq!(show_json(&fx, id)["status"], "queued");
    assert!(
        show_json(&fx, id)["approvals"]
            .as_array()
            .unwrap()
            .is_empty()
    );
    assert!(approvals_recorded(&fx).is_empty());
    assert!(fx.remote_ref(&format!("airlock/CALC-42-{id}")).is_none());

    let out = fx.cli(&[
        "approve",
        &sid,
        "--confirm-risk",
        "--reason",
        "the note is a comment, not code",
        "--by",
        "carol",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let view = show_json(&fx, id);
    assert_eq!(view["status"], "published");
    assert_eq!(view["decided_by"], "carol");
    assert_eq!(view["approvals"][0]["approver"], "carol");
    assert_eq!(
        approvals_recorded(&fx),
        [json!({"reviewer": "carol", "reason": "the note is a comment, not code"})]
    );
    assert!(fx.remote_ref(&format!("airlock/CALC-42-{id}")).is_some());
}

#[test]
fn without_by_or_user_a_decision_is_refused_with_exit_2_naming_both() {
    let mut fx = Fixture::new();
    fx.start();
    let id = queue_honest(&fx, "run-nameless").to_string();
    for args in [
        vec!["approve", &id],
        vec!["deny", &id, "--reason", "no"],
        vec!["request-changes", &id, "--feedback", "more tests"],
    ] {
        let out = cli_nameless(&fx, &args);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr(&out));
        let err = stderr(&out);
        assert!(err.contains("--by") && err.contains("$USER"), "{err}");
    }
    assert_eq!(show_json(&fx, id.parse().unwrap())["status"], "queued");
    assert!(approvals_recorded(&fx).is_empty());
    // `$USER` alone names the approver.
    let out = Command::new(BIN)
        .arg("--config")
        .arg(&fx.config)
        .args(["approve", &id])
        .env_remove("AIRLOCK_REVIEWER")
        .env("USER", "dora")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(show_json(&fx, id.parse().unwrap())["decided_by"], "dora");
}

#[test]
fn once_approvers_exist_only_a_registered_name_decides() {
    let mut fx = Fixture::new();
    fx.start();
    let id = queue_honest(&fx, "run-registered");
    let sid = id.to_string();
    add_approver(&fx, "alice", false);
    // Unknown through --by, and through the environment (the fixture's `rev`).
    for out in [
        fx.cli(&["approve", &sid, "--by", "mallory"]),
        fx.cli(&["deny", &sid, "--reason", "no", "--by", "mallory"]),
        fx.cli(&["approve", &sid]),
    ] {
        assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
        let err = stderr(&out);
        assert!(
            (err.contains("\"mallory\"") || err.contains("\"rev\""))
                && err.contains("approver list"),
            "{err}"
        );
    }
    assert_eq!(show_json(&fx, id)["status"], "queued");
    assert!(approvals_recorded(&fx).is_empty());
    let out = fx.cli(&["approve", &sid, "--by", "alice"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(show_json(&fx, id)["decided_by"], "alice");
}

#[test]
fn a_senior_route_item_is_published_only_after_a_second_approver_one_of_them_senior() {
    let mut fx = Fixture::new();
    fx.start();
    let id = queue_senior(&fx, "run-senior");
    let sid = id.to_string();
    let branch = format!("airlock/CALC-42-{id}");
    let approve = |by: &str| {
        fx.cli(&[
            "approve",
            &sid,
            "--confirm-risk",
            "--reason",
            "the old test asserted the bug",
            "--by",
            by,
        ])
    };
    // No approver registered: a senior route cannot be approved at all.
    let out = approve("bob");
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("approver add NAME --senior"),
        "{}",
        stderr(&out)
    );
    assert!(approvals_recorded(&fx).is_empty());

    add_approver(&fx, "bob", false);
    add_approver(&fx, "alice", true);
    let first = approve("bob");
    assert!(first.status.success(), "{}", stderr(&first));
    assert!(
        stdout(&first).contains("1 of 2 approvals; needs another approver, one of them senior"),
        "{}",
        stdout(&first)
    );
    let view = show_json(&fx, id);
    assert_eq!(view["status"], "queued");
    assert_eq!(view["approvals"][0]["approver"], "bob");
    assert!(
        fx.remote_ref(&branch).is_none(),
        "published after one approval"
    );
    let shown = stdout(&fx.cli(&["show", &sid, "--color", "never"]));
    let approvals_line = shown.lines().position(|l| {
        l.starts_with("approvals:") && l.contains("1 of 2 approvals") && l.contains("bob")
    });
    assert!(approvals_line.is_some_and(|n| n < 10), "{shown}");

    // The same approver again: refused, nothing more recorded.
    let again = approve("bob");
    assert_eq!(again.status.code(), Some(1), "{}", stderr(&again));
    assert!(
        stderr(&again).contains("already approved"),
        "{}",
        stderr(&again)
    );
    assert_eq!(show_json(&fx, id)["approvals"].as_array().unwrap().len(), 1);
    assert_eq!(approvals_recorded(&fx).len(), 1);

    let second = approve("alice");
    assert!(second.status.success(), "{}", stderr(&second));
    let view = show_json(&fx, id);
    assert_eq!(view["status"], "published");
    assert_eq!(view["decided_by"], "alice");
    assert_eq!(view["approvals"].as_array().unwrap().len(), 2);
    assert!(fx.remote_ref(&branch).is_some());
    let reviewers: Vec<Value> = approvals_recorded(&fx)
        .into_iter()
        .map(|p| p["reviewer"].clone())
        .collect();
    assert_eq!(reviewers, [json!("bob"), json!("alice")]);
}

#[test]
fn two_approvers_neither_senior_leave_a_senior_route_item_queued() {
    let mut fx = Fixture::new();
    fx.start();
    let id = queue_senior(&fx, "run-senior-juniors");
    let sid = id.to_string();
    add_approver(&fx, "bob", false);
    add_approver(&fx, "carol", false);
    for by in ["bob", "carol"] {
        let out = fx.cli(&[
            "approve",
            &sid,
            "--confirm-risk",
            "--reason",
            "looks right",
            "--by",
            by,
        ]);
        assert!(out.status.success(), "{}", stderr(&out));
    }
    assert_eq!(show_json(&fx, id)["status"], "queued");
    assert!(fx.remote_ref(&format!("airlock/CALC-42-{id}")).is_none());
}
