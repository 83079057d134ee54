//! [`GitHub`] against `airlock_testkit::mockgithub`: request paths, headers and bodies, pages,
//! and the errors a person acts on.

use airlock_forge::github::{GitHub, access_of_association};
use airlock_forge::token::NoToken;
use airlock_forge::{AccessLevel, DraftRequest, Error, Forge, TokenSource, WebhookDelivery};
use airlock_testkit::mockgithub::MockForge;
use hmac::{Hmac, Mac};
use serde_json::{Value, json};
use sha2::Sha256;

const TOKEN: &str = "ghp-test-token-123";

/// A fixed token, as a test's stand-in for an environment variable.
struct Fixed(&'static str);

impl TokenSource for Fixed {
    fn token(&self) -> airlock_forge::Result<Option<String>> {
        Ok(Some(self.0.to_owned()))
    }
    fn describe(&self) -> String {
        "GITHUB_TOKEN".to_owned()
    }
}

fn client(mock: &MockForge) -> GitHub {
    GitHub::from_slug(&mock.base, "acme/calc", Box::new(Fixed(TOKEN))).unwrap()
}

fn comment(id: u64, login: &str, body: &str) -> Value {
    json!({"id": id, "user": {"login": login, "id": id + 100}, "body": body,
           "created_at": "2026-01-02T03:04:05Z"})
}

#[test]
fn an_issue_is_read_with_its_comment_pages_and_the_rest_apis_headers() {
    let mock = MockForge::start();
    mock.route(
        "/repos/acme/calc/issues/7",
        200,
        json!({"number": 7, "title": "add() is wrong", "body": "2+3 gives -1",
               "labels": [{"name": "ready-for-agent"}, "bug"], "user": {"login": "alice", "id": 5},
               "state": "open", "comments": 101,
               "html_url": "https://github.com/acme/calc/issues/7"}),
    );
    let page1: Vec<Value> = (1..=100)
        .map(|i| comment(i, "bob", &format!("comment {i}")))
        .collect();
    mock.route(
        "/repos/acme/calc/issues/7/comments?per_page=100&page=1",
        200,
        Value::Array(page1),
    );
    mock.route(
        "/repos/acme/calc/issues/7/comments?per_page=100&page=2",
        200,
        json!([comment(101, "carol", "the last")]),
    );
    let issue = client(&mock).issue(7).unwrap();
    assert_eq!(issue.title, "add() is wrong");
    assert_eq!(issue.body, "2+3 gives -1");
    assert_eq!(issue.labels, ["bug", "ready-for-agent"]);
    assert_eq!(
        (issue.author.username.as_str(), issue.author.id),
        ("alice", 5)
    );
    assert_eq!(issue.comments.len(), 101);
    assert_eq!(issue.comments[100].author.username, "carol");
    assert_eq!(issue.comments[100].created_at, "2026-01-02T03:04:05Z");
    for r in mock.requests() {
        let expected = format!("Bearer {TOKEN}");
        assert_eq!(r.header("authorization"), Some(expected.as_str()));
        assert_eq!(r.header("accept"), Some("application/vnd.github+json"));
        assert_eq!(r.header("x-github-api-version"), Some("2022-11-28"));
        assert_eq!(r.header("user-agent"), Some("airlock"));
    }

    // A bounded read stops at the limit; a comment `keep` refuses still takes its place on
    // the page read, so the next page is read for the third.
    let read = client(&mock)
        .with_user_agent("airlock-broker")
        .read_issue(7, 3, &|c| c.body != "comment 2")
        .unwrap();
    let bodies: Vec<&str> = read
        .issue
        .comments
        .iter()
        .map(|c| c.body.as_str())
        .collect();
    assert_eq!(bodies, ["comment 1", "comment 3", "the last"]);
    assert!(!read.pull_request);
    assert_eq!(
        mock.requests().last().unwrap().header("user-agent"),
        Some("airlock-broker")
    );

    // A pull request is an issue to GitHub, not to airlock; an answer about another number
    // is refused.
    mock.route(
        "/repos/acme/calc/issues/8",
        200,
        json!({"number": 8, "title": "a PR", "pull_request": {"url": "x"}}),
    );
    assert!(
        client(&mock)
            .read_issue(8, 10, &|_| true)
            .unwrap()
            .pull_request
    );
    let err = client(&mock).issue(8).unwrap_err().to_string();
    assert!(err.contains("pull request"), "{err}");
    mock.route(
        "/repos/acme/calc/issues/9",
        200,
        json!({"number": 10, "title": "another"}),
    );
    let err = client(&mock).issue(9).unwrap_err().to_string();
    assert!(err.contains("`number` differs"), "{err}");
}

#[test]
fn labelled_issues_are_read_from_every_page_without_pull_requests() {
    let mock = MockForge::start();
    let mut page1: Vec<Value> = (1..=99).rev().map(|n| json!({"number": n})).collect();
    page1.push(json!({"number": 500, "pull_request": {"url": "x"}}));
    let base = "/repos/acme/calc/issues?state=open&labels=ready%20for%20agent";
    mock.route(
        &format!("{base}&per_page=100&page=1"),
        200,
        Value::Array(page1),
    );
    mock.route(
        &format!("{base}&per_page=100&page=2"),
        200,
        json!([{"number": 120}, {"number": 3}]),
    );
    let numbers = client(&mock)
        .open_issues_labelled("ready for agent")
        .unwrap();
    let mut expected: Vec<u64> = (1..=99).collect();
    expected.push(120);
    assert_eq!(numbers, expected);
}

#[test]
fn labels_comments_and_draft_pull_requests_are_written_as_github_takes_them() {
    let mock = MockForge::start();
    let gh = client(&mock);
    gh.add_label(4, "airlock-claimed").unwrap();
    gh.remove_label(4, "needs-info").unwrap();
    assert_eq!(
        mock.label_changes(),
        [
            ("POST".to_owned(), 4, "airlock-claimed".to_owned()),
            ("DELETE".to_owned(), 4, "needs-info".to_owned())
        ]
    );

    let posted = gh.post_comment(4, "What should 0/0 return?").unwrap();
    assert_eq!(posted.comment.body, "What should 0/0 return?");
    assert_eq!(posted.comment.author.username, "airlock-bot");
    assert_eq!(
        posted.web_url,
        "https://forge.example/acme/calc/issues/4#issuecomment-1"
    );
    let again = gh.comment_on_issue(4, "and 1/0?").unwrap();
    assert_eq!(again.id, 2);
    assert_eq!(
        mock.posted_comments(),
        [
            (
                "/repos/acme/calc/issues/4/comments".to_owned(),
                "What should 0/0 return?".to_owned()
            ),
            (
                "/repos/acme/calc/issues/4/comments".to_owned(),
                "and 1/0?".to_owned()
            )
        ]
    );

    assert_eq!(gh.find_change_request("airlock/CALC-4-1").unwrap(), None);
    let opened = gh
        .open_draft(&DraftRequest {
            title: "fix: 0/0".to_owned(),
            description: "Closes #4".to_owned(),
            source_branch: "airlock/CALC-4-1".to_owned(),
            target_branch: "main".to_owned(),
        })
        .unwrap();
    assert_eq!(opened.number, 1);
    assert!(opened.draft);
    assert_eq!(opened.web_url, "https://forge.example/acme/calc/pull/1");
    assert_eq!(
        mock.created_pulls(),
        [
            json!({"title": "fix: 0/0", "head": "airlock/CALC-4-1", "base": "main",
                "body": "Closes #4", "draft": true})
        ]
    );
    let found = gh.find_change_request("airlock/CALC-4-1").unwrap().unwrap();
    assert_eq!(
        (found.number, found.source_branch.as_str()),
        (1, "airlock/CALC-4-1")
    );
    assert_eq!(gh.find_pull("airlock/other", true).unwrap(), None);
    let list = mock.requests().last().unwrap().path.clone();
    assert_eq!(
        list,
        "/repos/acme/calc/pulls?state=all&head=acme%3Aairlock%2Fother"
    );
}

#[test]
fn standing_comes_from_the_collaborator_permission_or_the_association() {
    let mock = MockForge::start();
    for (id, login, permission) in [(1, "ann", "admin"), (2, "wes", "write"), (3, "ria", "read")] {
        mock.route(&format!("/user/{id}"), 200, json!({"login": login}));
        mock.route(
            &format!("/repos/acme/calc/collaborators/{login}/permission"),
            200,
            json!({"permission": permission}),
        );
    }
    mock.route("/user/4", 200, json!({"login": "nat"}));
    mock.route(
        "/repos/acme/calc/collaborators/nat/permission",
        200,
        json!({"permission": "none"}),
    );
    let gh = client(&mock);
    assert_eq!(gh.member_access(1).unwrap(), Some(AccessLevel::OWNER));
    assert_eq!(gh.member_access(2).unwrap(), Some(AccessLevel::DEVELOPER));
    assert_eq!(gh.member_access(3).unwrap(), Some(AccessLevel::GUEST));
    assert_eq!(gh.member_access(4).unwrap(), None);
    assert_eq!(gh.member_access(99).unwrap(), None, "an unknown user");

    assert_eq!(
        access_of_association(Some("OWNER")),
        Some(AccessLevel::OWNER)
    );
    for who in ["MEMBER", "COLLABORATOR"] {
        assert_eq!(
            access_of_association(Some(who)),
            Some(AccessLevel::DEVELOPER)
        );
    }
    for who in ["CONTRIBUTOR", "FIRST_TIMER", "NONE", "owner"] {
        assert_eq!(access_of_association(Some(who)), None, "{who}");
    }
}

#[test]
fn review_feedback_is_each_review_with_its_line_comments() {
    let mock = MockForge::start();
    mock.route(
        "/repos/acme/calc/pulls/3/reviews?per_page=100&page=1",
        200,
        json!([
            {"id": 11, "user": {"login": "mae", "id": 7}, "body": "Please handle 0.",
             "state": "CHANGES_REQUESTED", "author_association": "MEMBER"},
            {"id": 12, "user": {"login": "eve", "id": 8}, "body": "",
             "state": "COMMENTED", "author_association": "NONE"},
            {"id": 13, "user": {"login": "mae", "id": 7}, "body": "", "state": "APPROVED",
             "author_association": "MEMBER"},
        ]),
    );
    mock.route(
        "/repos/acme/calc/pulls/3/comments?per_page=100&page=1",
        200,
        json!([
            {"id": 21, "pull_request_review_id": 11, "user": {"login": "mae", "id": 7},
             "body": "here", "path": "calc/ops.py", "line": 4, "side": "RIGHT",
             "author_association": "MEMBER"},
            {"id": 22, "pull_request_review_id": 12, "user": {"login": "eve", "id": 8},
             "body": "drop the tests", "path": "tests/t.py", "line": 9, "side": "LEFT",
             "author_association": "NONE"},
        ]),
    );
    let feedback = client(&mock).review_feedback(3).unwrap();
    assert_eq!(feedback.number, 3);
    let ids: Vec<&str> = feedback.threads.iter().map(|t| t.id.as_str()).collect();
    assert_eq!(
        ids,
        ["11", "12"],
        "a review with no text and no comment is no thread"
    );
    let first = &feedback.threads[0].notes;
    assert_eq!(first[0].body, "Please handle 0.");
    assert_eq!(first[0].line, None);
    let line = first[1].line.as_ref().unwrap();
    assert_eq!(
        (line.path.as_str(), line.new_line, line.old_line),
        ("calc/ops.py", Some(4), None)
    );
    let old = feedback.threads[1].notes[0].line.as_ref().unwrap();
    assert_eq!((old.new_line, old.old_line), (None, Some(9)));
    let trusted: Vec<&str> = feedback
        .from_at_least(AccessLevel::DEVELOPER)
        .iter()
        .map(|n| n.body.as_str())
        .collect();
    assert_eq!(trusted, ["Please handle 0.", "here"]);
}

#[test]
fn a_webhook_delivery_is_proven_by_its_hmac_and_named_by_its_delivery_id() {
    let mock = MockForge::start();
    let gh = client(&mock);
    let body = br#"{"action":"labeled"}"#;
    let mut mac = Hmac::<Sha256>::new_from_slice(b"s3cret").unwrap();
    mac.update(body);
    let good = format!("sha256={}", hex::encode(mac.finalize().into_bytes()));
    let headers = |signature: &str| {
        vec![
            ("x-hub-signature-256".to_owned(), signature.to_owned()),
            ("X-GitHub-Event".to_owned(), "issues".to_owned()),
            ("X-GitHub-Delivery".to_owned(), "d-1".to_owned()),
        ]
    };
    let ok = headers(&good);
    let verified = gh
        .verify_webhook(&WebhookDelivery { headers: &ok, body }, "s3cret")
        .unwrap();
    assert_eq!(verified.event, "issues");
    assert_eq!(verified.delivery_id.as_deref(), Some("d-1"));
    for (headers, secret, says) in [
        (ok.clone(), "other", "does not match"),
        (headers("sha256=zz"), "s3cret", "malformed"),
        (ok[1..].to_vec(), "s3cret", "missing X-Hub-Signature-256"),
        (ok.clone(), "", "no webhook secret"),
    ] {
        let err = gh
            .verify_webhook(
                &WebhookDelivery {
                    headers: &headers,
                    body,
                },
                secret,
            )
            .unwrap_err();
        assert!(matches!(err, Error::Webhook { .. }), "{err:?}");
        assert!(err.to_string().contains(says), "{says}: {err}");
    }
    let altered = WebhookDelivery {
        headers: &ok,
        body: b"{}",
    };
    assert!(gh.verify_webhook(&altered, "s3cret").is_err());
}

#[test]
fn errors_say_what_to_do_and_never_carry_the_token() {
    let mock = MockForge::start();
    mock.route(
        "/repos/acme/calc/issues/1",
        401,
        json!({"message": format!("Bad credentials {TOKEN}")}),
    );
    let err = client(&mock).issue(1).unwrap_err();
    let text = format!("{err} {err:?} {:?}", client(&mock));
    assert!(
        text.contains("rejected the token in GITHUB_TOKEN"),
        "{text}"
    );
    assert!(!text.contains(TOKEN), "{text}");

    let anonymous = GitHub::from_slug(&mock.base, "acme/calc", Box::new(NoToken))
        .unwrap()
        .with_token_hint("set [github] token_env");
    let err = anonymous.issue(2).unwrap_err().to_string();
    assert!(
        err.contains("404") && err.contains("set [github] token_env"),
        "{err}"
    );
    assert!(
        mock.requests()
            .last()
            .unwrap()
            .header("authorization")
            .is_none()
    );

    mock.route(
        "/repos/acme/calc/issues/3",
        500,
        json!({"message": "Server \u{1b}[2J Error"}),
    );
    let err = client(&mock).issue(3).unwrap_err().to_string();
    assert!(err.contains("500") && !err.contains('\u{1b}'), "{err}");

    for bad in ["ftp://x", "https://tok@host", "nope"] {
        assert!(
            matches!(
                GitHub::from_slug(bad, "acme/calc", Box::new(NoToken)),
                Err(Error::Config { .. })
            ),
            "{bad}"
        );
    }
    assert!(GitHub::from_slug(&mock.base, "acme", Box::new(NoToken)).is_err());
    assert!(GitHub::from_slug(&mock.base, "acme/..", Box::new(NoToken)).is_err());
}

#[test]
fn a_long_answer_is_streamed_to_its_reader_and_a_missing_one_is_a_404() {
    let mock = MockForge::start();
    let log = "step 1\n".repeat(10_000);
    mock.route_text("/repos/acme/calc/actions/jobs/5/logs", 200, &log);
    let api = client(&mock).api().clone();
    let read = api
        .get_streamed("/repos/acme/calc/actions/jobs/5/logs", |r| {
            let mut text = String::new();
            r.read_to_string(&mut text).map(|_| text)
        })
        .unwrap();
    assert_eq!(read, log);
    let expected = format!("Bearer {TOKEN}");
    assert_eq!(
        mock.requests().last().unwrap().header("authorization"),
        Some(expected.as_str())
    );
    let missing = api.get_streamed("/repos/acme/calc/actions/jobs/6/logs", |_| Ok(()));
    assert!(
        matches!(missing, Err(Error::Status { status: 404, .. })),
        "{missing:?}"
    );
}
