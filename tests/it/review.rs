//! The PR reviewer end to end, every part real but GitHub itself: `airlock review --pr URL`
//! reads the pull request from a mock of the REST API on loopback, fetches its commits over
//! smart HTTP from `git http-backend` with the read token, drives the scripted model with the
//! reviewer's tools, and submits the review to the real `airlock-broker serve`, which fetches
//! the pull request itself (with its own token, from the same served repository), recomputes
//! the diff, refuses comments off it, and queues the review; `airlock-broker approve` posts it
//! as a GitHub review with the REST shape, and `deny` ends one without posting anything.

use crate::github::{PUSH_TOKEN, PUSH_VAR, READ_TOKEN, READ_VAR};
use crate::run::{git, setup};
use airlock_testkit::githttp::GitHttpServer;
use airlock_testkit::mockgithub::MockForge;
use serde_json::{Value, json};
use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::{Child, Command, Output};

/// The pull request's change: `add` fixed, and a new caller of it.
const OPS_FIXED: &str = "def add(a, b):\n    return a + b\n\n\ndef mul(a, b):\n    return a * b\n";
const TOTAL_PY: &str = "from calc.ops import add\n\n\ndef total(xs):\n    out = 0\n    for x in xs:\n        out = add(out, x)\n    return out\n";

struct ReviewWorld {
    dir: PathBuf,
    _keep: tempfile::TempDir,
    api: MockForge,
    read_git: GitHttpServer,
    _push_git: GitHttpServer,
    airlock_toml: PathBuf,
    broker_toml: PathBuf,
    socket: PathBuf,
    base: String,
    head: String,
    broker: Child,
}

impl Drop for ReviewWorld {
    fn drop(&mut self) {
        let _ = self.broker.kill();
        let _ = self.broker.wait();
    }
}

