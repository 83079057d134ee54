//! The triggers end to end, with the real binaries: `airlock webhook` refusing a bad signature
//! and ignoring a replayed delivery across a restart; two `airlock watch` processes on five
//! labelled issues of the mock GitHub, claiming through the real `airlock-broker serve`, so each
//! ready issue runs once, the needs-info one is skipped with its reason and the claim label is
//! posted once per issue; `airlock batch` triaging every issue before its runs.

use crate::run::{Setup, git, setup};
use airlock_testkit::mockgithub::MockForge;
use hmac::{Hmac, Mac};
use serde_json::{Value, json};
use sha2::Sha256;
use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

const SECRET_VAR: &str = "AIRLOCK_IT_WEBHOOK_SECRET";
pub(crate) const SECRET: &str = "it-webhook-secret-4f1";
const FORGE_VAR: &str = "AIRLOCK_IT_TRIGGERS_FORGE_TOKEN";

fn text(out: &Output) -> String {
    format!(
        "status {:?}\nstdout: {}\nstderr: {}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

pub(crate) struct Webhook {
    child: Child,
    pub(crate) addr: String,
    /// Its stdout, line by line.
    lines: std::sync::mpsc::Receiver<String>,
}

impl Drop for Webhook {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start_webhook(state: &Path) -> Webhook {
    start_webhook_with(state, &[])
}

/// `airlock webhook` on an ephemeral loopback port, with `extra` arguments after its own.
pub(crate) fn start_webhook_with(state: &Path, extra: &[std::ffi::OsString]) -> Webhook {
    start_webhook_env(state, extra, &[])
}

/// [`start_webhook_with`], with `envs` set in the webhook's environment.
pub(crate) fn start_webhook_env(
    state: &Path,
    extra: &[std::ffi::OsString],
    envs: &[(&str, &str)],
) -> Webhook {
    let mut child = Command::new(env!("CARGO_BIN_EXE_airlock"))
        .args([
            "webhook",
            "--listen",
            "127.0.0.1:0",
            "--secret-env",
            SECRET_VAR,
        ])
        .arg("--state-dir")
        .arg(state)
        .args(extra)
        .envs(envs.iter().copied())
        .env(SECRET_VAR, SECRET)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stdout = BufReader::new(child.stdout.take().unwrap());
    let (send, lines) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in stdout.lines() {
            let Ok(line) = line else { return };
            if send.send(line).is_err() {
                return;
            }
        }
    });
    let mut stderr = BufReader::new(child.stderr.take().unwrap());
    let mut line = String::new();
    stderr.read_line(&mut line).unwrap();
    let addr = line
        .trim()
        .rsplit(' ')
        .next()
        .filter(|_| line.contains("listening on"))
        .unwrap_or_else(|| panic!("no listening line: {line:?}"))
        .to_owned();
    // The rest of stderr (warnings) is drained so the process never blocks on it.
    std::thread::spawn(move || std::io::copy(&mut stderr, &mut std::io::sink()));
    Webhook { child, addr, lines }
}

impl Webhook {
    /// Wait for a stdout line that starts with `prefix` (every line seen goes into `seen`).
    pub(crate) fn wait_for(&self, prefix: &str, seen: &mut Vec<String>) -> String {
        let deadline = Instant::now() + Duration::from_secs(300);
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) => {
                    seen.push(line.clone());
                    if line.starts_with(prefix) {
                        return line;
                    }
                }
                Err(e) => panic!("no line {prefix:?} ({e}); seen: {seen:#?}"),
            }
        }
    }
}

pub(crate) fn sign(body: &str) -> String {
    let mut mac = Hmac::<Sha256>::new_from_slice(SECRET.as_bytes()).unwrap();
    mac.update(body.as_bytes());
    format!("sha256={}", hex::encode(mac.finalize().into_bytes()))
}

/// POST `body` as GitHub would, with `signature` (none when `None`); the status and body.
pub(crate) fn deliver(
    addr: &str,
    event: &str,
    delivery: &str,
    signature: Option<&str>,
    body: &str,
) -> (u16, String) {
    let mut stream = std::net::TcpStream::connect(addr).unwrap();
    let mut request = format!(
        "POST /webhook HTTP/1.1\r\nHost: {addr}\r\nUser-Agent: GitHub-Hookshot/it\r\n\
         Content-Type: application/json\r\nX-GitHub-Event: {event}\r\n\
         X-GitHub-Delivery: {delivery}\r\nContent-Length: {}\r\nConnection: close\r\n",
        body.len()
    );
    if let Some(sig) = signature {
        request.push_str(&format!("X-Hub-Signature-256: {sig}\r\n"));
    }
    request.push_str("\r\n");
    request.push_str(body);
    stream.write_all(request.as_bytes()).unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    let status: u16 = response
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("{response:?}"));
    let body = response
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_owned())
        .unwrap_or_default();
    (status, body)
}

