//! The merged-pull-request memory in a run: the warm start mentions the best earlier fix above
//! `[history] mention_threshold` and not below it, `search_history` answers from the history
//! up to the pin (nothing merged after it), and with a token the forge's merged pull requests
//! are read from a mock of the GitHub REST API on loopback.

use crate::fixture::*;
use airlock_supervisor::config::GithubConfig;
use airlock_supervisor::github::{GithubClient, IssueSource};
use airlock_testkit::mockgithub::MockForge;
use serde_json::{Value, json};

const HEADING: &str = "## Merged pull requests like this issue";

/// The calc fixture with merged fixes on `main`: #12 (a merge commit fixing `add` in
/// `calc/ops.py`) and #15 (a squash commit on the README); then #20 on a branch after the pin,
/// also about `add`. Returns the fixture, its pin (`main`) and the later commit.
fn calc_with_history() -> (Fixture, String, String) {
    let fx = Fixture::new();
    git(&fx.repo, &["checkout", "-q", "-b", "fix-add"]);
    let ops = std::fs::read_to_string(fx.repo.join("calc/ops.py")).unwrap();
    std::fs::write(fx.repo.join("calc/ops.py"), format!("# add and mul\n{ops}")).unwrap();
    git(&fx.repo, &["commit", "-qam", "note"]);
    git(&fx.repo, &["checkout", "-q", "main"]);
    git(
        &fx.repo,
        &[
            "merge",
            "-q",
            "--no-ff",
            "fix-add",
            "-m",
            "Merge pull request #12 from bob/fix-add",
            "-m",
            "Fix add() returning the wrong result for negative numbers",
        ],
    );
    std::fs::write(fx.repo.join("README.md"), "# calc\n\nmul multiplies.\n").unwrap();
    git(&fx.repo, &["commit", "-qam", "Document mul (#15)"]);
    let pin = git(&fx.repo, &["rev-parse", "HEAD"]);
    git(&fx.repo, &["checkout", "-q", "-b", "later"]);
    std::fs::write(
        fx.repo.join("calc/__init__.py"),
        "# add wrong result overflow\n",
    )
    .unwrap();
    git(
        &fx.repo,
        &["commit", "-qam", "Fix add() wrong result on overflow (#20)"],
    );
    let later = git(&fx.repo, &["rev-parse", "HEAD"]);
    git(&fx.repo, &["checkout", "-q", "main"]);
    (fx, pin, later)
}

fn with_history(fx: &Fixture, section: &str) -> std::path::PathBuf {
    let config = fx.config("max_turns = 4");
    let mut text = std::fs::read_to_string(&config).unwrap();
    text.push_str(&format!("\n[history]\n{section}\n"));
    std::fs::write(&config, text).unwrap();
    config
}

/// The warm start (the first user message) as recorded in the trajectory.
fn warm_start(entries: &[Value]) -> String {
    kinds(entries, "message")
        .iter()
        .map(Value::to_string)
        .find(|m| m.contains("Search candidates for the issue text"))
        .expect("a warm start in the trajectory")
}

pub fn the_warm_start_mentions_the_best_earlier_fix_above_the_threshold_and_search_history_finds_it()
 {
    let (fx, pin, _later) = calc_with_history();
    let config = with_history(&fx, "mention_threshold = 1.0");
    let issue = fx.issue(ready_issue());
    let model = fx.script(&[
        json!({
            "tool_calls": [{"name": "search_history", "arguments": {"query": "add wrong result"}}],
            "expect_last_message_contains": [
                HEADING,
                "#12 Fix add() returning the wrong result for negative numbers [calc/ops.py]",
            ],
        }),
        json!({
            "text": outcome("escalate", 0.2).to_string(),
            "expect_last_message_contains": ["1. #12 Fix add() returning the wrong result"],
        }),
    ]);
    let report = fx.run(&issue, &model, &config, &BrokerStub::default());
    assert_eq!(report.model_finish_problem, None);
    assert_eq!(report.base_commit, pin);
    let entries = trajectory(&report);
    let warm = warm_start(&entries);
    assert!(
        !warm.contains("#20"),
        "a fix merged after the pin is not mentioned: {warm}"
    );
    let result = kinds(&entries, "tool_result")
        .iter()
        .map(Value::to_string)
        .find(|r| r.contains("#12"))
        .expect("the search_history result");
    assert!(!result.contains("#20"), "nothing after the pin: {result}");
    // The result was screened and the call recorded like any other tool's.
    let audit = std::fs::read_to_string(fx.path("audit.jsonl")).unwrap();
    assert!(audit.contains("\"search_history\""), "{audit}");
}

pub fn below_the_threshold_the_warm_start_mentions_no_earlier_fix() {
    let (fx, _pin, _later) = calc_with_history();
    let config = with_history(&fx, "mention_threshold = 1000.0");
    let issue = fx.issue(ready_issue());
    let model = fx.script(&[final_turn(&outcome("escalate", 0.2))]);
    let report = fx.run(&issue, &model, &config, &BrokerStub::default());
    let warm = warm_start(&trajectory(&report));
    assert!(!warm.contains(HEADING), "{warm}");
    assert!(!warm.contains("#12"), "{warm}");
    // The same run with the default threshold and no mention asked for: none either.
    let config = with_history(&fx, "mention_count = 0\nmention_threshold = 0.0");
    let model = fx.script(&[final_turn(&outcome("escalate", 0.2))]);
    let report = fx.run(&issue, &model, &config, &BrokerStub::default());
    assert!(!warm_start(&trajectory(&report)).contains(HEADING));
}

