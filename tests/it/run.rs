//! `airlock run` end to end: the real binary, the scripted model, a repository the test creates,
//! a broker stub on a Unix socket (the broker binary is tested by its own crate), and the real
//! sandboxed reader worker.

pub(crate) use airlock_testkit::git;
use serde_json::{Value, json};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, Mutex};

const OPS_PY: &str = "def add(a, b):\n    return a - b\n\n\ndef mul(a, b):\n    return a * b\n";
const NEW_TEST: &str = "import unittest\n\nfrom calc.ops import add\n\n\nclass AddTest(unittest.TestCase):\n    def test_add(self):\n        self.assertEqual(add(2, 3), 5)\n";

pub(crate) struct Setup {
    pub(crate) dir: tempfile::TempDir,
    pub(crate) repo: PathBuf,
    pub(crate) commit: String,
}

const TEST_MUL_PY: &str = "import unittest\n\nfrom calc.ops import mul\n\n\nclass MulTest(unittest.TestCase):\n    def test_mul(self):\n        self.assertEqual(mul(2, 3), 6)\n";

pub(crate) fn setup() -> Setup {
    let dir = tempfile::tempdir().unwrap();
    let repo = dir.path().join("repo");
    for (path, text) in [
        ("calc/__init__.py", ""),
        ("calc/ops.py", OPS_PY),
        ("tests/__init__.py", ""),
        // The base inventory: a full run must see at least one test at the pin.
        ("tests/test_mul.py", TEST_MUL_PY),
    ] {
        airlock_testkit::write(&repo, path, text);
    }
    let commit = airlock_testkit::git::repo_with(&repo, &[]);
    Setup { dir, repo, commit }
}

/// A stub's answer to the check a run makes before it pins (`preflight`): the repository is
/// known and the issue has no open item. `None` for every other request.
pub(crate) fn preflight_reply(req: &Value) -> Option<Value> {
    (req["op"] == "preflight")
        .then(|| json!({"status": "preflight", "repository_known": true, "open_items": []}))
}

/// A broker stub for this test only: answers the preflight and register_run and queues every
/// open_pr (the preflight is not recorded among the requests seen).
pub(crate) fn broker_stub(socket: &Path) -> Arc<Mutex<Vec<Value>>> {
    let listener = std::os::unix::net::UnixListener::bind(socket).unwrap();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let seen2 = seen.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { return };
            let mut line = String::new();
            BufReader::new(&stream).read_line(&mut line).unwrap();
            let req: Value = serde_json::from_str(&line).unwrap();
            if let Some(reply) = preflight_reply(&req) {
                stream.write_all(format!("{reply}\n").as_bytes()).unwrap();
                continue;
            }
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

pub(crate) const ISSUE: &str = "---\nid: CALC-7\ntitle: add() returns the wrong sum\nlabels: [bug]\n---\n`calc.ops.add(2, 3)` returns -1; expected 5.\n";

/// The scripted agent's turns: a reader delegation, a new test, the fix, a full run, open_pr
/// and the final message.
pub(crate) fn fix_turns(s: &Setup) -> Vec<Value> {
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
    vec![
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
    ]
}

/// `airlock run` on CALC-7 with `turns`, `extra` flags after the common ones.
fn run_airlock(s: &Setup, config: &Path, turns: &[Value], extra: &[&str]) -> std::process::Output {
    let issue = s.dir.path().join("issue.md");
    std::fs::write(&issue, ISSUE).unwrap();
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
    airlock_run(s, &issue, &format!("scripted:{}", script.display()))
        .args(extra)
        .arg("--config")
        .arg(config)
        .output()
        .unwrap()
}

/// `airlock run` on the setup's repository at `main` with `issue` and the model `spec`.
fn airlock_run(s: &Setup, issue: &Path, spec: &str) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_airlock"));
    cmd.args([
        "run",
        "--repo",
        s.repo.to_str().unwrap(),
        "--commit",
        "main",
    ])
    .arg("--issue")
    .arg(issue)
    .arg("--model")
    .arg(spec);
    cmd
}