#[test]
fn a_webhook_refuses_bad_signatures_and_ignores_a_replayed_delivery_after_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("webhook");
    let hook = start_webhook(&state);
    let review = json!({
        "action": "submitted",
        "repository": {"full_name": "acme/calc"},
        "pull_request": {"number": 3, "head": {"ref": "airlock/CALC-7-1"}},
        "review": {"id": 41, "state": "changes_requested", "body": "Rename the helper, please.", "user": {"login": "rev"}},
    })
    .to_string();
    let delivery = "5a1c0de0-0000-4000-8000-000000000001";

    // A signature under another secret, a missing one, one of another body: 401, with why.
    let (status, body) = deliver(
        &hook.addr,
        "pull_request_review",
        delivery,
        Some(&sign("{}")),
        &review,
    );
    assert_eq!(status, 401, "{body}");
    assert!(body.contains("does not match the body"), "{body}");
    let (status, body) = deliver(&hook.addr, "pull_request_review", delivery, None, &review);
    assert_eq!(status, 401, "{body}");
    assert!(body.contains("missing X-Hub-Signature-256"), "{body}");
    let (status, body) = deliver(
        &hook.addr,
        "pull_request_review",
        delivery,
        Some("sha256=00"),
        &review,
    );
    assert_eq!(status, 401, "{body}");
    assert!(body.contains("malformed"), "{body}");
    // The real one: accepted (202) and written to the queue on disk, then carried out: this
    // webhook has no broker configured, so its follow-up fails, saying so.
    let (status, body) = deliver(
        &hook.addr,
        "pull_request_review",
        delivery,
        Some(&sign(&review)),
        &review,
    );
    assert_eq!(status, 202, "{body}");
    assert!(
        body.contains("queued: a follow-up of acme/calc pull #3"),
        "{body}"
    );
    let mut seen = Vec::new();
    let failed = hook.wait_for("acme/calc pull #3 failed", &mut seen);
    assert!(failed.contains("set [broker] socket"), "{failed}");
    let queued: Vec<&String> = seen.iter().filter(|l| l.starts_with("queued: ")).collect();
    assert_eq!(
        queued.len(),
        1,
        "one item queued, none for the refused deliveries: {seen:#?}"
    );

    // Replayed: ignored, nothing queued twice; and still after a restart.
    let (status, body) = deliver(
        &hook.addr,
        "pull_request_review",
        delivery,
        Some(&sign(&review)),
        &review,
    );
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("replay"), "{body}");
    drop(hook);
    let hook = start_webhook(&state);
    let (status, body) = deliver(
        &hook.addr,
        "pull_request_review",
        delivery,
        Some(&sign(&review)),
        &review,
    );
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("replay"), "{body}");
    // GitHub's ping on set-up is answered.
    let ping = r#"{"zen":"Design for failure."}"#;
    let (status, body) = deliver(
        &hook.addr,
        "ping",
        "5a1c0de0-0000-4000-8000-000000000002",
        Some(&sign(ping)),
        ping,
    );
    assert_eq!((status, body.trim()), (200, "pong"));
    let mut seen = Vec::new();
    hook.wait_for(
        "delivery 5a1c0de0-0000-4000-8000-000000000002: 200",
        &mut seen,
    );
    assert!(
        !seen.iter().any(|l| l.starts_with("queued: ")),
        "the replay queued work: {seen:#?}"
    );
}

const READY_BODY: &str = "`calc.ops.add(2, 3)` returns -1; expected 5.";

fn issue_json(n: u64, labels: &[&str], body: &str) -> Value {
    json!({
        "number": n,
        "title": format!("add() returns the wrong sum ({n})"),
        "body": body,
        "labels": labels.iter().map(|l| json!({"name": l})).collect::<Vec<_>>(),
        "user": {"login": "alice"},
        "state": "open",
        "comments": 0,
        "html_url": format!("https://github.com/acme/calc/issues/{n}"),
    })
}

struct World {
    s: Setup,
    api: MockForge,
    airlock_toml: PathBuf,
    broker: Child,
    escalate: PathBuf,
}

impl Drop for World {
    fn drop(&mut self) {
        let _ = self.broker.kill();
        let _ = self.broker.wait();
    }
}

