//! Budgets that pause: a run that reaches `max_turns` parks (worktree, conversation and
//! trajectory kept, exit 5), `airlock resume` with more turns continues the same conversation to
//! a pull request queued by the real broker, and a parked run past `park_max_age` is refused.

use crate::github::{READ_TOKEN, READ_VAR, World, text, world};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const NEW_TEST: &str = "import unittest\n\nfrom calc.ops import add\n\n\nclass AddTest(unittest.TestCase):\n    def test_add(self):\n        self.assertEqual(add(2, 3), 5)\n";

fn call(name: &str, args: Value) -> Value {
    json!({"tool_calls": [{"name": name, "arguments": args}]})
}

fn script(w: &World, name: &str, turns: &[Value]) -> PathBuf {
    let path = w.s.dir.path().join(name);
    let lines: Vec<String> = turns.iter().map(Value::to_string).collect();
    std::fs::write(&path, lines.join("\n")).unwrap();
    path
}

/// Three turns of work (a new test, the fix, a green full run), then the closing summary the
/// supervisor asks for when it parks the run.
fn first_leg(w: &World) -> PathBuf {
    let summary = json!({"outcome": "escalate", "summary": "add() subtracted; fixed and tested, \
        the full run is green", "root_cause": "add returned a - b", "files_changed": ["calc/ops.py", "tests/test_add.py"],
        "tests_added": ["tests.test_add.AddTest.test_add"], "test_evidence": {"before": "", "after": "OK"},
        "also_noticed": [], "injection_observed": [], "confidence": 0.5});
    script(
        w,
        "leg-1.jsonl",
        &[
            call(
                "write_file",
                json!({"path": "tests/test_add.py", "content": NEW_TEST}),
            ),
            call(
                "edit_file",
                json!({"path": "calc/ops.py", "old_text": "a - b", "new_text": "a + b"}),
            ),
            call("run_tests", json!({})),
            json!({"text": summary.to_string(), "expect_last_message_contains": "The run is paused"}),
        ],
    )
}

/// After the resume: open_pr on the parked worktree, then the final message.
fn second_leg(w: &World) -> PathBuf {
    let open_pr = json!({
        "issue_id": "CALC-7", "base_commit": w.s.commit, "title": "fix: add() adds its arguments",
        "body": "add() subtracted. It adds now; tests.test_add covers it.", "scope": "source-plus-new-tests",
        "diff_digest": {"files_changed": ["calc/ops.py", "tests/test_add.py"], "insertions": 9, "deletions": 1,
                        "test_files_added": ["tests/test_add.py"], "test_files_modified": [], "assertions_removed": 0, "skip_markers_added": 0},
        "test_evidence": {"before_selector": "tests.test_add", "before_failing_test": "tests.test_add.AddTest.test_add",
                          "after_full_run": "green", "witness_run": "green"},
        "confidence": 0.8
    });
    let outcome = json!({"outcome": "pr", "summary": "add now adds", "root_cause": "add subtracted",
        "files_changed": ["calc/ops.py", "tests/test_add.py"], "tests_added": ["tests.test_add.AddTest.test_add"],
        "test_evidence": {"before": "AssertionError: -1 != 5", "after": "OK"},
        "also_noticed": [], "injection_observed": [], "confidence": 0.8});
    script(
        w,
        "leg-2.jsonl",
        &[
            json!({"tool_calls": [{"name": "open_pr", "arguments": open_pr}],
                   "expect_last_message_contains": "The operator resumed this run (turns +3)"}),
            json!({"text": outcome.to_string(), "expect_contains": "queued"}),
        ],
    )
}

fn with_budgets(w: &World, budgets: &str) {
    let mut toml = std::fs::read_to_string(&w.airlock_toml).unwrap();
    toml.push_str(&format!("\n[budgets]\n{budgets}\n"));
    std::fs::write(&w.airlock_toml, toml).unwrap();
}

fn airlock(w: &World, args: &[&str], model: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_airlock"))
        .args(args)
        .arg("--model")
        .arg(format!("scripted:{}", model.display()))
        .arg("--config")
        .arg(&w.airlock_toml)
        .arg("--json")
        .env(READ_VAR, READ_TOKEN)
        .output()
        .unwrap()
}

fn park_a_run(w: &World) -> (String, PathBuf) {
    with_budgets(w, "max_turns = 3");
    let leg = first_leg(w);
    let out = airlock(
        w,
        &[
            "run",
            "--issue",
            "https://github.com/acme/calc/issues/7",
            "--repo",
            w.s.repo.to_str().unwrap(),
        ],
        &leg,
    );
    assert_eq!(out.status.code(), Some(5), "{}", text(&out));
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["result"], "parked", "{doc}");
    assert_eq!(doc["parked"]["budget"], "max_turns", "{doc}");
    assert_eq!(doc["outcome"]["outcome"], "escalate", "{doc}");
    let summary = doc["outcome"]["summary"].as_str().unwrap();
    assert!(
        summary.starts_with("Parked by the supervisor: MAX_TURNS (3) reached.")
            && summary.contains("fixed and tested"),
        "{summary}"
    );
    let run_id = doc["run_id"].as_str().unwrap().to_string();
    let run_dir = w.s.dir.path().join("runs").join(&run_id);
    (run_id, run_dir)
}