#[test]
fn run_queues_a_pull_request_with_a_sandboxed_reader() {
    let s = setup();
    let socket = s.dir.path().join("broker.sock");
    let seen = broker_stub(&socket);
    let config = write_config(&s, &socket);
    let out = run_airlock(&s, &config, &fix_turns(&s), &[]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        out.status.code(),
        Some(0),
        "stdout: {stdout}\nstderr: {stderr}"
    );
    assert!(stdout.contains("pull request queued"), "{stdout}");
    assert!(
        stdout.ends_with("queue item: 1 (show it with: airlock-broker show 1)\n"),
        "{stdout}"
    );
    assert!(!stderr.contains("warning"), "{stderr}");
    let seen = seen.lock().unwrap();
    assert_eq!(seen[0]["op"], "register_run");
    assert_eq!(seen[0]["run"]["base_commit"], s.commit);
    assert_eq!(seen[1]["op"], "open_pr");
    assert_eq!(seen[1]["args"]["base_commit"], s.commit);
}

#[test]
fn a_sandboxed_reader_reads_a_reference_repository_beside_the_checkout() {
    let s = setup();
    let socket = s.dir.path().join("broker.sock");
    let _seen = broker_stub(&socket);
    let config = write_config(&s, &socket);
    // An exemplar repository, listed in the operator's reference directory.
    let exemplar = s.dir.path().join("exemplar");
    airlock_testkit::git::repo_with(
        &exemplar,
        &[(
            "lib/sum.py",
            "def total(xs):\n    out = 0\n    for x in xs:\n        out += x\n    return out\n",
        )],
    );
    let refs = s.dir.path().join("refs");
    std::fs::create_dir_all(&refs).unwrap();
    std::fs::write(
        refs.join("ex.yml"),
        format!(
            "repo: file://{}\nrationale: How we sum.\n",
            exemplar.display()
        ),
    )
    .unwrap();
    let mut text = std::fs::read_to_string(&config).unwrap();
    text.push_str("\n[reference_repos]\ndir = \"refs\"\n");
    std::fs::write(&config, text).unwrap();
    let target = "@reference/ex/lib/sum.py";
    let digest = json!({"answer": "It adds with +=.", "anchors": [{"path": target, "line_start": 4, "line_end": 4, "claim": "adds"}],
                        "ruled_out": [], "also_noticed": [], "injection_observed": [], "complete": true, "reads_used": 4});
    let read = |path: &str| json!({"name": "read_file", "arguments": {"path": path, "start_line": 1, "end_line": 5}});
    let escalate = json!({"outcome": "escalate", "summary": "compared with the exemplar", "root_cause": "",
        "files_changed": [], "tests_added": [], "test_evidence": {"before": "", "after": ""},
        "also_noticed": [], "injection_observed": [], "confidence": 0.2});
    let turns = [
        call(
            "delegate_read",
            json!({"question": "How does the exemplar sum?", "why": "add() should follow it.", "max_reads": 4, "max_turns": 3}),
        ),
        // The sandboxed reader is refused three paths, then reads the exemplar, granted to it
        // read-only.
        json!({"tool_calls": [read("../outside.txt"), read("/etc/passwd"), read("@reference/ex/lib/nope.py"), read(target)]}),
        json!({"text": digest.to_string(), "expect_contains": ["@reference/ex/lib/sum.py lines 1-5 of 5", "4|         out += x"]}),
        json!({"text": escalate.to_string(), "expect_contains": ["Reader digest", target], "expect_tool_error": false}),
    ];
    let out = run_airlock(&s, &config, &turns, &["--json"]);
    assert_eq!(
        out.status.code(),
        Some(3),
        "stdout: {}\nstderr: {}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let audit = std::fs::read_to_string(s.dir.path().join("audit.jsonl")).unwrap();
    assert!(
        audit
            .lines()
            .any(|l| l.contains("\"file_read\"") && l.contains(target)),
        "the reader's read is in the audit log"
    );
    assert!(!audit.contains("integrity_violation"), "{audit}");
    // `audit show` lists the reader's refused reads with their classes, beside its read.
    let run_id = format!("CALC-7-{}-1", &s.commit[..12]);
    let log = s.dir.path().join("audit.jsonl");
    let show = Command::new(env!("CARGO_BIN_EXE_airlock"))
        .args(["audit", "show", &run_id, "--log", log.to_str().unwrap()])
        .output()
        .unwrap();
    let shown = String::from_utf8_lossy(&show.stdout);
    assert_eq!(show.status.code(), Some(0), "{shown}");
    let refused = shown
        .split("\n\n")
        .find(|part| part.starts_with("reads refused"))
        .unwrap_or_default();
    let rows: Vec<Vec<&str>> = refused
        .lines()
        .skip(2)
        .map(|l| l.split_whitespace().skip(1).collect())
        .collect();
    assert_eq!(
        rows,
        vec![
            vec!["reader#1", "read:parent_segment", "../outside.txt"],
            vec!["reader#1", "read:absolute_path", "/etc/passwd"],
            vec!["reader#1", "read:not_found", "@reference/ex/lib/nope.py"],
        ],
        "{shown}"
    );
}

/// A broker that goes away as a killed one does: it reads the first open_pr, closes the
/// connection without a reply and stops listening; after `away` it listens again (when
/// `comes_back`) and queues the resent request.
fn broker_that_restarts(
    socket: &Path,
    away: std::time::Duration,
    comes_back: bool,
) -> Arc<Mutex<Vec<Value>>> {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let seen2 = seen.clone();
    let socket = socket.to_path_buf();
    let mut listener = Some(std::os::unix::net::UnixListener::bind(&socket).unwrap());
    std::thread::spawn(move || {
        let mut crashed = false;
        loop {
            let Some(l) = listener.as_ref() else { return };
            let Ok(mut stream) = l.accept().map(|(s, _)| s) else {
                return;
            };
            let mut line = String::new();
            BufReader::new(&stream).read_line(&mut line).unwrap();
            let req: Value = serde_json::from_str(&line).unwrap();
            if let Some(reply) = preflight_reply(&req) {
                stream.write_all(format!("{reply}\n").as_bytes()).unwrap();
                continue;
            }
            seen2.lock().unwrap().push(req.clone());
            if req["op"] == "open_pr" && !crashed {
                crashed = true;
                drop(stream);
                drop(listener.take());
                std::fs::remove_file(&socket).unwrap();
                std::thread::sleep(away);
                if !comes_back {
                    return;
                }
                listener = Some(std::os::unix::net::UnixListener::bind(&socket).unwrap());
                continue;
            }
            let reply = match req["op"].as_str() {
                Some("register_run") => {
                    json!({"status": "registered", "run_id": req["run"]["run_id"]})
                }
                _ => json!({"status": "queued", "queue_id": 1}),
            };
            stream.write_all(format!("{reply}\n").as_bytes()).unwrap();
        }
    });
    seen
}

fn with_reconnect(config: &Path, secs: u64) {
    let text = std::fs::read_to_string(config).unwrap();
    let text = text.replace(
        "[broker]\n",
        &format!("[broker]\nreconnect_secs = {secs}\n"),
    );
    std::fs::write(config, text).unwrap();
}

#[test]
fn a_broker_restart_during_open_pr_is_bridged_by_resending_the_same_request() {
    let s = setup();
    let socket = s.dir.path().join("broker.sock");
    let seen = broker_that_restarts(&socket, std::time::Duration::from_millis(1500), true);
    let config = write_config(&s, &socket);
    with_reconnect(&config, 30);
    let out = run_airlock(&s, &config, &fix_turns(&s), &["--json"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    let run_id = doc["run_id"].as_str().unwrap();
    let outcome: Value = serde_json::from_str(
        &std::fs::read_to_string(s.dir.path().join("runs").join(run_id).join("outcome.json"))
            .unwrap(),
    )
    .unwrap();
    assert_eq!(outcome["result"], "pr_queued", "{outcome}");
    let seen = seen.lock().unwrap();
    assert_eq!(
        seen[0]["run"]["reconnect_secs"], 30,
        "the window is registered"
    );
    let sent: Vec<&Value> = seen.iter().filter(|r| r["op"] == "open_pr").collect();
    assert_eq!(sent.len(), 2, "sent once, resent once: {seen:?}");
    assert_eq!(sent[0]["request_id"], sent[1]["request_id"]);
    assert_eq!(sent[0]["args"], sent[1]["args"]);
}

#[test]
fn a_broker_gone_for_the_whole_window_ends_the_run_saying_nothing_was_queued() {
    let s = setup();
    let socket = s.dir.path().join("broker.sock");
    let seen = broker_that_restarts(&socket, std::time::Duration::from_secs(60), false);
    let config = write_config(&s, &socket);
    with_reconnect(&config, 1);
    let out = run_airlock(&s, &config, &fix_turns(&s), &["--json"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_ne!(out.status.code(), Some(0), "{stdout}");
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    let run_id = doc["run_id"].as_str().unwrap();
    let outcome =
        std::fs::read_to_string(s.dir.path().join("runs").join(run_id).join("outcome.json"))
            .unwrap();
    assert!(
        outcome.contains("reconnect window of 1 s") && outcome.contains("nothing is queued"),
        "{outcome}"
    );
    assert_eq!(
        seen.lock()
            .unwrap()
            .iter()
            .filter(|r| r["op"] == "open_pr")
            .count(),
        1
    );
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

#[test]
fn progress_streams_on_stderr_and_quiet_turns_it_off() {
    let s = setup();
    let socket = s.dir.path().join("broker.sock");
    let _requests = broker_stub(&socket);
    let config = write_config(&s, &socket);
    let out = run_airlock(&s, &config, &fix_turns(&s), &[]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains("turn 1 of "),
        "no progress line on stderr: {stderr}"
    );

    let s = setup();
    let socket = s.dir.path().join("broker.sock");
    let _requests = broker_stub(&socket);
    let config = write_config(&s, &socket);
    let out = run_airlock(&s, &config, &fix_turns(&s), &["-q"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(
        !stderr.contains("turn 1 of "),
        "-q still streamed progress: {stderr}"
    );
}

/// `airlock run` against a model endpoint that refuses connections, retrying once.
fn run_against_a_closed_model_port(quiet: bool) -> std::process::Output {
    let s = setup();
    let socket = s.dir.path().join("broker.sock");
    let _requests = broker_stub(&socket);
    let config = write_config(&s, &socket);
    let mut text = std::fs::read_to_string(&config).unwrap();
    text.push_str(
        "\n[model.config]\napi_key_env = \"AIRLOCK_TEST_NO_KEY\"\n\n[model.config.retry]\n\
         max_retries = 1\nbase_delay_ms = 1\nmax_delay_ms = 1\n",
    );
    std::fs::write(&config, text).unwrap();
    let issue = s.dir.path().join("issue.md");
    std::fs::write(&issue, ISSUE).unwrap();
    // A port nothing listens on: bind one, then let it go.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mut cmd = airlock_run(
        &s,
        &issue,
        &format!("openai-compatible:http://127.0.0.1:{port}/v1#m"),
    );
    if quiet {
        cmd.arg("-q");
    }
    cmd.arg("--config")
        .arg(&config)
        .env("AIRLOCK_TEST_NO_KEY", "k")
        .env_remove("RUST_LOG")
        .output()
        .unwrap()
}

#[test]
fn model_retry_warnings_are_logged_on_stderr_unless_quiet() {
    let out = run_against_a_closed_model_port(false);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("retrying model call"),
        "no retry warning: {stderr}"
    );

    let out = run_against_a_closed_model_port(true);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        !stderr.contains("retrying model call"),
        "-q still logged warnings: {stderr}"
    );
    assert!(
        stderr.contains("airlock: error:"),
        "the error itself is still shown: {stderr}"
    );
}

/// The same fix as [`fix_turns`] without the reader delegation, played by an OpenAI-compatible
/// server on loopback: `airlock run` speaks the real chat-completions protocol end to end.
#[test]
fn run_drives_an_openai_compatible_server_to_a_queued_pull_request() {
    let s = setup();
    let socket = s.dir.path().join("broker.sock");
    let seen = broker_stub(&socket);
    let config = write_config(&s, &socket);
    let turns: Vec<Value> = fix_turns(&s).into_iter().skip(3).collect();
    let model = airlock_testkit::mockmodel::MockModel::start(turns);
    let issue = s.dir.path().join("issue.md");
    std::fs::write(&issue, ISSUE).unwrap();
    let out = airlock_run(&s, &issue, &model.spec("gpt-test"))
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
    assert_eq!(seen.lock().unwrap()[1]["op"], "open_pr");

    let bodies = model.bodies();
    assert_eq!(bodies.len(), 5, "one request per turn: {bodies:?}");
    let first = &bodies[0];
    assert_eq!(first["model"], "gpt-test");
    let tools: Vec<&str> = first["tools"]
        .as_array()
        .expect("the request offers tools")
        .iter()
        .filter_map(|t| t["function"]["name"].as_str())
        .collect();
    assert!(
        tools.contains(&"open_pr") && tools.contains(&"edit_file"),
        "{tools:?}"
    );
    assert_eq!(first["messages"][0]["role"], "system");
    // The second request answers the first turn's call by its id, as the protocol wants.
    let messages = bodies[1]["messages"].as_array().unwrap();
    let answer = messages
        .iter()
        .find(|m| m["role"] == "tool")
        .expect("a tool message answers the write_file call");
    assert_eq!(answer["tool_call_id"], "call_1_0");
    let asked = messages
        .iter()
        .find(|m| m["role"] == "assistant")
        .expect("the assistant's call is replayed");
    assert_eq!(asked["tool_calls"][0]["function"]["name"], "write_file");
}

/// With no `--config`, `airlock run` takes `$AIRLOCK_CONFIG`; a config without `[paths]` keeps
/// the run and its audit log in the data directory (`$XDG_DATA_HOME/airlock`), where a later
/// `airlock audit show` finds them without being told. A new commit of a local repository is
/// seen with `--fetch` (the mirror is reused as it is otherwise).
#[test]
fn config_from_the_environment_records_in_the_data_directory_and_fetch_sees_new_commits() {
    let s = setup();
    let socket = s.dir.path().join("broker.sock");
    let seen = broker_stub(&socket);
    let config = s.dir.path().join("conf/airlock.toml");
    std::fs::create_dir_all(config.parent().unwrap()).unwrap();
    std::fs::write(
        &config,
        format!(
            "[tests]\ncommand = [\"python3\", \"-m\", \"unittest\", \"-v\"]\n\n[broker]\nsocket = \"{}\"\n",
            socket.display()
        ),
    )
    .unwrap();
    let data = s.dir.path().join("xdg");
    let issue = s.dir.path().join("issue.md");
    std::fs::write(&issue, ISSUE).unwrap();
    let script = s.dir.path().join("script.jsonl");
    let run = |commit: &str, extra: &[&str], turns: &[Value]| {
        let text: Vec<String> = turns.iter().map(|t| t.to_string()).collect();
        std::fs::write(&script, text.join("\n")).unwrap();
        Command::new(env!("CARGO_BIN_EXE_airlock"))
            .args(["-q", "run", "--repo", s.repo.to_str().unwrap()])
            .args(["--commit", commit, "--issue", issue.to_str().unwrap()])
            .arg("--model")
            .arg(format!("scripted:{}", script.display()))
            .args(extra)
            .current_dir(s.dir.path())
            .env("AIRLOCK_CONFIG", &config)
            .env("XDG_DATA_HOME", &data)
            .env_remove("AIRLOCK_HOME")
            .env_remove("AIRLOCK_AUDIT_LOG")
            .output()
            .unwrap()
    };
    let escalate = [json!({"text": outcome("escalate", 0.3).to_string()})];
    let out = run("main", &[], &escalate);
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert_eq!(
        out.status.code(),
        Some(3),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(seen.lock().unwrap()[0]["op"], "register_run");
    let runs = data.join("airlock/runs");
    let run_id = format!("CALC-7-{}-1", &s.commit[..12]);
    assert!(
        runs.join(&run_id).join("outcome.json").is_file(),
        "{stdout}"
    );
    let show = Command::new(env!("CARGO_BIN_EXE_airlock"))
        .args(["audit", "show", &run_id])
        .current_dir(s.dir.path())
        .env("XDG_DATA_HOME", &data)
        .env_remove("AIRLOCK_HOME")
        .env_remove("AIRLOCK_AUDIT_LOG")
        .env_remove("AIRLOCK_CONFIG")
        .output()
        .unwrap();
    let shown = String::from_utf8_lossy(&show.stdout);
    assert_eq!(
        show.status.code(),
        Some(0),
        "{shown}{}",
        String::from_utf8_lossy(&show.stderr)
    );
    assert!(
        shown.contains("run_started") && shown.contains("run_finished"),
        "{shown}"
    );

    // A commit made after the mirror was taken: not seen without --fetch, pinned with it.
    std::fs::write(s.repo.join("NEWS.md"), "news\n").unwrap();
    let new_commit = airlock_testkit::git::commit_all(&s.repo, "news");
    let out = run(&new_commit, &[], &escalate);
    assert_eq!(
        out.status.code(),
        Some(2),
        "a commit the mirror lacks pinned without --fetch"
    );
    let out = run(&new_commit, &["--fetch"], &escalate);
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert_eq!(
        out.status.code(),
        Some(3),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains(&new_commit), "{stdout}");
}

/// A run that fails after its model calls began still says what they cost.
#[test]
fn a_run_that_fails_after_model_calls_reports_what_they_used() {
    let s = setup();
    let socket = s.dir.path().join("broker.sock");
    let _seen = broker_stub(&socket);
    let config = write_config(&s, &socket);
    let turns = [
        call("search_repo", json!({"query": "add"})),
        json!({"text": "x", "expect_contains": ["text no request holds"]}),
    ];
    let out = run_airlock(&s, &config, &turns, &[]);
    assert_eq!(
        out.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let run_id = format!("CALC-7-{}-1", &s.commit[..12]);
    let outcome: Value = serde_json::from_str(
        &std::fs::read_to_string(s.dir.path().join("runs").join(&run_id).join("outcome.json"))
            .unwrap(),
    )
    .unwrap();
    assert_eq!(outcome["result"], "failed", "{outcome}");
    assert_eq!(outcome["model_usage"]["calls"], 1, "{outcome}");
    assert!(
        outcome["model_usage"]["input_tokens"].as_u64().unwrap() > 0,
        "{outcome}"
    );
}

/// A run that stops on an error after it began still writes `outcome.json` (`result: failed`)
/// and a `run_finished` record, and removes its worktree unless `--keep`.
#[test]
fn a_failed_run_leaves_its_outcome_and_audit_record_and_no_worktree_unless_kept() {
    let s = setup();
    let socket = s.dir.path().join("broker.sock");
    let _seen = broker_stub(&socket);
    let config = write_config(&s, &socket);
    // The scripted model's turn expects text the request does not hold: the model call fails.
    let broken = [json!({"text": "x", "expect_contains": ["text no request holds"]})];
    for keep in [false, true] {
        let extra: &[&str] = if keep { &["--keep"] } else { &[] };
        let out = run_airlock(&s, &config, &broken, extra);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{stderr}");
        assert!(stderr.contains("failed; its outcome:"), "{stderr}");
        // Said once: the cause is not repeated after the run's words.
        assert_eq!(stderr.matches("expectation failed").count(), 1, "{stderr}");
        let runs = s.dir.path().join("runs");
        let run_id = format!("CALC-7-{}-{}", &s.commit[..12], if keep { 2 } else { 1 });
        let outcome: Value = serde_json::from_str(
            &std::fs::read_to_string(runs.join(&run_id).join("outcome.json")).unwrap(),
        )
        .unwrap();
        assert_eq!(outcome["result"], "failed", "{outcome}");
        assert!(
            outcome["error"].as_str().unwrap().contains("model"),
            "{outcome}"
        );
        assert_eq!(
            runs.join(&run_id).join("worktree").exists(),
            keep,
            "worktree kept: {keep}"
        );
        let log = std::fs::read_to_string(s.dir.path().join("audit.jsonl")).unwrap();
        let finished: Vec<Value> = log
            .lines()
            .map(|l| serde_json::from_str::<Value>(l).unwrap())
            .filter(|r| r["run_id"] == run_id.as_str() && r["kind"] == "run_finished")
            .collect();
        assert_eq!(finished.len(), 1, "{log}");
        assert_eq!(finished[0]["payload"]["outcome"], "failed", "{log}");
    }
}

/// With `[tests] network = "proxy"`, a test that reaches for a host the allowlist does not
/// admit is refused by the egress proxy, and the refusal reaches the model (in the test tool's
/// result), the run's trajectory and its audit log.
#[test]
fn a_host_a_test_tried_through_the_proxy_is_shown_to_the_model_and_recorded() {
    let s = setup();
    airlock_testkit::write(
        &s.repo,
        "tests/test_net.py",
        "import unittest, urllib.error, urllib.request\n\n\n\
         class NetTest(unittest.TestCase):\n    def test_fetch(self):\n        \
         try:\n            urllib.request.urlopen('http://blocked.example/data', timeout=10)\n        \
         except urllib.error.HTTPError as e:\n            self.assertEqual(e.code, 403)\n",
    );
    git(&s.repo, &["add", "-A"]);
    git(&s.repo, &["commit", "-q", "-m", "a test that fetches"]);
    let socket = s.dir.path().join("broker.sock");
    let _seen = broker_stub(&socket);
    let config = s.dir.path().join("airlock.toml");
    std::fs::write(
        &config,
        format!(
            "[tests]\ncommand = [\"python3\", \"-m\", \"unittest\", \"-v\"]\nnetwork = \"proxy\"\n\
             allow = [\"127.0.0.1:9\"]\n\n[broker]\nsocket = \"{}\"\n\n\
             [paths]\nruns_root = \"runs\"\naudit_log = \"audit.jsonl\"\ncache_dir = \"cache\"\nindex_dir = \"index\"\n",
            socket.display()
        ),
    )
    .unwrap();
    let escalate = json!({"outcome": "escalate", "summary": "the test needs a host", "root_cause": "",
        "files_changed": [], "tests_added": [], "test_evidence": {"before": "", "after": ""},
        "also_noticed": [], "injection_observed": [], "confidence": 0.2});
    let turns = vec![
        call("run_tests", json!({"selector": "tests.test_net"})),
        json!({"text": escalate.to_string(),
               "expect_contains": "the test tried blocked.example:80, which is not allowed"}),
    ];
    let out = run_airlock(&s, &config, &turns, &[]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    // A scripted turn whose expectation fails ends the run with "expectation failed".
    assert!(
        !stderr.contains("expectation failed"),
        "the model was not shown the refusal: {stderr}"
    );
    let runs: Vec<PathBuf> = std::fs::read_dir(s.dir.path().join("runs"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.join("trajectory.jsonl").exists())
        .collect();
    assert_eq!(runs.len(), 1, "{stderr}");
    let trajectory = std::fs::read_to_string(runs[0].join("trajectory.jsonl")).unwrap();
    let record = trajectory
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .find(|r| r["kind"] == "network_blocked")
        .unwrap_or_else(|| panic!("no network_blocked record: {trajectory}\n{stderr}"));
    assert_eq!(record["blocked"][0]["host"], "blocked.example", "{record}");
    assert_eq!(record["blocked"][0]["port"], 80, "{record}");
    let audit = std::fs::read_to_string(s.dir.path().join("audit.jsonl")).unwrap();
    assert!(
        audit.contains("network_blocked") && audit.contains("blocked.example:80"),
        "{audit}"
    );
}