/// Five issues labelled `airlock` on the mock GitHub, #3 also `needs-info`; the real broker
/// with a forge token (it labels claimed issues); an airlock.toml for the workers.
fn world() -> World {
    let s = setup();
    let dir = s.dir.path().to_path_buf();
    git(
        &dir,
        &["clone", "-q", s.repo.to_str().unwrap(), "broker-clone"],
    );
    let api = MockForge::start();
    api.route("/repos/acme/calc", 200, json!({"default_branch": "main"}));
    let mut listed = Vec::new();
    for n in 1..=5 {
        let issue = if n == 3 {
            issue_json(n, &["airlock", "needs-info"], "It is broken somehow.")
        } else {
            issue_json(n, &["airlock", "bug"], READY_BODY)
        };
        api.route(&format!("/repos/acme/calc/issues/{n}"), 200, issue.clone());
        listed.push(issue);
    }
    api.route(
        "/repos/acme/calc/issues?state=open&labels=airlock&per_page=100&page=1",
        200,
        Value::Array(listed),
    );
    let socket = dir.join("broker.sock");
    let airlock_toml = dir.join("airlock.toml");
    std::fs::write(
        &airlock_toml,
        format!(
            "[tests]\ncommand = [\"python3\", \"-m\", \"unittest\", \"-v\"]\n\n\
             [broker]\nsocket = \"{}\"\nrepository = \"acme/calc\"\n\n\
             [github]\napi_url = \"{}\"\nproject_key = \"CALC\"\n\n\
             [paths]\nruns_root = \"runs\"\naudit_log = \"audit.jsonl\"\ncache_dir = \"cache\"\nindex_dir = \"index\"\n",
            socket.display(),
            api.base,
        ),
    )
    .unwrap();
    let broker_toml = dir.join("broker.toml");
    std::fs::write(
        &broker_toml,
        format!(
            "socket = \"{}\"\nstate_db = \"{d}/broker.db\"\nruns_root = \"{d}/runs\"\n\
             audit_log = \"{d}/broker-audit.jsonl\"\nwitness_timeout = \"120s\"\nqueue_max_age = \"7d\"\n\n\
             [repositories.\"acme/calc\"]\nclone = \"{d}/broker-clone\"\nremote = \"origin\"\n\
             forge_token_env = \"{FORGE_VAR}\"\ngithub_api = \"{}\"\nforge_repo = \"acme/calc\"\n",
            socket.display(),
            api.base,
            d = dir.display(),
        ),
    )
    .unwrap();
    let broker = Command::new(crate::e2e::broker())
        .arg("--config")
        .arg(&broker_toml)
        .arg("serve")
        .env(FORGE_VAR, "tok-triggers")
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(dir.join("broker.log")).unwrap())
        .spawn()
        .unwrap();
    crate::e2e::wait_for_socket(&socket, Some(&dir.join("broker.log")));
    // Every run escalates at its first turn: what is tested is who runs what, not the fix.
    let escalate = dir.join("escalate.jsonl");
    let outcome = json!({"outcome": "escalate", "summary": "looked only", "root_cause": "",
        "files_changed": [], "tests_added": [], "test_evidence": {"before": "", "after": ""},
        "also_noticed": [], "injection_observed": [], "confidence": 0.2});
    std::fs::write(&escalate, json!({"text": outcome.to_string()}).to_string()).unwrap();
    World {
        s,
        api,
        airlock_toml,
        broker,
        escalate,
    }
}

#[test]
fn two_watchers_on_five_labelled_issues_run_each_ready_issue_once_and_skip_the_needs_info_one() {
    let w = world();
    let watcher = || {
        Command::new(env!("CARGO_BIN_EXE_airlock"))
            .args([
                "watch",
                "--repo",
                "acme/calc",
                "--label",
                "airlock",
                "--once",
            ])
            .arg("--clone")
            .arg(&w.s.repo)
            .arg("--model")
            .arg(format!("scripted:{}", w.escalate.display()))
            .arg("--config")
            .arg(&w.airlock_toml)
            .current_dir(w.s.dir.path())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    };
    let (a, b) = (watcher(), watcher());
    let (a, b) = (a.wait_with_output().unwrap(), b.wait_with_output().unwrap());
    assert_eq!(a.status.code(), Some(0), "{}", text(&a));
    assert_eq!(b.status.code(), Some(0), "{}", text(&b));
    let lines: Vec<String> = [&a, &b]
        .iter()
        .flat_map(|o| {
            String::from_utf8_lossy(&o.stdout)
                .lines()
                .map(str::to_owned)
                .collect::<Vec<_>>()
        })
        .collect();
    let all = format!("{}\n---\n{}", text(&a), text(&b));
    for n in [1, 2, 4, 5] {
        let ran = lines
            .iter()
            .filter(|l| l.starts_with(&format!("acme/calc#{n} escalated: looked only")))
            .count();
        assert_eq!(ran, 1, "issue {n} ran {ran} times:\n{all}");
    }
    // Each watcher skips the needs-info issue, with the reason, and never claims it.
    let skipped = lines
        .iter()
        .filter(|l| l.as_str() == "acme/calc#3 skipped: needs-info (labelled `needs-info`)")
        .count();
    assert_eq!(skipped, 2, "{all}");
    // The broker labelled each claimed issue once, and only those.
    let mut changes = w.api.label_changes();
    changes.sort();
    assert_eq!(
        changes,
        [1, 2, 4, 5]
            .into_iter()
            .map(|n| ("POST".to_owned(), n, "airlock-claimed".to_owned()))
            .collect::<Vec<_>>(),
        "{all}"
    );
    // Four runs, each with its own run directory and outcome.
    let outcomes = std::fs::read_dir(w.s.dir.path().join("runs"))
        .unwrap()
        .flatten()
        .filter(|e| e.path().join("outcome.json").exists())
        .count();
    assert_eq!(outcomes, 4, "{all}");
}

