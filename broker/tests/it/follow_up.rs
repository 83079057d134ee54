//! Follow-ups at the broker's boundary: a request for changes on a published item keeps it
//! published and is what `follow_up` answers (the branch head, the feedback); a follow-up
//! registers only on the head of the branch the broker pushed; a request for changes on a
//! queued item is a denial.

use crate::harness::*;
use airlock_broker::BrokerReply;
use airlock_protocol::Request;

#[test]
fn a_follow_up_starts_only_from_the_branch_head_the_broker_pushed() {
    let mut fx = Fixture::new();
    fx.start();
    let id = queue_honest(&fx, "run-first");
    // Nothing requested yet: nothing to follow up.
    let reply = fx
        .client()
        .request(&Request::FollowUp { queue_id: id })
        .unwrap();
    let BrokerReply::Failed { message } = reply else {
        panic!("{reply:?}")
    };
    assert!(message.contains("no change request"), "{message}");

    let out = fx.cli(&["approve", &id.to_string()]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let branch = format!("airlock/CALC-42-{id}");
    let head = fx.remote_ref(&branch).expect("pushed");

    let out = fx.cli(&[
        "request-changes",
        &id.to_string(),
        "--feedback",
        "Also clamp the lower bound.",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let shown = fx.cli(&["show", &id.to_string(), "--json"]);
    let shown: serde_json::Value = serde_json::from_slice(&shown.stdout).unwrap();
    assert_eq!(shown["status"], "published", "the pull request stays");

    let reply = fx
        .client()
        .request(&Request::FollowUp { queue_id: id })
        .unwrap();
    let BrokerReply::FollowUp { brief } = reply else {
        panic!("{reply:?}")
    };
    assert_eq!(brief.base_commit, head);
    assert_eq!(brief.branch.as_deref(), Some(branch.as_str()));
    assert_eq!(brief.feedback, "Also clamp the lower bound.");
    assert_eq!(brief.requested_by, "rev");
    assert_eq!(brief.issue_id, "CALC-42");

    // On the pin instead of the head: refused, naming the head and the branch.
    let wt = fx.worktree("run-stale");
    let mut stale = fx.registration("run-stale", &wt);
    stale.follow_up_of = Some(id);
    let reply = fx.client().register_run(&stale).unwrap();
    let BrokerReply::Failed { message } = reply else {
        panic!("{reply:?}")
    };
    assert!(
        message.contains(&format!("must start from {head}")) && message.contains(&branch),
        "{message}"
    );
    // On the head: registered.
    let wt = fx.worktree("run-follow-up");
    let mut follow_up = fx.registration("run-follow-up", &wt);
    follow_up.follow_up_of = Some(id);
    follow_up.base_commit = head;
    let reply = fx.client().register_run(&follow_up).unwrap();
    assert_eq!(
        reply,
        BrokerReply::Registered {
            run_id: "run-follow-up".to_owned()
        }
    );
}

#[test]
fn requesting_changes_on_a_queued_item_denies_it_and_empty_feedback_is_refused() {
    let mut fx = Fixture::new();
    fx.start();
    let id = queue_honest(&fx, "run-queued");
    let out = fx.cli(&["request-changes", &id.to_string(), "--feedback", "  "]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("needs feedback"));
    let out = fx.cli(&[
        "request-changes",
        &id.to_string(),
        "--feedback",
        "Keep the docstring.\nAdd a test.",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        fx.client().decision("run-queued").unwrap(),
        BrokerReply::Refused {
            error: airlock_broker::BrokerError::approval_denied(
                "changes requested: Keep the docstring. Add a test."
            )
        }
    );
    // A follow-up of it starts from its pin (nothing was published).
    let reply = fx
        .client()
        .request(&Request::FollowUp { queue_id: id })
        .unwrap();
    let BrokerReply::FollowUp { brief } = reply else {
        panic!("{reply:?}")
    };
    assert_eq!(brief.base_commit, fx.pin);
    assert_eq!(brief.branch, None);
    assert_eq!(brief.feedback, "Keep the docstring.\nAdd a test.");
}

/// A member's review requesting changes on the forge starts a follow-up even where the broker
/// has named approvers: the reviewer's standing is the forge's association, held to
/// `feedback_from`, not a seat among the people who decide items; the change request records
/// them as `github:LOGIN`.
#[test]
fn a_members_review_starts_a_follow_up_where_approvers_are_named() {
    const TOKEN_VAR: &str = "AIRLOCK_IT_REVIEW_TOKEN";
    let forge = MockForge::start();
    let mut fx = Fixture::with(Options {
        forge: Some((forge.base.clone(), TOKEN_VAR.into())),
        ..Options::default()
    });
    fx.start_with_env(&[(TOKEN_VAR, "tok-review")]);
    let added = fx.cli(&["approver", "add", "alice"]);
    assert!(
        added.status.success(),
        "{}",
        String::from_utf8_lossy(&added.stderr)
    );
    let id = queue_honest(&fx, "run-reviewed");
    let out = fx.cli_env(
        &["approve", &id.to_string(), "--by", "alice"],
        &[(TOKEN_VAR, "tok-review")],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    forge.route(
        "/repos/acme/calc/pulls/1/reviews/42",
        200,
        serde_json::json!({"id": 42, "state": "CHANGES_REQUESTED", "user": {"login": "rev"},
                           "author_association": "MEMBER",
                           "body": "clamp should also accept lo > hi by swapping them."}),
    );
    forge.route(
        "/repos/acme/calc/pulls/1/reviews/42/comments?per_page=50",
        200,
        serde_json::json!([]),
    );
    let reply = fx
        .client()
        .request(&Request::PrFeedback(airlock_protocol::PrFeedback {
            forge_repo: "acme/calc".to_owned(),
            pull_request: 1,
            source: airlock_protocol::FeedbackSource {
                kind: airlock_protocol::FeedbackKind::Review,
                id: 42,
            },
        }))
        .unwrap();
    let BrokerReply::FollowUp { brief } = reply else {
        panic!("no follow-up: {reply:?}")
    };
    assert_eq!(brief.requested_by, "github:rev");
    assert!(
        brief.feedback.contains("swapping them"),
        "{}",
        brief.feedback
    );
    // A person at the broker's own command line still has to be a named approver.
    let stranger = fx.cli(&[
        "request-changes",
        &id.to_string(),
        "--by",
        "mallory",
        "--feedback",
        "do more",
    ]);
    assert!(!stranger.status.success());
}