#[test]
fn a_run_that_reaches_max_turns_parks_and_resume_finishes_it_to_a_queued_pull_request() {
    let w = world();
    let (run_id, run_dir) = park_a_run(&w);
    // The worktree, the conversation and the trajectory are kept.
    let ops = std::fs::read_to_string(run_dir.join("worktree/calc/ops.py")).unwrap();
    assert!(ops.contains("return a + b"), "{ops}");
    assert!(run_dir.join("worktree/tests/test_add.py").is_file());
    let parked: Value =
        serde_json::from_str(&std::fs::read_to_string(run_dir.join("parked.json")).unwrap())
            .unwrap();
    let conversation = parked["session"]["conversation"].as_array().unwrap();
    let roles: Vec<&str> = conversation
        .iter()
        .filter_map(|m| m["role"].as_str())
        .collect();
    assert_eq!(roles.first(), Some(&"system"), "{roles:?}");
    assert_eq!(roles.last(), Some(&"assistant"), "the summary is kept");
    assert_eq!(parked["session"]["ledger"]["counts"]["turns"], 3);
    assert_eq!(parked["session"]["ledger"]["counts"]["full_runs"], 1);
    let trajectory = std::fs::read_to_string(run_dir.join("trajectory.jsonl")).unwrap();
    let lines_before = trajectory.lines().count();

    // Nothing added to the budget that stopped it: refused, still parked.
    let leg = second_leg(&w);
    let out = airlock(&w, &["resume", &run_id, "--add-usd", "1"], &leg);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("parked on max_turns; pass --add-turns N"),
        "{}",
        text(&out)
    );
    assert!(run_dir.join("parked.json").is_file());

    let out = airlock(&w, &["resume", &run_id, "--add-turns", "3"], &leg);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["result"], "pr_queued", "{doc}");
    assert_eq!(doc["run_id"], run_id.as_str());
    assert!(!run_dir.join("parked.json").exists(), "parked no more");
    // One trajectory, continued: numbering goes on after the parked leg.
    let trajectory: Vec<Value> = std::fs::read_to_string(run_dir.join("trajectory.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(trajectory[lines_before]["kind"], "run_resumed");
    assert_eq!(
        trajectory[lines_before]["seq"],
        u64::try_from(lines_before + 1).unwrap()
    );
    // The broker queued it: the real intake (digest, witness) passed on the resumed worktree.
    let queue = w.broker_cli(&["queue", "--json"], None);
    assert!(queue.status.success(), "{}", text(&queue));
    let queue: Value = serde_json::from_slice(&queue.stdout).unwrap();
    let rows = queue.as_array().unwrap();
    assert_eq!(rows.len(), 1, "{queue}");
    assert_eq!(rows[0]["issue_id"], "CALC-7");
    assert_eq!(rows[0]["status"], "queued");
    // The audit log tells the story: parked, resumed, then the pull request.
    let audit = std::fs::read_to_string(w.s.dir.path().join("audit.jsonl")).unwrap();
    let ends: Vec<String> = audit
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|r| r["run_id"] == run_id.as_str())
        .filter_map(|r| match r["kind"].as_str() {
            Some("run_finished") => Some(format!("finished:{}", r["payload"]["outcome"])),
            Some("run_resumed") => Some("resumed".to_string()),
            _ => None,
        })
        .collect();
    assert_eq!(
        ends,
        ["finished:\"parked\"", "resumed", "finished:\"pr\""],
        "{ends:?}"
    );
}

#[test]
fn a_parked_run_past_its_age_is_refused_and_its_worktree_removed() {
    let w = world();
    let (run_id, run_dir) = park_a_run(&w);
    // Parked thirty days ago, as far as the record goes.
    let path = run_dir.join("parked.json");
    let mut parked: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    parked["parked_at"] = json!(now - 30 * 24 * 3600);
    std::fs::write(&path, parked.to_string()).unwrap();

    let leg = second_leg(&w);
    for _ in 0..2 {
        let out = airlock(&w, &["resume", &run_id, "--add-turns", "3"], &leg);
        assert_eq!(out.status.code(), Some(2), "{}", text(&out));
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            stderr.contains(&format!("run {run_id} was parked"))
                && stderr.contains("longer than park_max_age (604800 s)")
                && stderr.contains("start a new run"),
            "{stderr}"
        );
    }
    assert!(
        !run_dir.join("worktree").exists(),
        "the worktree is cleaned"
    );
    let outcome: Value =
        serde_json::from_str(&std::fs::read_to_string(run_dir.join("outcome.json")).unwrap())
            .unwrap();
    assert_eq!(outcome["result"], "expired", "{outcome}");
    // No model call was made for it.
    assert!(
        !std::fs::read_to_string(run_dir.join("trajectory.jsonl"))
            .unwrap()
            .contains("run_resumed")
    );
}

#[test]
fn a_resume_that_cannot_reach_the_broker_leaves_the_run_parked() {
    let mut w = world();
    let (run_id, run_dir) = park_a_run(&w);
    w.stop_broker();
    let leg = second_leg(&w);
    let out = airlock(&w, &["resume", &run_id, "--add-turns", "3"], &leg);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("cannot register the run"),
        "{}",
        text(&out)
    );
    assert!(run_dir.join("parked.json").is_file(), "still parked");
    assert!(
        run_dir.join("worktree/calc/ops.py").is_file(),
        "worktree kept"
    );
    let outcome: Value =
        serde_json::from_str(&std::fs::read_to_string(run_dir.join("outcome.json")).unwrap())
            .unwrap();
    assert_eq!(outcome["result"], "parked", "{outcome}");
}