/// The agent a run's trajectory records.
fn agent_of_run(runs: &Path, line: &str) -> String {
    let run_id = line
        .rsplit_once("[run ")
        .and_then(|(_, r)| r.strip_suffix(']'))
        .unwrap_or_else(|| panic!("no run id in {line:?}"));
    let trajectory = std::fs::read_to_string(runs.join(run_id).join("trajectory.jsonl")).unwrap();
    trajectory
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .find(|e| e["kind"] == "run_started")
        .and_then(|e| e["agent"].as_str().map(str::to_owned))
        .unwrap_or_else(|| panic!("no run_started in {run_id}"))
}

#[test]
fn a_watcher_starts_each_labelled_issue_with_the_agent_its_label_names() {
    let w = world();
    let docs_issue = issue_json(6, &["docs"], READY_BODY);
    w.api
        .route("/repos/acme/calc/issues/6", 200, docs_issue.clone());
    w.api.route(
        "/repos/acme/calc/issues?state=open&labels=docs&per_page=100&page=1",
        200,
        Value::Array(vec![docs_issue]),
    );
    let watch = |config: &Path| {
        Command::new(env!("CARGO_BIN_EXE_airlock"))
            .args(["watch", "--repo", "acme/calc", "--once"])
            .arg("--clone")
            .arg(&w.s.repo)
            .arg("--model")
            .arg(format!("scripted:{}", w.escalate.display()))
            .arg("--config")
            .arg(config)
            .current_dir(w.s.dir.path())
            .output()
            .unwrap()
    };
    let base = std::fs::read_to_string(&w.airlock_toml).unwrap();
    // An agent nothing would start is refused before any issue is looked at.
    let manual = w.s.dir.path().join("manual.toml");
    std::fs::write(
        &manual,
        format!("{base}\n[agent]\ntriggered = [\"docs-writer\"]\n"),
    )
    .unwrap();
    let out = watch(&manual);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("`docs-writer` has `on = \"manual\"`"),
        "{}",
        text(&out)
    );
    assert!(w.api.label_changes().is_empty());

    // The operator's docs agent answers the label `docs`; the issue fixer its own, `airlock`.
    std::fs::write(
        w.s.dir.path().join("docs-agent.toml"),
        "name = \"docs-agent\"\ndescription = \"Fixes the docs.\"\n\
         prompt = \"Fix the docs of {{REPO}} for {{ISSUE_ID}}.\"\n\
         tools = [\"search_repo\", \"read_file\", \"write_file\", \"open_pr\"]\n\
         autonomy = \"draft-pr\"\nmax_iterations = 6\nwrite_allowlist = [\"**/*.md\"]\n\n\
         [trigger]\non = \"issue-labeled\"\nlabel = \"docs\"\n\n\
         [output]\ntool = \"open_pr\"\nchange = \"docs\"\n",
    )
    .unwrap();
    std::fs::write(
        &w.airlock_toml,
        format!("{base}\n[agent]\ntriggered = [\"docs-agent.toml\"]\n"),
    )
    .unwrap();
    let out = watch(&w.airlock_toml);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let runs = w.s.dir.path().join("runs");
    for (n, agent) in [
        (1, "issue-fixer"),
        (2, "issue-fixer"),
        (4, "issue-fixer"),
        (5, "issue-fixer"),
        (6, "docs-agent"),
    ] {
        let line = stdout
            .lines()
            .find(|l| l.starts_with(&format!("acme/calc#{n} escalated: looked only")))
            .unwrap_or_else(|| panic!("issue {n} did not run:\n{}", text(&out)));
        assert_eq!(agent_of_run(&runs, line), agent, "issue {n}: {line}");
    }
    assert!(
        String::from_utf8_lossy(&out.stderr)
            .contains("6 labelled open issue(s): #1 #2 #3 #4 #5 #6"),
        "{}",
        text(&out)
    );
}

