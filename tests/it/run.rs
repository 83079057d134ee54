//! `airlock run` end to end: the real binary, the scripted model, a repository the test creates,
//! a broker stub on a Unix socket (the broker binary is tested by its own crate), and the real
//! sandboxed reader worker.

use serde_json::{Value, json};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, Mutex};

const OPS_PY: &str = "def add(a, b):\n    return a - b\n\n\ndef mul(a, b):\n    return a * b\n";
const NEW_TEST: &str = "import unittest\n\nfrom calc.ops import add\n\n\nclass AddTest(unittest.TestCase):\n    def test_add(self):\n        self.assertEqual(add(2, 3), 5)\n";

fn git(repo: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .args(args)
        .current_dir(repo)
        .env("GIT_AUTHOR_NAME", "t")
        .env("GIT_AUTHOR_EMAIL", "t@example.com")
        .env("GIT_COMMITTER_NAME", "t")
        .env("GIT_COMMITTER_EMAIL", "t@example.com")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

struct Setup {
    dir: tempfile::TempDir,
    repo: PathBuf,
    commit: String,
}

const TEST_MUL_PY: &str = "import unittest\n\nfrom calc.ops import mul\n\n\nclass MulTest(unittest.TestCase):\n    def test_mul(self):\n        self.assertEqual(mul(2, 3), 6)\n";

fn setup() -> Setup {
    let dir = tempfile::tempdir().unwrap();
    let repo = dir.path().join("repo");
    for (path, text) in [
        ("calc/__init__.py", ""),
        ("calc/ops.py", OPS_PY),
        ("tests/__init__.py", ""),
        // The base inventory: a full run must see at least one test at the pin.
        ("tests/test_mul.py", TEST_MUL_PY),
    ] {
        let p = repo.join(path);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }
    git(&repo, &["init", "-q", "-b", "main"]);
    git(&repo, &["add", "-A"]);
    git(&repo, &["commit", "-q", "-m", "init"]);
    let commit = git(&repo, &["rev-parse", "HEAD"]);
    Setup { dir, repo, commit }
}

/// A broker stub for this test only: answers register_run and queues every open_pr.
fn broker_stub(socket: &Path) -> Arc<Mutex<Vec<Value>>> {
    let listener = std::os::unix::net::UnixListener::bind(socket).unwrap();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let seen2 = seen.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { return };
            let mut line = String::new();
            BufReader::new(&stream).read_line(&mut line).unwrap();
            let req: Value = serde_json::from_str(&line).unwrap();
            let reply = match req["op"].as_str() {
                Some("register_run") => {
                    json!({"status": "registered", "run_id": req["run"]["run_id"]})
                }
                _ => json!({"status": "queued", "queue_id": 1}),
            };
            seen2.lock().unwrap().push(req);
            stream.write_all(format!("{reply}\n").as_bytes()).unwrap();
        }
    });
    seen
}

fn write_config(s: &Setup, socket: &Path) -> PathBuf {
    let p = s.dir.path().join("airlock.toml");
    std::fs::write(
        &p,
        format!(
            "[tests]\ncommand = [\"python3\", \"-m\", \"unittest\", \"-v\"]\n\n[broker]\nsocket = \"{}\"\n\n\
             [paths]\nruns_root = \"runs\"\naudit_log = \"audit.jsonl\"\ncache_dir = \"cache\"\nindex_dir = \"index\"\n",
            socket.display()
        ),
    )
    .unwrap();
    p
}

fn call(name: &str, args: Value) -> Value {
    json!({"tool_calls": [{"name": name, "arguments": args}]})
}

fn outcome(kind: &str, confidence: f64) -> Value {
    json!({"outcome": kind, "summary": "add now adds", "root_cause": "add subtracted",
           "files_changed": ["calc/ops.py", "tests/test_add.py"], "tests_added": ["tests.test_add.AddTest.test_add"],
           "test_evidence": {"before": "AssertionError: -1 != 5", "after": "OK"},
           "also_noticed": [], "injection_observed": [], "confidence": confidence})
}