fn pull(number: u64, title: &str, merged_at: Option<&str>, sha: &str) -> Value {
    json!({
        "number": number, "title": title, "body": format!("Body of #{number}."),
        "state": "closed", "merged_at": merged_at, "merge_commit_sha": sha,
    })
}

pub fn merged_pull_requests_are_read_from_the_forge_with_their_files() {
    let api = MockForge::start();
    api.merged_pull(
        "acme/calc",
        pull(
            3,
            "Closed without merging",
            None,
            "0000000000000000000000000000000000000000",
        ),
        json!([]),
    );
    api.merged_pull(
        "acme/calc",
        pull(
            8,
            "Make mul handle floats",
            Some("2019-06-01T00:00:00Z"),
            "1111111111111111111111111111111111111111",
        ),
        json!([{"filename": "calc/ops.py", "additions": 3, "deletions": 1, "status": "modified"}]),
    );
    api.merged_pull(
        "acme/calc",
        pull(
            9,
            "Speed up the test suite",
            Some("2019-07-01T00:00:00Z"),
            "2222222222222222222222222222222222222222",
        ),
        json!([{"filename": "tests/test_ops.py", "additions": 1, "deletions": 1}]),
    );
    let cfg = GithubConfig {
        api_url: api.base.clone(),
        ..GithubConfig::default()
    };
    let client = GithubClient::from_config(&cfg).unwrap();
    let pulls = client.merged_pulls("acme", "calc", 10, &[], &cfg).unwrap();
    let numbers: Vec<u64> = pulls.iter().map(|p| p.number).collect();
    assert_eq!(numbers, vec![8, 9], "the unmerged one is left out");
    assert_eq!(pulls[0].files[0].filename, "calc/ops.py");
    assert_eq!(
        pulls[0].merge_commit_sha.as_deref(),
        Some("1111111111111111111111111111111111111111")
    );
    // A number already saved costs no request for its files; `max` bounds the merged ones read.
    let before = api.requests().len();
    let pulls = client.merged_pulls("acme", "calc", 1, &[9], &cfg).unwrap();
    assert!(pulls.is_empty(), "{pulls:?}");
    let asked: Vec<String> = api.requests()[before..]
        .iter()
        .map(|r| r.path.clone())
        .collect();
    assert!(asked.iter().all(|p| !p.contains("/files")), "{asked:?}");
}

pub fn a_github_run_with_a_token_saves_the_forges_merged_pull_requests_and_the_warm_start_uses_them()
 {
    let (fx, _pin, _later) = calc_with_history();
    let api = MockForge::start();
    api.route(
        "/repos/acme/calc/issues/7",
        200,
        json!({"number": 7, "title": "add() returns the wrong result",
               "body": "Calling `calc.ops.add(2, 3)` returns -1; expected 5.",
               "labels": [{"name": "ready-for-agent"}], "user": {"login": "alice"},
               "state": "open", "comments": 0,
               "html_url": "https://github.com/acme/calc/issues/7"}),
    );
    // Merged long before the fixture's commits (2020-01-01): visible at the pin.
    api.merged_pull(
        "acme/calc",
        pull(
            5,
            "Stop add() from subtracting its arguments",
            Some("2019-05-01T00:00:00Z"),
            "3333333333333333333333333333333333333333",
        ),
        json!([{"filename": "calc/ops.py", "additions": 1, "deletions": 1}]),
    );
    // Merged after the pin's time: never visible.
    api.merged_pull(
        "acme/calc",
        pull(
            40,
            "Rewrite add() wrong result handling",
            Some("2030-01-01T00:00:00Z"),
            "4444444444444444444444444444444444444444",
        ),
        json!([{"filename": "calc/ops.py", "additions": 9, "deletions": 9}]),
    );
    let config = fx.config("max_turns = 4");
    let mut text = std::fs::read_to_string(&config).unwrap();
    text.push_str(&format!(
        "\n[github]\napi_url = \"{}\"\nproject_key = \"ACME\"\ntoken_env = \"PATH\"\n\n[history]\nmention_threshold = 1.0\n",
        api.base
    ));
    std::fs::write(&config, text).unwrap();
    // A token is configured by naming a variable; this process cannot set one (no `unsafe`
    // outside the sandbox), so it names one every process has. The mock takes any token.
    let token = std::env::var("PATH").unwrap();
    let model = fx.script(&[json!({
        "text": outcome("escalate", 0.2).to_string(),
        "expect_last_message_contains": [HEADING, "#5 Stop add() from subtracting its arguments"],
    })]);
    let source = IssueSource::parse("github:acme/calc#7").unwrap();
    let report = fx
        .try_run_source(
            source,
            Some("main"),
            &model,
            &config,
            &BrokerStub::default(),
        )
        .unwrap();
    assert_eq!(report.model_finish_problem, None);
    let recorded: Value =
        serde_json::from_str(&std::fs::read_to_string(&report.outcome_path).unwrap()).unwrap();
    assert_eq!(recorded["intake"]["history_forge"], json!({"saved": 2}));
    let warm = warm_start(&trajectory(&report));
    assert!(!warm.contains("#40"), "{warm}");
    // The token went to the API base only, with every forge request.
    assert!(api
        .requests()
        .iter()
        .filter(|r| r.path.contains("/pulls"))
        .all(|r| r.header("authorization") == Some(format!("Bearer {}", token.trim()).as_str())));
}