fn world() -> ReviewWorld {
    let s = setup();
    let dir = s.dir.path().to_path_buf();
    let base = s.commit.clone();
    // The pull request: a branch with the fix and a new caller.
    git(&s.repo, &["checkout", "-q", "-b", "fix-add"]);
    let head = airlock_testkit::git::commit(
        &s.repo,
        &[("calc/ops.py", OPS_FIXED), ("calc/total.py", TOTAL_PY)],
        "fix add, add total",
    );
    git(&s.repo, &["checkout", "-q", "main"]);
    // The forge's repository, served over HTTP, with GitHub's pull request ref.
    let served = dir.join("served");
    std::fs::create_dir_all(served.join("acme")).unwrap();
    git(
        &served,
        &[
            "clone",
            "-q",
            "--bare",
            s.repo.to_str().unwrap(),
            "acme/calc.git",
        ],
    );
    git(
        &served.join("acme/calc.git"),
        &["update-ref", "refs/pull/1/head", &head],
    );
    // The broker's own clone knows the base branch only: the head reaches it by its fetch.
    git(
        &dir,
        &[
            "clone",
            "-q",
            "--single-branch",
            "--branch",
            "main",
            s.repo.to_str().unwrap(),
            "broker-clone",
        ],
    );
    // One server per credential: the supervisor reads with the read token, the broker with
    // the forge token.
    let read_git = GitHttpServer::start(&served, "x-access-token", READ_TOKEN);
    let push_git = GitHttpServer::start(&served, "x-access-token", PUSH_TOKEN);

    let api = MockForge::start();
    api.route(
        "/repos/acme/calc/pulls/1",
        200,
        json!({
            "number": 1,
            "title": "Fix add() and add total()",
            "body": "add() subtracted; total() sums a list.",
            "user": {"login": "bob"},
            "state": "open",
            "html_url": "https://github.com/acme/calc/pull/1",
            "base": {"ref": "main", "sha": base},
            "head": {"ref": "fix-add", "sha": head},
        }),
    );
    api.route(
        "/repos/acme/calc/pulls/1/files?per_page=100&page=1",
        200,
        json!([{"filename": "calc/ops.py"}, {"filename": "calc/total.py"}]),
    );

    let socket = dir.join("broker.sock");
    let airlock_toml = dir.join("airlock.toml");
    std::fs::write(
        &airlock_toml,
        format!(
            "[broker]\nsocket = \"{}\"\nrepository = \"acme/calc\"\n\n\
             [github]\napi_url = \"{}\"\ntoken_env = \"{READ_VAR}\"\nproject_key = \"CALC\"\n\n\
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
             [repositories.\"acme/calc\"]\nclone = \"{d}/broker-clone\"\nremote = \"{}\"\n\
             forge_token_env = \"{PUSH_VAR}\"\ngithub_api = \"{}\"\nforge_repo = \"acme/calc\"\n\
             base_branch = \"main\"\n",
            socket.display(),
            push_git.url("acme/calc.git"),
            api.base,
            d = dir.display(),
        ),
    )
    .unwrap();
    // The broker reads the pull request and fetches its commits with its own token.
    let broker = Command::new(crate::e2e::broker())
        .arg("--config")
        .arg(&broker_toml)
        .arg("serve")
        .env(PUSH_VAR, PUSH_TOKEN)
        .stdout(std::process::Stdio::null())
        .stderr(std::fs::File::create(dir.join("broker.log")).unwrap())
        .spawn()
        .unwrap();
    crate::e2e::wait_for_socket(&socket, Some(&dir.join("broker.log")));
    ReviewWorld {
        dir,
        _keep: s.dir,
        api,
        read_git,
        _push_git: push_git,
        airlock_toml,
        broker_toml,
        socket,
        base,
        head,
        broker,
    }
}

impl ReviewWorld {
    fn review(&self, turns: &[Value]) -> Output {
        let script = self.dir.join("review-script.jsonl");
        let lines: Vec<String> = turns.iter().map(Value::to_string).collect();
        std::fs::write(&script, lines.join("\n")).unwrap();
        Command::new(env!("CARGO_BIN_EXE_airlock"))
            .arg("review")
            .arg("--pr")
            .arg(format!("{}/acme/calc/pull/1", self.read_git.base))
            .arg("--model")
            .arg(format!("scripted:{}", script.display()))
            .arg("--config")
            .arg(&self.airlock_toml)
            .arg("--json")
            .env(READ_VAR, READ_TOKEN)
            .env_remove(PUSH_VAR)
            .output()
            .unwrap()
    }

    fn broker_cli(&self, args: &[&str], token: Option<&str>) -> Output {
        let mut cmd = Command::new(crate::e2e::broker());
        cmd.arg("--config")
            .arg(&self.broker_toml)
            .args(args)
            .env("AIRLOCK_REVIEWER", "e2e-approver")
            .env_remove(PUSH_VAR);
        if let Some(t) = token {
            cmd.env(PUSH_VAR, t);
        }
        cmd.output().unwrap()
    }

    /// One raw protocol line to the broker's socket, as any client could send it.
    fn send(&self, request: &Value) -> Value {
        let mut stream = std::os::unix::net::UnixStream::connect(&self.socket).unwrap();
        stream.write_all(format!("{request}\n").as_bytes()).unwrap();
        let mut line = String::new();
        BufReader::new(&stream).read_line(&mut line).unwrap();
        serde_json::from_str(&line).unwrap()
    }

    fn submission(&self, run_id: &str, review: &Value) -> Value {
        json!({
            "op": "submit_review",
            "submission": {
                "run_id": run_id,
                "pull": {"owner": "acme", "repo": "calc", "number": 1, "head_sha": self.head},
                "review": review,
            }
        })
    }
}

fn text(out: &Output) -> String {
    format!(
        "status {:?}\nstdout:\n{}\nstderr:\n{}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

fn good_review() -> Value {
    json!({
        "summary": "add() is fixed; total() has no test.",
        "verdict": "request_changes",
        "comments": [
            {"path": "calc/ops.py", "line": 2, "side": "RIGHT", "body": "Right: a + b."},
            {"path": "calc/ops.py", "line": 2, "side": "LEFT", "body": "This subtracted."},
            {"path": "calc/total.py", "line": 4, "side": "RIGHT", "body": "Add a test for total()."}
        ]
    })
}

#[test]
fn a_review_is_queued_shown_approved_and_posted_as_a_github_review() {
    let w = world();
    let mut off_diff = good_review();
    // Line 6 of ops.py (`return a * b`) is beyond the hunk's context.
    off_diff["comments"][1] =
        json!({"path": "calc/ops.py", "line": 6, "side": "RIGHT", "body": "mul?"});
    let turns = [
        // The warm start shows the diff and the code that uses what it touches.
        json!({
            "tool_calls": [{"name": "read_file", "arguments": {"path": "calc/total.py", "start_line": 1, "end_line": 8}}],
            "expect_last_message_contains": ["## The diff", "+    return a + b", "Code that uses what the change touches", "total.py"],
            "expect_tools": ["search_repo", "read_file", "delegate_read", "submit_review"],
        }),
        json!({
            "tool_calls": [{"name": "submit_review", "arguments": off_diff}],
            "expect_contains": "out = add(out, x)",
        }),
        // The supervisor refuses the off-diff comment before the broker sees it.
        json!({
            "tool_calls": [{"name": "submit_review", "arguments": good_review()}],
            "expect_tool_error": true,
            "expect_contains": ["comments[1] on \"calc/ops.py\" line 6 (RIGHT)", "outside the diff's hunks"],
        }),
    ];
    let out = w.review(&turns);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let outcome: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(outcome["result"], "review_queued", "{outcome}");
    assert_eq!(outcome["queue_id"], 1, "{outcome}");
    assert_eq!(outcome["pull"]["head_sha"], w.head.as_str());
    assert_eq!(outcome["intake"]["merge_base"], w.base.as_str());
    // Nothing is posted before a human approves.
    assert!(w.api.posted_reviews().is_empty());

    let show = w.broker_cli(&["show", "1"], None);
    assert!(show.status.success(), "{}", text(&show));
    let shown = String::from_utf8_lossy(&show.stdout);
    for needle in [
        "review of:  acme/calc#1",
        "== review (REQUEST_CHANGES, 3 inline comment(s))",
        "comments[2] calc/total.py:4 (RIGHT)",
        "Add a test for total().",
        "+    return a + b",
    ] {
        assert!(shown.contains(needle), "{needle:?} not in:\n{shown}");
    }

    // Approval without the forge token is refused before anything is posted.
    let refused = w.broker_cli(&["approve", "1"], None);
    assert!(!refused.status.success(), "{}", text(&refused));
    assert!(w.api.posted_reviews().is_empty());

    let approved = w.broker_cli(&["approve", "1"], Some(PUSH_TOKEN));
    assert!(approved.status.success(), "{}", text(&approved));
    let posted = w.api.posted_reviews();
    assert_eq!(posted.len(), 1, "{posted:?}");
    assert_eq!(posted[0].0, "/repos/acme/calc/pulls/1/reviews");
    assert_eq!(
        posted[0].1,
        json!({
            "commit_id": w.head,
            "body": "add() is fixed; total() has no test.",
            "event": "REQUEST_CHANGES",
            "comments": [
                {"path": "calc/ops.py", "line": 2, "side": "RIGHT", "body": "Right: a + b."},
                {"path": "calc/ops.py", "line": 2, "side": "LEFT", "body": "This subtracted."},
                {"path": "calc/total.py", "line": 4, "side": "RIGHT", "body": "Add a test for total()."}
            ]
        })
    );
    // The POST carried the broker's token, never the supervisor's.
    let post = w
        .api
        .requests()
        .into_iter()
        .find(|r| r.method == "POST")
        .unwrap();
    let auth = post
        .headers
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case("authorization"))
        .map(|(_, v)| v.clone());
    assert_eq!(
        auth.as_deref(),
        Some(format!("Bearer {PUSH_TOKEN}").as_str())
    );
    let json = w.broker_cli(&["show", "1", "--json"], None);
    let view: Value = serde_json::from_slice(&json.stdout).unwrap();
    assert_eq!(view["status"], "published", "{view}");
    assert!(
        view["pr_url"]
            .as_str()
            .unwrap()
            .ends_with("/acme/calc/pull/1#pullrequestreview-1"),
        "{view}"
    );
}

#[test]
fn the_broker_refuses_off_diff_comments_and_stale_heads_and_denial_posts_nothing() {
    let w = world();
    // A client that skips the supervisor's check: the broker recomputes the diff itself.
    let mut off = good_review();
    off["comments"][2] =
        json!({"path": "calc/total.py", "line": 40, "side": "RIGHT", "body": "far away"});
    off["comments"]
        .as_array_mut()
        .unwrap()
        .push(json!({"path": "calc/ops.py", "line": 1, "side": "LEFT", "body": "fine, context"}));
    off["comments"]
        .as_array_mut()
        .unwrap()
        .push(json!({"path": "README.md", "line": 1, "side": "RIGHT", "body": "not in the diff"}));
    let reply = w.send(&w.submission("review-run-a", &off));
    assert_eq!(reply["status"], "refused", "{reply}");
    assert_eq!(reply["error"]["code"], "POLICY_VIOLATION", "{reply}");
    assert_eq!(
        reply["error"]["details"]["offending"], "comments[2]",
        "{reply}"
    );
    let message = reply["error"]["message"].as_str().unwrap();
    for needle in [
        "2 comment(s) are not on a line of the pull request's diff",
        "comments[2] on \"calc/total.py\" line 40 (RIGHT)",
        "comments[4] on \"README.md\" line 1 (RIGHT): the diff does not touch this file",
    ] {
        assert!(message.contains(needle), "{needle:?} not in {message}");
    }
    // A schema failure is retryable and names the pointer.
    let reply = w.send(&w.submission(
        "review-run-b",
        &json!({"summary": "x", "verdict": "lgtm", "comments": []}),
    ));
    assert_eq!(reply["error"]["code"], "SCHEMA_INVALID", "{reply}");
    assert!(
        reply["error"]["message"]
            .as_str()
            .unwrap()
            .contains("/verdict"),
        "{reply}"
    );
    // A review of another head than the pull request's is refused.
    let mut stale = w.submission("review-run-c", &good_review());
    stale["submission"]["pull"]["head_sha"] = json!(w.base);
    let reply = w.send(&stale);
    assert_eq!(
        reply["error"]["details"]["rule"], "review_of_the_current_head",
        "{reply}"
    );
    let queue = w.broker_cli(&["queue", "--json"], None);
    let rows: Value = serde_json::from_slice(&queue.stdout).unwrap();
    assert_eq!(rows.as_array().map(Vec::len), Some(0), "{rows}");

    // A valid one is queued, and resent it is the same item.
    let reply = w.send(&w.submission("review-run-d", &good_review()));
    assert_eq!(reply, json!({"status": "queued", "queue_id": 1}));
    let again = w.send(&w.submission("review-run-d", &good_review()));
    assert_eq!(again, reply);
    // Another run's review of the same head is refused while the first stands.
    let twice = w.send(&w.submission("review-run-e", &good_review()));
    assert_eq!(
        twice["error"]["details"]["rule"], "one_review_per_head",
        "{twice}"
    );
    assert!(
        twice["error"]["message"]
            .as_str()
            .unwrap()
            .contains("queue item 1 (queued) already reviews acme/calc#1"),
        "{twice}"
    );
    let denied = w.broker_cli(&["deny", "1", "--reason", "not this time"], None);
    assert!(denied.status.success(), "{}", text(&denied));
    let decision = w.send(&json!({"op": "decision", "run_id": "review-run-d"}));
    assert_eq!(decision["error"]["code"], "APPROVAL_DENIED", "{decision}");
    assert!(w.api.posted_reviews().is_empty());
    let approve = w.broker_cli(&["approve", "1"], Some(PUSH_TOKEN));
    assert!(!approve.status.success(), "{}", text(&approve));
    assert!(w.api.posted_reviews().is_empty());
    // Once the first is denied, the same head may be reviewed again.
    let after = w.send(&w.submission("review-run-f", &good_review()));
    assert_eq!(after, json!({"status": "queued", "queue_id": 2}), "{after}");
}

#[test]
fn a_pull_request_delivered_by_webhook_is_reviewed_by_the_agent_its_trigger_names_once_per_head() {
    use crate::triggers::{deliver, sign, start_webhook_env};
    let w = world();
    // The operator's own reviewer, started by pull requests opened or updated.
    std::fs::write(
        w.dir.join("strict-reviewer.toml"),
        "name = \"strict-reviewer\"\ndescription = \"Reviews strictly.\"\n\
         prompt = \"Review {{PULL}} of {{REPO}} strictly.\"\n\
         tools = [\"search_repo\", \"read_file\", \"submit_review\"]\n\
         autonomy = \"read-only\"\nmax_iterations = 6\n\n[trigger]\non = \"pr-opened\"\n\n\
         [output]\ntool = \"submit_review\"\n",
    )
    .unwrap();
    let mut toml = std::fs::read_to_string(&w.airlock_toml).unwrap();
    toml.push_str("\n[agent]\ntriggered = [\"strict-reviewer.toml\"]\n");
    std::fs::write(&w.airlock_toml, toml).unwrap();
    let script = w.dir.join("hook-review.jsonl");
    let turns = [
        json!({
            "tool_calls": [{"name": "read_file", "arguments": {"path": "calc/total.py", "start_line": 1, "end_line": 8}}],
            "expect_tools": ["search_repo", "read_file", "submit_review"],
        }),
        json!({"tool_calls": [{"name": "submit_review", "arguments": good_review()}]}),
    ];
    let lines: Vec<String> = turns.iter().map(Value::to_string).collect();
    std::fs::write(&script, lines.join("\n")).unwrap();
    let extra: Vec<std::ffi::OsString> = vec![
        // The served repository by its path: `--clone` names a place the read token never
        // goes, and a path needs none.
        "--clone".into(),
        w.dir.join("served/acme/calc.git").into(),
        "--model".into(),
        format!("scripted:{}", script.display()).into(),
        "--config".into(),
        w.airlock_toml.clone().into(),
    ];
    let hook = start_webhook_env(&w.dir.join("webhook"), &extra, &[(READ_VAR, READ_TOKEN)]);
    let event = |action: &str| {
        json!({
            "action": action,
            "repository": {"full_name": "acme/calc"},
            "pull_request": {"number": 1, "head": {"ref": "fix-add", "sha": w.head}},
        })
        .to_string()
    };
    let opened = event("opened");
    let (status, body) = deliver(
        &hook.addr,
        "pull_request",
        "d-pr-1",
        Some(&sign(&opened)),
        &opened,
    );
    assert_eq!(status, 202, "{body}");
    assert!(body.contains("a review of acme/calc pull #1"), "{body}");
    let mut seen = Vec::new();
    let line = hook.wait_for("review of acme/calc#1 ", &mut seen);
    assert!(
        line.starts_with("review of acme/calc#1 review queued: review queued as broker item 1"),
        "{seen:#?}"
    );
    // The run was the operator's agent, with its prompt.
    let run_id = line
        .rsplit_once("[run ")
        .and_then(|(_, r)| r.strip_suffix(']'))
        .unwrap();
    let trajectory =
        std::fs::read_to_string(w.dir.join("runs").join(run_id).join("trajectory.jsonl")).unwrap();
    let started: Value = trajectory
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .find(|e| e.to_string().contains("run_started"))
        .unwrap();
    assert!(
        started
            .to_string()
            .contains("\"agent\":\"strict-reviewer\""),
        "{started}"
    );
    // The same head again (a synchronize without a new commit): reviewed once only.
    let again = event("synchronize");
    let (status, body) = deliver(
        &hook.addr,
        "pull_request",
        "d-pr-2",
        Some(&sign(&again)),
        &again,
    );
    assert_eq!(status, 202, "{body}");
    let line = hook.wait_for("review of acme/calc#1 ", &mut seen);
    assert!(!line.contains("review queued"), "{seen:#?}");
    let queue = w.broker_cli(&["queue", "--json"], None);
    let rows: Value = serde_json::from_slice(&queue.stdout).unwrap();
    assert_eq!(rows.as_array().map(Vec::len), Some(1), "{rows}");
    let audit = std::fs::read_to_string(w.dir.join("broker-audit.jsonl")).unwrap();
    assert!(
        audit.contains("already reviews acme/calc#1"),
        "the second review's refusal is in the broker's audit log"
    );
}