#[test]
fn run_queues_a_pull_request_with_a_sandboxed_reader() {
    let s = setup();
    let socket = s.dir.path().join("broker.sock");
    let seen = broker_stub(&socket);
    let config = write_config(&s, &socket);
    let issue = s.dir.path().join("issue.md");
    std::fs::write(&issue, "---\nid: CALC-7\ntitle: add() returns the wrong sum\nlabels: [bug]\n---\n`calc.ops.add(2, 3)` returns -1; expected 5.\n").unwrap();
    let digest = json!({"answer": "add returns a - b.", "anchors": [{"path": "calc/ops.py", "line_start": 1, "line_end": 2, "claim": "add subtracts"}],
                        "ruled_out": [], "also_noticed": [], "injection_observed": [], "complete": true, "reads_used": 1});
    let open_pr = json!({
        "issue_id": "CALC-7", "base_commit": s.commit, "title": "fix: add() adds its arguments",
        "body": "add() subtracted. It adds now; tests.test_add covers it.", "scope": "source-plus-new-tests",
        "diff_digest": {"files_changed": ["calc/ops.py", "tests/test_add.py"], "insertions": 9, "deletions": 1,
                        "test_files_added": ["tests/test_add.py"], "test_files_modified": [], "assertions_removed": 0, "skip_markers_added": 0},
        "test_evidence": {"before_selector": "tests.test_add", "before_failing_test": "tests.test_add.AddTest.test_add",
                          "after_full_run": "green", "witness_run": "green"},
        "confidence": 0.8
    });
    let turns = [
        call(
            "delegate_read",
            json!({"question": "What does calc.ops.add return?", "why": "An issue says add is wrong.", "max_reads": 2, "max_turns": 3}),
        ),
        json!({"tool_calls": [{"name": "read_file", "arguments": {"path": "calc/ops.py", "start_line": 1, "end_line": 2}}], "expect_tools": ["read_file"]}),
        json!({"text": digest.to_string(), "expect_contains": "2|     return a - b"}),
        json!({"tool_calls": [{"name": "write_file", "arguments": {"path": "tests/test_add.py", "content": NEW_TEST}}], "expect_contains": "Reader digest"}),
        call(
            "edit_file",
            json!({"path": "calc/ops.py", "old_text": "a - b", "new_text": "a + b"}),
        ),
        call("run_tests", json!({})),
        json!({"tool_calls": [{"name": "open_pr", "arguments": open_pr}], "expect_contains": "full run: green"}),
        json!({"text": outcome("pr", 0.8).to_string(), "expect_contains": "queued"}),
    ];
    let script = s.dir.path().join("script.jsonl");
    std::fs::write(
        &script,
        turns
            .iter()
            .map(|t| t.to_string())
            .collect::<Vec<_>>()
            .join("\n"),
    )
    .unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_airlock"))
        .args([
            "run",
            "--repo",
            s.repo.to_str().unwrap(),
            "--commit",
            "main",
            "--issue",
            issue.to_str().unwrap(),
        ])
        .arg("--model")
        .arg(format!("scripted:{}", script.display()))
        .arg("--config")
        .arg(&config)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        out.status.code(),
        Some(0),
        "stdout: {stdout}\nstderr: {stderr}"
    );
    assert!(stdout.contains("pull request queued"), "{stdout}");
    assert!(!stderr.contains("warning"), "{stderr}");
    let seen = seen.lock().unwrap();
    assert_eq!(seen[0]["op"], "register_run");
    assert_eq!(seen[0]["run"]["base_commit"], s.commit);
    assert_eq!(seen[1]["op"], "open_pr");
    assert_eq!(seen[1]["args"]["base_commit"], s.commit);
}

#[test]
fn run_on_an_issue_that_is_not_ready_exits_4_without_a_model_call() {
    let s = setup();
    let socket = s.dir.path().join("broker.sock");
    let config = write_config(&s, &socket);
    let issue = s.dir.path().join("issue.json");
    std::fs::write(
        &issue,
        r#"{"id": "CALC-1", "title": "Make it nicer", "body": "Could it be nicer?"}"#,
    )
    .unwrap();
    let script = s.dir.path().join("script.jsonl");
    std::fs::write(&script, "{\"text\": \"never played\"}\n").unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_airlock"))
        .args([
            "run",
            "--repo",
            s.repo.to_str().unwrap(),
            "--commit",
            &s.commit,
            "--issue",
            issue.to_str().unwrap(),
            "--json",
        ])
        .arg("--model")
        .arg(format!("scripted:{}", script.display()))
        .arg("--config")
        .arg(&config)
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(4),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["result"], "not_ready");
    assert_eq!(doc["triage"]["state"], "needs-triage");
    assert_eq!(doc["base_commit"], s.commit);
}

#[test]
fn run_with_a_bad_config_names_the_file_and_line_and_exits_2() {
    let s = setup();
    let config = s.dir.path().join("airlock.toml");
    std::fs::write(&config, "[budgets]\nmax_turns = \"lots\"\n").unwrap();
    let issue = s.dir.path().join("issue.json");
    std::fs::write(&issue, r#"{"id": "CALC-1", "title": "t"}"#).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_airlock"))
        .args([
            "run",
            "--repo",
            s.repo.to_str().unwrap(),
            "--commit",
            "main",
            "--issue",
            issue.to_str().unwrap(),
            "--model",
            "scripted:/x",
        ])
        .arg("--config")
        .arg(&config)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("airlock.toml") && stderr.contains("line 2"),
        "{stderr}"
    );
}