#[test]
fn a_merged_pull_request_delivered_by_webhook_runs_the_on_merge_agent_on_its_merge_commit() {
    let w = world();
    let dir = w.s.dir.path();
    std::fs::write(
        dir.join("after-merge.toml"),
        "name = \"after-merge\"\ndescription = \"Keeps the docs in line with merges.\"\n\
         prompt = \"Bring the docs of {{REPO}} in line with {{ISSUE_ID}}.\"\n\
         tools = [\"search_repo\", \"read_file\", \"write_file\", \"open_pr\"]\n\
         autonomy = \"draft-pr\"\nmax_iterations = 6\nwrite_allowlist = [\"**/*.md\"]\n\n\
         [trigger]\non = \"on-merge\"\n\n[output]\ntool = \"open_pr\"\nchange = \"docs\"\n",
    )
    .unwrap();
    let mut toml = std::fs::read_to_string(&w.airlock_toml).unwrap();
    toml.push_str("\n[agent]\ntriggered = [\"after-merge.toml\"]\n");
    std::fs::write(&w.airlock_toml, toml).unwrap();
    w.api.route(
        "/repos/acme/calc/pulls/9",
        200,
        json!({
            "number": 9, "title": "Make add() add", "body": "add() subtracted; now it adds.",
            "user": {"login": "bob"}, "state": "closed", "merged": true,
            "merge_commit_sha": w.s.commit,
            "html_url": "https://github.com/acme/calc/pull/9",
            "base": {"ref": "main", "sha": w.s.commit}, "head": {"ref": "fix-add", "sha": w.s.commit},
        }),
    );
    w.api.route(
        "/repos/acme/calc/pulls/9/files?per_page=100&page=1",
        200,
        json!([{"filename": "calc/ops.py"}]),
    );
    // The run sees the merged pull request as its task, then stops.
    let script = dir.join("after-merge.jsonl");
    let outcome = json!({"outcome": "escalate", "summary": "looked at the merge", "root_cause": "",
        "files_changed": [], "tests_added": [], "test_evidence": {"before": "", "after": ""},
        "also_noticed": [], "injection_observed": [], "confidence": 0.2});
    std::fs::write(
        &script,
        json!({"text": outcome.to_string(), "expect_last_message_contains": [
            "After merged pull request #9: Make add() add",
            "- calc/ops.py",
            "add() subtracted; now it adds."
        ]})
        .to_string(),
    )
    .unwrap();
    let extra: Vec<std::ffi::OsString> = vec![
        "--clone".into(),
        w.s.repo.clone().into(),
        "--model".into(),
        format!("scripted:{}", script.display()).into(),
        "--config".into(),
        w.airlock_toml.clone().into(),
    ];
    let hook = start_webhook_with(&dir.join("webhook"), &extra);
    let event = |merged: bool, head: &str| {
        json!({
            "action": "closed",
            "repository": {"full_name": "acme/calc"},
            "pull_request": {"number": 9, "merged": merged, "head": {"ref": head}},
        })
        .to_string()
    };
    let closed = event(false, "fix-add");
    let (status, body) = deliver(
        &hook.addr,
        "pull_request",
        "d-closed",
        Some(&sign(&closed)),
        &closed,
    );
    assert_eq!(
        (status, body.trim()),
        (200, "ignored: a pull request closed without a merge")
    );
    let ours = event(true, "airlock/CALC-7-1");
    let (status, body) = deliver(
        &hook.addr,
        "pull_request",
        "d-ours",
        Some(&sign(&ours)),
        &ours,
    );
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("its merge starts no agent"), "{body}");
    let merged = event(true, "fix-add");
    let (status, body) = deliver(
        &hook.addr,
        "pull_request",
        "d-merged",
        Some(&sign(&merged)),
        &merged,
    );
    assert_eq!(status, 202, "{body}");
    let mut seen = Vec::new();
    let line = hook.wait_for("merge of acme/calc#9 ", &mut seen);
    assert!(
        line.starts_with("merge of acme/calc#9 escalated: looked at the merge"),
        "{seen:#?}"
    );
    assert_eq!(agent_of_run(&dir.join("runs"), &line), "after-merge");
    // Claimed through the broker like an issue, so two webhooks never run it twice.
    assert_eq!(
        w.api.label_changes(),
        [("POST".to_owned(), 9, "airlock-claimed".to_owned())]
    );
}

