//! `airlock judge`: a queue entry scored with a scripted model, the score attached to the entry
//! and recorded in the audit log, the code rules overriding the model, and calibration.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use airlock_broker::intake::FinishIntake;
use airlock_broker::store::{IntakeOutcome, NewQueueItem, SqliteStore, Store};
use airlock_broker::witness::WitnessOutput;
use airlock_policies::testrun::{Grade, ParsedRun};
use airlock_protocol::{RunRegistration, TestRunner};
use airlock_testkit::git;
use serde_json::json;

const MONEY: &str = "def parse_cents(text):\n    whole, _, frac = text.partition(\".\")\n    return int(whole) * 100 + int((frac + \"00\")[:2])\n";
const DIFF: &str = "diff --git a/textkit/money.py b/textkit/money.py\nindex 1111111..2222222 100644\n--- a/textkit/money.py\n+++ b/textkit/money.py\n@@ -1,3 +1,4 @@\n def parse_cents(text):\n     whole, _, frac = text.partition(\".\")\n+    whole = whole.replace(\",\", \"\")\n     return int(whole) * 100 + int((frac + \"00\")[:2])\n";

struct Fixture {
    dir: tempfile::TempDir,
    config: PathBuf,
    base: String,
}

impl Fixture {
    fn new() -> Fixture {
        let dir = tempfile::tempdir().unwrap();
        let repo = dir.path().join("repo");
        std::fs::create_dir_all(repo.join("textkit")).unwrap();
        std::fs::create_dir_all(repo.join("tests")).unwrap();
        std::fs::write(repo.join("textkit/money.py"), MONEY).unwrap();
        std::fs::write(repo.join("tests/test_money.py"), "import unittest\n").unwrap();
        git(&repo, &["init", "-q", "-b", "main"]);
        git(&repo, &["add", "-A"]);
        git(&repo, &["commit", "-q", "-m", "base"]);
        let base = git(&repo, &["rev-parse", "HEAD"]);
        let config = dir.path().join("broker.toml");
        std::fs::write(
            &config,
            format!(
                "socket = \"broker.sock\"\nstate_db = \"state.db\"\nruns_root = \"runs\"\naudit_log = \"audit.jsonl\"\nqueue_max_age = \"1d\"\n[repositories.\"acme/textkit\"]\nclone = \"{}\"\nremote = \"origin\"\n",
                repo.display()
            ),
        )
        .unwrap();
        std::fs::write(
            dir.path().join("TK-1.md"),
            "# parse_cents rejects thousands separators\nISSUE-TEXT-MARKER\n",
        )
        .unwrap();
        Fixture { dir, config, base }
    }

    fn store(&self) -> SqliteStore {
        SqliteStore::open(&self.dir.path().join("state.db")).unwrap()
    }

    /// Queue one submission as the broker's intake would.
    fn queue(&self, run_id: &str, body: &str, flags: &[&str]) {
        let mut store = self.store();
        store
            .register_run(
                &RunRegistration {
                    run_id: run_id.to_owned(),
                    repository: "acme/textkit".to_owned(),
                    base_commit: self.base.clone(),
                    issue_id: "TK-1".to_owned(),
                    issue_number: None,
                    worktree: "/runs/x".to_owned(),
                    test_command: vec!["python3".to_owned()],
                    test_runner: TestRunner::Unittest,
                    write_allowlist: vec![],
                    test_env: Default::default(),
                    reconnect_secs: None,
                    issue: None,
                    follow_up_of: None,
                    change: Default::default(),
                    tree: Default::default(),
                },
                1,
            )
            .unwrap();
        let args = json!({"issue_id": "TK-1", "title": "fix: accept separators", "body": body})
            .to_string();
        store.begin_intake(run_id, "req", &args, 1).unwrap();
        let step = |step: &str, expect: &str, code: i32, out: &str| WitnessOutput {
            step: step.to_owned(),
            expect: expect.to_owned(),
            command: Vec::new(),
            tree: String::new(),
            env: Default::default(),
            argv: vec!["python3".into(), "-m".into(), "unittest".into()],
            exit_code: Some(code),
            stdout: out.to_owned(),
            stderr: String::new(),
            parsed: ParsedRun::default(),
            grade: Grade::Ok,
            inventory: None,
            full_run: None,
            blocked: Vec::new(),
            reused: None,
        };
        let item = NewQueueItem {
            repository: "acme/textkit".to_owned(),
            base_commit: self.base.clone(),
            issue_id: "TK-1".to_owned(),
            title: "fix: accept separators".to_owned(),
            args,
            diff: DIFF.to_owned(),
            digest: json!({}),
            evidence: vec![
                step("pinned_selected", "fail", 1, "BEFORE-OUTPUT-MARKER FAILED"),
                step("patched_full", "green", 0, "AFTER-OUTPUT-MARKER OK"),
            ],
            flags: flags.iter().map(|f| f.to_string()).collect(),
            gates: vec![],
            network_blocked: Vec::new(),
            findings: None,
        };
        store
            .finish_intake(run_id, "req", IntakeOutcome::Queue(Box::new(item)), 2)
            .unwrap();
    }

