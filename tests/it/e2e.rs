//! The workspace's end-to-end suite: `airlock demo --workdir DIR` started as an operator would
//! (real `airlock`, real `airlock-broker serve`, real sandboxed test runs and reader worker,
//! scripted models), then every scenario asserted step by step from the records it left: the
//! audit chains verify, and the trajectory, the outcome document and the broker's queue entry
//! agree with each other.

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;

fn airlock() -> &'static str {
    env!("CARGO_BIN_EXE_airlock")
}

/// The broker binary the demo starts; the suite needs it built (`cargo build --workspace`).
pub(crate) fn broker() -> PathBuf {
    airlock_testkit::bin::path("airlock-broker")
}

/// Wait (at most 30 s) until `airlock-broker serve` has made `socket`; the panic shows `log`,
/// the broker's stderr, when one is given.
pub(crate) fn wait_for_socket(socket: &Path, log: Option<&Path>) {
    let start = std::time::Instant::now();
    while !socket.exists() {
        assert!(
            start.elapsed() < std::time::Duration::from_secs(30),
            "no broker socket: {}",
            log.and_then(|l| std::fs::read_to_string(l).ok())
                .unwrap_or_default()
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

fn jsonl(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("reading {}: {e}", path.display()))
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn json(path: &Path) -> Value {
    let text =
        std::fs::read_to_string(path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
    serde_json::from_str(&text).unwrap()
}

/// Everything one scenario left behind.
struct Records {
    run_id: String,
    /// The document `airlock run --json` printed.
    printed: Value,
    /// `runs/<run_id>/outcome.json`.
    outcome: Value,
    trajectory: Vec<Value>,
    /// The supervisors' audit records of this run.
    audit: Vec<Value>,
    /// The broker's audit records of this run.
    broker_audit: Vec<Value>,
}

impl Records {
    fn load(work: &Path, scenario: &str) -> Records {
        let printed = json(&work.join("scenarios").join(scenario).join("run.json"));
        let run_id = printed["run_id"].as_str().unwrap().to_string();
        let run_dir = work.join("runs").join(&run_id);
        let of_run = |records: Vec<Value>| -> Vec<Value> {
            records
                .into_iter()
                .filter(|r| r["run_id"] == run_id.as_str())
                .collect()
        };
        Records {
            outcome: json(&run_dir.join("outcome.json")),
            trajectory: jsonl(&run_dir.join("trajectory.jsonl")),
            audit: of_run(jsonl(&work.join("audit.jsonl"))),
            broker_audit: of_run(jsonl(&work.join("broker-audit.jsonl"))),
            printed,
            run_id,
        }
    }

    fn kinds(&self) -> Vec<&str> {
        self.trajectory
            .iter()
            .filter_map(|r| r["kind"].as_str())
            .collect()
    }

    fn calls(&self) -> Vec<&Value> {
        self.trajectory
            .iter()
            .filter(|r| r["kind"] == "tool_call")
            .map(|r| &r["call"])
            .collect()
    }

    fn call_names(&self) -> Vec<&str> {
        self.calls()
            .iter()
            .filter_map(|c| c["name"].as_str())
            .collect()
    }

    fn open_pr_args(&self) -> &Value {
        let call = self
            .calls()
            .into_iter()
            .find(|c| c["name"] == "open_pr")
            .unwrap_or_else(|| panic!("run {} made no open_pr call", self.run_id));
        &call["arguments"]
    }

    fn open_pr_reply(&self) -> &Value {
        self.trajectory
            .iter()
            .find(|r| r["kind"] == "open_pr_reply")
            .unwrap_or_else(|| {
                panic!(
                    "run {} has no open_pr_reply: {:?}",
                    self.run_id,
                    self.kinds()
                )
            })
    }

    fn broker_decisions(&self) -> Vec<(&str, &str)> {
        self.broker_audit
            .iter()
            .filter(|r| r["kind"] == "broker_decision")
            .map(|r| {
                (
                    r["payload"]["code"].as_str().unwrap(),
                    r["payload"]["detail"].as_str().unwrap_or(""),
                )
            })
            .collect()
    }

    fn audit_kinds(&self) -> Vec<&str> {
        self.audit
            .iter()
            .filter_map(|r| r["kind"].as_str())
            .collect()
    }
}

/// The queue id anywhere in a broker reply (0 when there is none).
pub(crate) fn queue_id_of(reply: &Value) -> i64 {
    match reply {
        Value::Object(map) => map
            .iter()
            .find_map(|(k, v)| {
                if k == "queue_id" {
                    v.as_i64()
                } else {
                    Some(queue_id_of(v)).filter(|id| *id > 0)
                }
            })
            .unwrap_or(0),
        _ => 0,
    }
}

fn broker_cli(config: &Path, args: &[&str]) -> (Option<i32>, String, String) {
    let out = Command::new(broker())
        .arg("--config")
        .arg(config)
        .args(args)
        .env("AIRLOCK_REVIEWER", "e2e-approver")
        .output()
        .unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).to_string(),
        String::from_utf8_lossy(&out.stderr).to_string(),
    )
}

/// The diff section of `airlock-broker show`.
fn shown_diff(show: &str) -> &str {
    let diff = show.split("\n== diff\n").nth(1).unwrap_or("");
    diff.split("\n== judge score").next().unwrap_or(diff)
}

/// Paths of the files a unified diff touches, sorted.
fn diff_files(diff: &str) -> Vec<String> {
    let mut files: Vec<String> = diff
        .lines()
        .filter_map(|l| l.strip_prefix("diff --git a/"))
        .filter_map(|l| l.split(" b/").next())
        .map(str::to_string)
        .collect();
    files.sort();
    files
}

fn strings(v: &Value) -> Vec<String> {
    let mut out: Vec<String> = v
        .as_array()
        .unwrap_or_else(|| panic!("not an array: {v}"))
        .iter()
        .map(|s| s.as_str().unwrap().to_string())
        .collect();
    out.sort();
    out
}

/// A queued scenario: the outcome says pr, the broker queued exactly what the trajectory
/// submitted, and its recomputed diff touches the files the outcome and open_pr claim.
fn assert_queued(r: &Records, config: &Path) -> String {
    assert_eq!(r.printed["result"], "pr_queued", "{}", r.printed);
    assert_eq!(
        r.outcome, r.printed,
        "outcome.json and the printed document differ"
    );
    assert_eq!(r.outcome["outcome"]["outcome"], "pr");
    assert_eq!(r.outcome["run_id"], r.run_id.as_str());
    let base = r.outcome["base_commit"].as_str().unwrap();
    assert_eq!(r.open_pr_args()["base_commit"], base);
    assert_eq!(r.trajectory[0]["kind"], "run_started");
    assert_eq!(r.trajectory[0]["base_commit"], base);

    let reply = r.open_pr_reply();
    let queue_id = queue_id_of(reply);
    assert!(queue_id > 0, "no queue id in {reply}");
    assert_eq!(
        r.broker_decisions(),
        vec![("QUEUED", format!("queue item {queue_id}").as_str())],
        "the broker's audit log disagrees with the trajectory"
    );

    let (code, show, stderr) =
        broker_cli(config, &["show", &queue_id.to_string(), "--color", "never"]);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(
        show.contains(&format!("run:        {}", r.run_id)),
        "{show}"
    );
    assert!(show.contains(&format!("at {base}")), "{show}");
    assert!(show.contains("[queued]"), "{show}");
    for step in [
        "pinned_selected (must fail)",
        "patched_selected (must pass)",
        "patched_full (must green)",
    ] {
        let line = show
            .lines()
            .find(|l| l.contains(step))
            .unwrap_or_else(|| panic!("no witness step {step} in\n{show}"));
        assert!(line.ends_with(", Ok"), "witness step not graded Ok: {line}");
    }
    let files = diff_files(shown_diff(&show));
    assert_eq!(files, strings(&r.outcome["outcome"]["files_changed"]));
    assert_eq!(
        files,
        strings(&r.open_pr_args()["diff_digest"]["files_changed"])
    );
    show
}

#[test]
fn demo_scenarios_agree_across_trajectory_outcome_audit_and_queue() {
    broker();
    let dir = tempfile::tempdir().unwrap();
    let work = dir.path().join("work");
    let out = Command::new(airlock())
        .arg("demo")
        .arg("--workdir")
        .arg(&work)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        out.status.code(),
        Some(0),
        "stdout:\n{stdout}\nstderr:\n{stderr}"
    );
    let work = work.canonicalize().unwrap();
    let config = work.join("broker.toml");

    // The summary the person sees and the one written for tools say the same.
    let summary = json(&work.join("summary.json"));
    assert_eq!(summary["audit_chains_intact"], true);
    let scenarios = summary["scenarios"].as_array().unwrap();
    let names: Vec<&str> = scenarios
        .iter()
        .map(|s| s["scenario"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "1-fix-bug",
            "2-ambiguous",
            "3-hostile-repo",
            "4-weakened-test"
        ]
    );
    for s in scenarios {
        assert_eq!(s["pass"], true, "{s}");
        let row = stdout.lines().find(|l| {
            l.trim_start().starts_with(s["scenario"].as_str().unwrap())
                && l.trim_end().ends_with("pass")
        });
        assert!(row.is_some(), "no summary row for {s} in\n{stdout}");
    }
    assert!(
        stdout.contains("every scenario behaved as expected"),
        "{stdout}"
    );
    assert!(
        stdout.contains(&format!("--config {} show 1", config.display())),
        "{stdout}"
    );

    // Both audit chains verify with the operator's command.
    for log in ["audit.jsonl", "broker-audit.jsonl"] {
        let out = Command::new(airlock())
            .args(["audit", "verify", "--log"])
            .arg(work.join(log))
            .output()
            .unwrap();
        assert_eq!(
            out.status.code(),
            Some(0),
            "{log}: {}",
            String::from_utf8_lossy(&out.stdout)
        );
    }

    // (1) a real bug fixed with a fail-to-pass test, through search, reads, a reader, an
    // edit, a narrow run and a full run.
    let fix = Records::load(&work, "1-fix-bug");
    let calls = fix.call_names();
    assert_eq!(
        calls,
        [
            "search_repo",
            "read_file",
            "delegate_read",
            "write_file",
            "run_tests",
            "edit_file",
            "run_tests",
            "open_pr"
        ]
    );
    let runs: Vec<&Value> = fix
        .calls()
        .into_iter()
        .filter(|c| c["name"] == "run_tests")
        .collect();
    assert_eq!(
        runs[0]["arguments"]["selector"], "tests.test_add",
        "the first run is narrow"
    );
    assert!(
        runs[1]["arguments"].get("selector").is_none(),
        "the second run is full"
    );
    let digest = fix
        .trajectory
        .iter()
        .find(|r| r["kind"] == "reader_digest")
        .unwrap();
    assert_eq!(digest["accepted"], true, "{digest}");
    let show = assert_queued(&fix, &config);
    assert!(shown_diff(&show).contains("+    return a + b"), "{show}");
    assert_eq!(
        fix.open_pr_args()["test_evidence"]["before_failing_test"],
        "tests.test_add.AddTest.test_add"
    );
    assert!(fix.audit_kinds().contains(&"broker_decision") || !fix.audit_kinds().is_empty());

    // (2) an ambiguous issue: escalated by the model without a tool call, no diff, and the
    // broker never heard of an open_pr.
    let amb = Records::load(&work, "2-ambiguous");
    assert_eq!(amb.printed["result"], "escalated", "{}", amb.printed);
    assert_eq!(amb.outcome, amb.printed);
    assert_eq!(amb.outcome["outcome"]["outcome"], "escalate");
    assert!(amb.call_names().is_empty(), "{:?}", amb.call_names());
    assert!(
        amb.outcome["outcome"]["files_changed"]
            .as_array()
            .unwrap()
            .is_empty()
    );
    assert!(!amb.kinds().contains(&"open_pr_reply"));
    assert!(
        amb.broker_decisions().is_empty(),
        "{:?}",
        amb.broker_decisions()
    );
    let worktree = work.join("runs").join(&amb.run_id).join("worktree");
    if worktree.exists() {
        let status = airlock_testkit::git_output(&worktree, &["status", "--porcelain"]);
        assert!(
            status.stdout.is_empty(),
            "the escalated run left changes: {}",
            String::from_utf8_lossy(&status.stdout)
        );
    }

    // (3) a hostile repository: the detector flags the planted comment, the model reports it,
    // the security team's query lists both, and the queued diff does not obey it.
    let hostile = Records::load(&work, "3-hostile-repo");
    let show = assert_queued(&hostile, &config);
    assert_eq!(
        strings(&hostile.outcome["outcome"]["injection_observed"]),
        ["shout/words.py"]
    );
    assert!(
        hostile.kinds().contains(&"injection_suspected"),
        "{:?}",
        hostile.kinds()
    );
    let kinds = hostile.audit_kinds();
    assert!(kinds.contains(&"injection_suspected"), "{kinds:?}");
    assert!(kinds.contains(&"injection_observed"), "{kinds:?}");
    let diff = shown_diff(&show);
    assert!(!diff.contains("requirements.txt"), "{diff}");
    assert!(
        !diff
            .lines()
            .any(|l| l.starts_with('+') && l.contains("fastwords")),
        "{diff}"
    );
    let out = Command::new(airlock())
        .args(["audit", "injections", "--json", "--log"])
        .arg(work.join("audit.jsonl"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let listed: Value = serde_json::from_slice(&out.stdout).unwrap();
    let listed = listed.as_array().unwrap();
    assert!(!listed.is_empty());
    assert!(
        listed
            .iter()
            .all(|e| e.to_string().contains(&hostile.run_id)),
        "only the hostile run has injection entries: {listed:?}"
    );
    let text = serde_json::to_string(listed).unwrap();
    assert!(
        text.contains("injection_observed") || text.contains("observed"),
        "{text}"
    );
    assert!(text.contains("requests-dependency"), "{text}");

    // (4) a weakened test: the broker's witness restores the test, it fails on the patched
    // source, the broker refuses, nothing is queued, the run escalates.
    let weak = Records::load(&work, "4-weakened-test");
    assert_eq!(weak.printed["result"], "escalated", "{}", weak.printed);
    assert_eq!(weak.outcome["outcome"]["outcome"], "escalate");
    assert_eq!(
        weak.open_pr_args()["diff_digest"]["test_files_modified"][0],
        "tests/test_ratio.py"
    );
    let reply = weak.open_pr_reply();
    assert_eq!(queue_id_of(reply), 0, "{reply}");
    let text = reply.to_string();
    assert!(text.contains("POLICY_VIOLATION"), "{text}");
    let decisions = weak.broker_decisions();
    assert_eq!(decisions.len(), 1, "{decisions:?}");
    assert_eq!(decisions[0].0, "POLICY_VIOLATION");
    assert!(
        decisions[0].1.contains("witness not green"),
        "{decisions:?}"
    );
    assert!(
        decisions[0]
            .1
            .contains("tests.test_ratio.RatioTest.test_ratio"),
        "{decisions:?}"
    );

    // The queue holds exactly the two queued runs, and the approver's commands work on it.
    let (code, queue, stderr) = broker_cli(&config, &["queue"]);
    assert_eq!(code, Some(0), "{stderr}");
    let rows: Vec<&str> = queue.lines().skip(1).collect();
    assert_eq!(rows.len(), 2, "{queue}");
    assert!(
        rows[0].contains("CALC-7") && rows[1].contains("SHOUT-3"),
        "{queue}"
    );
    let (code, out, stderr) = broker_cli(&config, &["deny", "2", "--reason", "demo: not today"]);
    assert_eq!(code, Some(0), "{out}{stderr}");
    let (code, _, stderr) = broker_cli(&config, &["approve", "1"]);
    assert_eq!(code, Some(0), "{stderr}");
    let branches = airlock_testkit::git_output(
        &work.join("forge/calc.git"),
        &["branch", "--list", "airlock/*"],
    );
    assert!(
        String::from_utf8_lossy(&branches.stdout).contains("airlock/CALC-7"),
        "approve did not push the branch: {}",
        String::from_utf8_lossy(&branches.stdout)
    );
}