#[test]
fn a_batch_triages_every_issue_first_and_runs_the_ready_ones_on_one_pin() {
    let s = setup();
    let dir = s.dir.path();
    let socket = dir.join("broker.sock");
    let _seen = crate::run::broker_stub(&socket);
    let config = dir.join("airlock.toml");
    std::fs::write(
        &config,
        format!(
            "[tests]\ncommand = [\"python3\", \"-m\", \"unittest\", \"-v\"]\n\n[broker]\nsocket = \"{}\"\n\n\
             [paths]\nruns_root = \"runs\"\naudit_log = \"audit.jsonl\"\ncache_dir = \"cache\"\nindex_dir = \"index\"\n",
            socket.display()
        ),
    )
    .unwrap();
    for (name, id, labels, body) in [
        ("one.md", "CALC-1", "[bug]", READY_BODY),
        ("two.md", "CALC-2", "[needs-info]", "Something is off."),
        ("three.md", "CALC-3", "[bug]", READY_BODY),
    ] {
        std::fs::write(
            dir.join(name),
            format!("---\nid: {id}\ntitle: add() is wrong ({id})\nlabels: {labels}\n---\n{body}\n"),
        )
        .unwrap();
    }
    std::fs::write(
        dir.join("issues.txt"),
        "# the batch\none.md\ntwo.md\n\nthree.md\n",
    )
    .unwrap();
    let escalate = dir.join("escalate.jsonl");
    let outcome = json!({"outcome": "escalate", "summary": "looked only", "root_cause": "",
        "files_changed": [], "tests_added": [], "test_evidence": {"before": "", "after": ""},
        "also_noticed": [], "injection_observed": [], "confidence": 0.2});
    std::fs::write(&escalate, json!({"text": outcome.to_string()}).to_string()).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_airlock"))
        .arg("batch")
        .arg("--repo")
        .arg(&s.repo)
        .args(["--commit", "main", "--parallel", "2", "--json"])
        .arg("--issues")
        .arg(dir.join("issues.txt"))
        .arg("--model")
        .arg(format!("scripted:{}", escalate.display()))
        .arg("--config")
        .arg(&config)
        .current_dir(dir)
        .output()
        .unwrap();
    // The worst outcome is an escalation.
    assert_eq!(out.status.code(), Some(3), "{}", text(&out));
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["base_commit"], s.commit);
    assert_eq!(report["exit_code"], 3);
    let issues = report["issues"].as_array().unwrap();
    let summary: Vec<(String, String, String)> = issues
        .iter()
        .map(|i| {
            (
                i["issue_id"].as_str().unwrap_or_default().to_owned(),
                i["triage"]["state"].as_str().unwrap_or_default().to_owned(),
                i["outcome"]["outcome"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned(),
            )
        })
        .collect();
    assert_eq!(
        summary,
        vec![
            ("CALC-1".into(), "ready-for-agent".into(), "ran".into()),
            ("CALC-2".into(), "needs-info".into(), "skipped".into()),
            ("CALC-3".into(), "ready-for-agent".into(), "ran".into()),
        ],
        "{}",
        text(&out)
    );
    assert_eq!(
        issues[1]["outcome"]["triage"]["reason"],
        "labelled `needs-info`"
    );
    // Each ran with its own run and outcome, on the batch's pin.
    let runs: Vec<&str> = [0, 2]
        .iter()
        .map(|i| issues[*i]["outcome"]["run_id"].as_str().unwrap())
        .collect();
    assert_ne!(runs[0], runs[1]);
    for run in runs {
        let outcome: Value = serde_json::from_str(
            &std::fs::read_to_string(dir.join("runs").join(run).join("outcome.json")).unwrap(),
        )
        .unwrap();
        assert_eq!(outcome["base_commit"], s.commit);
        assert_eq!(outcome["result"], "escalated");
    }
    // One mirror for the batch.
    let mirrors = std::fs::read_dir(dir.join("cache"))
        .unwrap()
        .flatten()
        .filter(|e| e.path().is_dir())
        .count();
    assert_eq!(mirrors, 1);
}

#[test]
fn a_labelled_issue_and_a_mention_delivered_by_webhook_are_claimed_and_run_once() {
    let w = world();
    let state = w.s.dir.path().join("webhook");
    let extra: Vec<std::ffi::OsString> = vec![
        "--clone".into(),
        w.s.repo.clone().into(),
        "--model".into(),
        format!("scripted:{}", w.escalate.display()).into(),
        "--config".into(),
        w.airlock_toml.clone().into(),
        "--label".into(),
        "airlock".into(),
        "--parallel".into(),
        "2".into(),
    ];
    let hook = start_webhook_with(&state, &extra);
    let labelled = json!({
        "action": "labeled",
        "repository": {"full_name": "acme/calc"},
        "issue": issue_json(2, &["airlock", "bug"], READY_BODY),
        "label": {"name": "airlock"},
    })
    .to_string();
    let (status, body) = deliver(
        &hook.addr,
        "issues",
        "d-label-2",
        Some(&sign(&labelled)),
        &labelled,
    );
    assert_eq!(status, 202, "{body}");
    let mention = json!({
        "action": "created",
        "repository": {"full_name": "acme/calc"},
        "issue": issue_json(4, &["bug"], READY_BODY),
        "comment": {"body": "@airlock can you take this one?", "user": {"login": "alice", "type": "User"}},
    })
    .to_string();
    let (status, body) = deliver(
        &hook.addr,
        "issue_comment",
        "d-mention-4",
        Some(&sign(&mention)),
        &mention,
    );
    assert_eq!(status, 202, "{body}");
    // GitHub redelivers the label event: nothing more happens.
    let (status, body) = deliver(
        &hook.addr,
        "issues",
        "d-label-2",
        Some(&sign(&labelled)),
        &labelled,
    );
    assert_eq!(status, 200, "{body}");
    let mut seen = Vec::new();
    for n in [2, 4] {
        if !seen
            .iter()
            .any(|l: &String| l.starts_with(&format!("acme/calc#{n} escalated: looked only")))
        {
            hook.wait_for(&format!("acme/calc#{n} escalated: looked only"), &mut seen);
        }
    }
    let mut changes = w.api.label_changes();
    changes.sort();
    assert_eq!(
        changes,
        [2, 4]
            .into_iter()
            .map(|n| ("POST".to_owned(), n, "airlock-claimed".to_owned()))
            .collect::<Vec<_>>(),
        "{seen:#?}"
    );
}