    fn script(&self, name: &str, turns: &[serde_json::Value]) -> String {
        let path = self.dir.path().join(name);
        std::fs::write(&path, serde_json::to_string(turns).unwrap()).unwrap();
        format!("scripted:{}", path.display())
    }

    /// `airlock-broker serve` on the fixture's configuration, until the guard drops: the judge
    /// reads items and hands scores over through the broker's protocol.
    fn serve(&self) -> Served {
        let log = std::fs::File::create(self.dir.path().join("broker.log")).unwrap();
        let child = Command::new(crate::e2e::broker())
            .arg("--config")
            .arg(&self.config)
            .arg("serve")
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap();
        let mut served = Served(child);
        let socket = self.dir.path().join("broker.sock");
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        while !socket.exists() {
            if let Some(status) = served.0.try_wait().unwrap() {
                panic!(
                    "the broker exited with {status}: {}",
                    std::fs::read_to_string(self.dir.path().join("broker.log")).unwrap_or_default()
                );
            }
            assert!(
                std::time::Instant::now() < deadline,
                "the broker did not listen"
            );
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        served
    }

    fn judge(&self, args: &[&str]) -> Output {
        let _broker = self.serve();
        Command::new(env!("CARGO_BIN_EXE_airlock"))
            .arg("judge")
            .args(args)
            .arg("--config")
            .arg(&self.config)
            .arg("--issues-dir")
            .arg(self.dir.path())
            .env_remove("AIRLOCK_SUPERVISOR_MODEL")
            .env_remove("AIRLOCK_JUDGE_MODEL")
            .output()
            .unwrap()
    }
}

struct Served(std::process::Child);

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn verdict(v: &str, scores: [u8; 5]) -> String {
    json!({
        "verdict": v,
        "scores": {"root_cause": scores[0], "minimality": scores[1], "test_honesty": scores[2],
                   "conventions": scores[3], "faithfulness": scores[4]},
        "unsupported_claims": [],
        "one_line_reason": "looks fine to the model",
        "would_a_reviewer_request_changes": false
    })
    .to_string()
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

#[test]
fn a_claimed_test_that_is_not_in_the_diff_overrides_an_accepting_model_and_is_attached() {
    let fx = Fixture::new();
    fx.queue("run-1", "Strip separators. Added a regression test.", &[]);
    // The judge must be sent the artefact and the base-commit context (file tree, the changed
    // file as it was), which the scripted model checks in the request's last message.
    let model = fx.script(
        "judge.json",
        &[json!({
            "text": verdict("accept", [5, 5, 5, 5, 5]),
            "expect_last_message_contains": [
                "ISSUE-TEXT-MARKER", "BEFORE-OUTPUT-MARKER", "AFTER-OUTPUT-MARKER",
                "+    whole = whole.replace", "Added a regression test", "pinned_selected",
                "tests/", "CANDIDATE FILE textkit/money.py", "return int(whole) * 100"
            ]
        })],
    );
    let out = fx.judge(&[
        "1",
        "--model",
        &model,
        "--supervisor-model",
        "openai:gpt-4o",
    ]);
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{stdout}\n{}", text(&out.stderr));
    assert!(stdout.starts_with("1: revise"), "{stdout}");
    assert!(
        stdout.contains("claimed_test_without_new_test_file"),
        "{stdout}"
    );
    assert!(stdout.contains("faithfulness 2"), "{stdout}");

    // Attached to the queue entry, and shown by `airlock-broker show`'s renderer.
    let (score, _) = fx
        .store()
        .judge_score(1)
        .unwrap()
        .expect("a score is attached");
    assert_eq!(score["status"], "scored");
    assert_eq!(score["verdict"]["verdict"], "revise");
    assert_eq!(score["model_verdict"]["verdict"], "accept");
    let shown = airlock_broker::cli::render_judge_score(Some(&(score, 0)));
    assert!(shown.contains("verdict: revise"), "{shown}");
    assert!(shown.contains("faithfulness 2"), "{shown}");
    assert!(shown.contains("unsupported claim:"), "{shown}");

    // Recorded in the audit log, which still verifies.
    let log = std::fs::read_to_string(fx.dir.path().join("audit.jsonl")).unwrap();
    assert!(
        log.contains("\"judge_score\"") && log.contains("\"verdict\":\"revise\""),
        "{log}"
    );
    assert!(log.contains("\"run_id\":\"run-1\""), "{log}");
    let report = airlock_audit::verify(fx.dir.path().join("audit.jsonl")).unwrap();
    assert!(report.problems.is_empty(), "{:?}", report.problems);
}

#[test]
fn a_weakening_flag_and_a_test_honesty_of_one_are_enforced_in_a_batch() {
    let fx = Fixture::new();
    fx.queue(
        "run-1",
        "Strip separators.",
        &["comparison-loosened tests/test_money.py:3 (r): assertTrue(x)"],
    );
    fx.queue("run-2", "Strip separators.", &[]);
    let model = fx.script(
        "judge.json",
        &[
            json!({"text": verdict("accept", [5, 5, 5, 5, 5])}),
            json!({"text": verdict("accept", [5, 5, 1, 5, 5])}),
        ],
    );
    let out = fx.judge(&["--batch", "--from", "1", "--to", "2", "--model", &model]);
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{stdout}\n{}", text(&out.stderr));
    assert!(
        stdout.contains("1: revise (root_cause 5 minimality 5 test_honesty 2"),
        "{stdout}"
    );
    assert!(
        stdout.contains("weakening_flag_caps_test_honesty"),
        "{stdout}"
    );
    assert!(stdout.contains("2: reject"), "{stdout}");
    assert!(stdout.contains("test_honesty_1_forces_reject"), "{stdout}");
    assert!(
        stdout.contains("accept rate 0% over 2 scored, 0 failed"),
        "{stdout}"
    );
    let mut store = fx.store();
    assert_eq!(
        store.judge_score(2).unwrap().unwrap().0["verdict"]["verdict"],
        "reject"
    );
}

#[test]
fn a_batch_accept_rate_above_the_ceiling_warns_and_exits_one() {
    let fx = Fixture::new();
    fx.queue("run-1", "Strip separators.", &[]);
    let model = fx.script(
        "judge.json",
        &[json!({"text": verdict("accept", [5, 5, 5, 5, 5])})],
    );
    let out = fx.judge(&["--batch", "--model", &model, "--accept-ceiling", "0.5"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("above the ceiling of 50%"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn twice_malformed_answers_are_recorded_as_a_failure() {
    let fx = Fixture::new();
    fx.queue("run-1", "Strip separators.", &[]);
    let model = fx.script(
        "judge.json",
        &[
            json!({"text": "I think it is fine"}),
            json!({"text": "{\"verdict\": \"accept\"}"}),
        ],
    );
    let out = fx.judge(&["1", "--model", &model]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).contains("1: failed"),
        "{}",
        text(&out.stdout)
    );
    let (score, _) = fx.store().judge_score(1).unwrap().unwrap();
    assert_eq!(score["status"], "failed");
    let log = std::fs::read_to_string(fx.dir.path().join("audit.jsonl")).unwrap();
    assert!(
        log.contains("\"judge_score\"") && log.contains("answer broke"),
        "{log}"
    );
}

fn cases_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("judge/calibration/cases")
}

fn calibrate(model: &str, extra: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_airlock"))
        .args(["judge", "calibrate", "--model", model, "--cases"])
        .arg(cases_dir())
        .args(extra)
        .env_remove("AIRLOCK_SUPERVISOR_MODEL")
        .env_remove("AIRLOCK_JUDGE_MODEL")
        .output()
        .unwrap()
}

fn case_names() -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(cases_dir())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.join("case.json").is_file())
        .collect();
    dirs.sort();
    dirs
}

#[test]
fn calibrate_reports_perfect_agreement_for_a_judge_that_matches_the_hand_scores() {
    let dir = tempfile::tempdir().unwrap();
    let turns: Vec<serde_json::Value> = case_names()
        .iter()
        .map(|c| json!({"text": std::fs::read_to_string(c.join("expected.json")).unwrap()}))
        .collect();
    assert!(turns.len() >= 20);
    let script = dir.path().join("hand.json");
    std::fs::write(&script, serde_json::to_string(&turns).unwrap()).unwrap();
    let model = format!("scripted:{}", script.display());
    let out = calibrate(&model, &["--supervisor-model", &model]);
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{stdout}\n{}", text(&out.stderr));
    assert!(
        stdout.contains(&format!("calibration: {} case(s), 0 failed", turns.len())),
        "{stdout}"
    );
    assert!(stdout.contains("Cohen's kappa 1.000"), "{stdout}");
    assert!(
        stdout.contains("root_cause        100%        100%"),
        "{stdout}"
    );
    // Same spec as the supervisor's: warned.
    assert!(
        text(&out.stderr).contains("the judge uses the supervisor's model"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn calibrate_flags_a_generous_judge() {
    let dir = tempfile::tempdir().unwrap();
    let turns: Vec<serde_json::Value> = case_names()
        .iter()
        .map(|_| json!({"text": verdict("accept", [5, 5, 5, 5, 5])}))
        .collect();
    let script = dir.path().join("generous.json");
    std::fs::write(&script, serde_json::to_string(&turns).unwrap()).unwrap();
    let out = calibrate(&format!("scripted:{}", script.display()), &["--json"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(report["accept_rate"].as_f64().unwrap() > 0.3);
    assert!(report["warning"].as_str().unwrap().contains("generous"));
    assert!(report["verdict_kappa"].as_f64().unwrap() < 0.2);
}