#[test]
fn a_watcher_killed_mid_run_loses_its_claim_at_lease_expiry_and_another_takes_the_issue() {
    let w = world();
    // The first watcher's model never answers: it is killed while its run waits on it.
    let hanging = airlock_testkit::mockmodel::MockModel::start(vec![json!({
        "delay_ms": 600_000,
        "text": "never seen"
    })]);
    let watcher = |model: String| {
        Command::new(env!("CARGO_BIN_EXE_airlock"))
            .args([
                "watch",
                "--repo",
                "acme/calc",
                "--label",
                "airlock",
                "--once",
            ])
            .args(["--lease", "3s"])
            .arg("--clone")
            .arg(&w.s.repo)
            .arg("--model")
            .arg(model)
            .arg("--config")
            .arg(&w.airlock_toml)
            .current_dir(w.s.dir.path())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    };
    let mut first = watcher(hanging.spec("gpt-test"));
    // Wait until it holds issue #1 (its label is on) and its run is waiting on the model.
    let deadline = Instant::now() + Duration::from_secs(300);
    while hanging.requests().is_empty() {
        assert!(
            Instant::now() < deadline,
            "the first watcher never reached its model; labels: {:?}",
            w.api.label_changes()
        );
        assert!(
            first.try_wait().unwrap().is_none(),
            "the first watcher ended"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(
        w.api.label_changes(),
        vec![("POST".to_owned(), 1, "airlock-claimed".to_owned())]
    );
    first.kill().unwrap(); // SIGKILL: no release, no clean-up
    first.wait().unwrap();

    // Another watcher finds #1 claimed until the dead one's lease lapses, then runs it.
    let escalate = format!("scripted:{}", w.escalate.display());
    let mut seen = Vec::new();
    loop {
        let out = watcher(escalate.clone()).wait_with_output().unwrap();
        assert_eq!(out.status.code(), Some(0), "{}", text(&out));
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        seen.push(stdout.clone());
        if stdout
            .lines()
            .any(|l| l.starts_with("acme/calc#1 escalated: looked only"))
        {
            break;
        }
        assert!(
            stdout
                .lines()
                .any(|l| l.starts_with("acme/calc#1 claimed elsewhere: held by watch-")),
            "{seen:#?}"
        );
        assert!(
            Instant::now() < deadline,
            "#1 was never taken over: {seen:#?}"
        );
        std::thread::sleep(Duration::from_millis(500));
    }
    // Claimed twice: by the dead watcher, then by the one that took it over.
    let ones = w
        .api
        .label_changes()
        .into_iter()
        .filter(|(_, n, _)| *n == 1)
        .count();
    assert_eq!(ones, 2, "{seen:#?}");
}

/// Deliveries the webhook accepted (202) survive a kill -9: they are on disk before the answer,
/// and the next start carries them out, the one that was running included (its dead holder's
/// claim lapses after one lease, then it is taken again). Every claim change is in the
/// broker's audit log.
#[test]
fn a_webhook_killed_mid_work_loses_no_accepted_delivery() {
    let w = world();
    let state = w.s.dir.path().join("webhook");
    let extra: Vec<std::ffi::OsString> = vec![
        "--clone".into(),
        w.s.repo.clone().into(),
        "--model".into(),
        format!("scripted:{}", w.escalate.display()).into(),
        "--config".into(),
        w.airlock_toml.clone().into(),
        "--lease".into(),
        "3s".into(),
    ];
    let hook = start_webhook_with(&state, &extra);
    for n in [2, 4, 5] {
        let labelled = json!({
            "action": "labeled",
            "repository": {"full_name": "acme/calc"},
            "issue": issue_json(n, &["airlock", "bug"], READY_BODY),
            "label": {"name": "airlock"},
        })
        .to_string();
        let (status, body) = deliver(
            &hook.addr,
            "issues",
            &format!("d-kill-{n}"),
            Some(&sign(&labelled)),
            &labelled,
        );
        assert_eq!(status, 202, "{body}");
    }
    // kill -9 while the first run is going (one worker: the others wait in the queue).
    drop(hook);
    let hook = start_webhook_with(&state, &extra);
    let mut seen = Vec::new();
    let mut ended = std::collections::BTreeSet::new();
    while ended.len() < 3 {
        let line = hook.wait_for("acme/calc#", &mut seen);
        let n: u64 = line["acme/calc#".len()..]
            .split(' ')
            .next()
            .and_then(|n| n.parse().ok())
            .unwrap();
        if line.contains("escalated: looked only") || line.contains("claimed elsewhere: done") {
            ended.insert(n);
        } else {
            assert!(
                line.contains("claimed elsewhere: held"),
                "{line}\n{seen:#?}"
            );
        }
    }
    assert_eq!(ended.into_iter().collect::<Vec<_>>(), vec![2, 4, 5]);
    let queue: Vec<_> = std::fs::read_dir(state.join("queue"))
        .unwrap()
        .flatten()
        .filter(|e| e.path().extension().is_some_and(|x| x == "json"))
        .collect();
    assert!(queue.is_empty(), "nothing left waiting: {queue:?}");
    let audit = std::fs::read_to_string(w.s.dir.path().join("broker-audit.jsonl")).unwrap();
    let claims: Vec<Value> = audit
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|r| r["kind"] == "claim")
        .collect();
    for n in [2, 4, 5] {
        let of = |change: &str| {
            claims
                .iter()
                .filter(|r| r["payload"]["issue_number"] == n && r["payload"]["change"] == change)
                .count()
        };
        assert!(of("acquired") >= 1, "#{n}: {claims:#?}");
        assert_eq!(of("done"), 1, "#{n} is done once: {claims:#?}");
    }
}

/// `airlock watch --enqueue` feeds the broker's shared work queue instead of running: the
/// ready issues are queued (the needs-info one skipped with its reason), nothing runs on the
/// watcher's host, and two `airlock worker` processes then run each queued issue once.
#[test]
fn a_watcher_that_enqueues_feeds_the_shared_queue_and_two_workers_run_each_issue_once() {
    let w = world();
    let broker_toml = w.s.dir.path().join("broker.toml");
    let watch = Command::new(env!("CARGO_BIN_EXE_airlock"))
        .args(["watch", "--repo", "acme/calc", "--label", "airlock"])
        .args(["--once", "--enqueue"])
        .arg("--config")
        .arg(&w.airlock_toml)
        .current_dir(w.s.dir.path())
        .output()
        .unwrap();
    assert_eq!(watch.status.code(), Some(0), "{}", text(&watch));
    let stdout = String::from_utf8_lossy(&watch.stdout);
    assert!(
        stdout.contains(
            "queued for the workers: acme/calc#1 acme/calc#2 acme/calc#4 acme/calc#5 (4 new)"
        ),
        "{}",
        text(&watch)
    );
    assert!(
        stdout.contains("acme/calc#3 skipped: needs-info (labelled `needs-info`)"),
        "{}",
        text(&watch)
    );
    assert!(
        !w.s.dir.path().join("runs").exists(),
        "the watcher ran something"
    );
    assert!(
        w.api.label_changes().is_empty(),
        "a queued issue is not claimed yet"
    );
    assert_eq!(
        crate::many_hosts::work_list(&broker_toml),
        [1, 2, 4, 5]
            .into_iter()
            .map(|n| (n, 0, "ready".to_owned()))
            .collect::<Vec<_>>()
    );

    let worker = || {
        Command::new(env!("CARGO_BIN_EXE_airlock"))
            .args(["worker", "--repo", "acme/calc", "--once"])
            .arg("--clone")
            .arg(&w.s.repo)
            .arg("--model")
            .arg(format!("scripted:{}", w.escalate.display()))
            .arg("--config")
            .arg(&w.airlock_toml)
            .current_dir(w.s.dir.path())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    };
    let (a, b) = (worker(), worker());
    let (a, b) = (a.wait_with_output().unwrap(), b.wait_with_output().unwrap());
    assert_eq!(a.status.code(), Some(0), "{}", text(&a));
    assert_eq!(b.status.code(), Some(0), "{}", text(&b));
    let all = format!("{}\n---\n{}", text(&a), text(&b));
    for n in [1, 2, 4, 5] {
        let ran = all
            .lines()
            .map(|l| l.trim_start_matches("stdout: "))
            .filter(|l| l.starts_with(&format!("acme/calc#{n} escalated: looked only")))
            .count();
        assert_eq!(ran, 1, "issue {n} ran {ran} times:\n{all}");
    }
    assert!(!all.contains("acme/calc#3"), "{all}");
    let mut changes = w.api.label_changes();
    changes.sort();
    assert_eq!(
        changes,
        [1, 2, 4, 5]
            .into_iter()
            .map(|n| ("POST".to_owned(), n, "airlock-claimed".to_owned()))
            .collect::<Vec<_>>(),
        "{all}"
    );
    assert!(
        crate::many_hosts::work_list(&broker_toml)
            .iter()
            .all(|(_, attempts, state)| *attempts == 1 && state == "done")
    );
}
