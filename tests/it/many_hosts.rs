//! Beyond one machine, end to end with the real binaries: `airlock worker` takes issues from
//! the broker's shared work queue (`airlock-broker work add`), and a run whose worktree the
//! broker cannot read (`[broker] tree = "bytes"`, its runs root elsewhere) still gets its pull
//! request queued: the change travels as a git patch and the broker rebuilds and witnesses the
//! tree itself.

use crate::run::{Setup, fix_turns, git, setup};
use airlock_testkit::mockgithub::MockForge;
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

pub(crate) fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// An issue of the mock GitHub, ready for the agent.
pub(crate) fn ready_issue(n: u64) -> Value {
    json!({
        "number": n,
        "title": format!("add() returns the wrong sum ({n})"),
        "body": "`calc.ops.add(2, 3)` returns -1; expected 5.",
        "labels": [{"name": "airlock"}, {"name": "bug"}],
        "user": {"login": "alice"},
        "state": "open",
        "comments": 0,
        "html_url": format!("https://github.com/acme/calc/issues/{n}"),
    })
}

pub(crate) struct Broker {
    pub(crate) child: Child,
    pub(crate) config: PathBuf,
}

impl Drop for Broker {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `airlock-broker --config CONFIG ARGS`.
pub(crate) fn broker_cli(config: &Path, args: &[&str]) -> Output {
    Command::new(crate::e2e::broker())
        .arg("--config")
        .arg(config)
        .args(args)
        .env("AIRLOCK_REVIEWER", "operator")
        .output()
        .unwrap()
}

/// The work queue as `work list --json` prints it: (issue number, attempts, claim state).
pub(crate) fn work_list(config: &Path) -> Vec<(u64, u64, String)> {
    let out = broker_cli(config, &["work", "list", "--json"]);
    assert!(out.status.success(), "{}", text(&out));
    let entries: Vec<Value> = serde_json::from_slice(&out.stdout).unwrap();
    entries
        .iter()
        .map(|e| {
            (
                e["issue"]["issue_number"].as_u64().unwrap(),
                e["attempts"].as_u64().unwrap(),
                e["claim"]["state"].as_str().unwrap_or("ready").to_owned(),
            )
        })
        .collect()
}

#[test]
fn a_worker_takes_a_queued_issue_and_its_change_reaches_the_broker_as_bytes() {
    let s: Setup = setup();
    let dir = s.dir.path().to_path_buf();
    git(
        &dir,
        &["clone", "-q", s.repo.to_str().unwrap(), "broker-clone"],
    );
    let api = MockForge::start();
    api.route("/repos/acme/calc", 200, json!({"default_branch": "main"}));
    api.route("/repos/acme/calc/issues/7", 200, ready_issue(7));
    // The broker's runs root is empty: nothing of the worker's is under it.
    std::fs::create_dir_all(dir.join("broker-runs")).unwrap();
    let socket = dir.join("broker.sock");
    let broker_toml = dir.join("broker.toml");
    std::fs::write(
        &broker_toml,
        format!(
            "socket = \"{}\"\nstate_db = \"{d}/broker.db\"\nruns_root = \"{d}/broker-runs\"\n\
             audit_log = \"{d}/broker-audit.jsonl\"\nwitness_timeout = \"120s\"\nqueue_max_age = \"7d\"\n\n\
             [repositories.\"acme/calc\"]\nclone = \"{d}/broker-clone\"\nremote = \"origin\"\n",
            socket.display(),
            d = dir.display(),
        ),
    )
    .unwrap();
    let airlock_toml = dir.join("airlock.toml");
    std::fs::write(
        &airlock_toml,
        format!(
            "[tests]\ncommand = [\"python3\", \"-m\", \"unittest\", \"-v\"]\n\n\
             [broker]\nrepository = \"acme/calc\"\ntree = \"bytes\"\n\n\
             [github]\napi_url = \"{}\"\nproject_key = \"CALC\"\n\n\
             [paths]\nruns_root = \"worker-runs\"\naudit_log = \"audit.jsonl\"\ncache_dir = \"cache\"\nindex_dir = \"index\"\n",
            api.base,
        ),
    )
    .unwrap();
    let log = dir.join("broker.log");
    let _broker = Broker {
        child: Command::new(crate::e2e::broker())
            .arg("--config")
            .arg(&broker_toml)
            .arg("serve")
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .unwrap(),
        config: broker_toml.clone(),
    };
    let start = Instant::now();
    while !socket.exists() {
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "no broker socket: {}",
            std::fs::read_to_string(&log).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let added = broker_cli(&broker_toml, &["work", "add", "acme/calc", "7"]);
    assert!(added.status.success(), "{}", text(&added));

    let script = dir.join("fix.jsonl");
    let turns: Vec<String> = fix_turns(&s).iter().map(Value::to_string).collect();
    std::fs::write(&script, turns.join("\n")).unwrap();
    let worker = |extra: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_airlock"))
            .args(["worker", "--repo", "acme/calc", "--once"])
            .arg("--broker")
            .arg(format!("unix:{}", socket.display()))
            .arg("--clone")
            .arg(&s.repo)
            .arg("--model")
            .arg(format!("scripted:{}", script.display()))
            .arg("--config")
            .arg(&airlock_toml)
            .args(extra)
            .current_dir(&dir)
            .output()
            .unwrap()
    };
    let out = worker(&[]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.starts_with("acme/calc#7 pull request queued: add now adds [run "),
        "{}\nbroker: {}",
        text(&out),
        std::fs::read_to_string(&log).unwrap_or_default()
    );
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("no ready issue in the queue"),
        "{}",
        text(&out)
    );
    // The run registered bytes, and its worktree was never under the broker's runs root.
    assert_eq!(
        std::fs::read_dir(dir.join("broker-runs")).unwrap().count(),
        0
    );
    let queue = broker_cli(&broker_toml, &["queue", "--json"]);
    let rows: Vec<Value> = serde_json::from_slice(&queue.stdout).unwrap();
    assert_eq!(rows.len(), 1, "{}", text(&queue));
    let shown = broker_cli(&broker_toml, &["show", "1", "--json"]);
    let item: Value = serde_json::from_slice(&shown.stdout).unwrap();
    let diff = item["diff"].as_str().unwrap();
    assert!(diff.contains("+    return a + b"), "{diff}");
    assert!(diff.contains("tests/test_add.py"), "{diff}");
    // The witness ran on the tree the broker rebuilt: green, the new test failing at the pin.
    let witness = item["witness"].as_array().unwrap();
    assert!(!witness.is_empty(), "{item}");
    assert!(item["witness"].to_string().contains("test_add"), "{item}");
    // The issue is done: another worker finds nothing to take.
    assert_eq!(work_list(&broker_toml), vec![(7, 1, "done".to_owned())]);
    let again = worker(&[]);
    assert_eq!(again.status.code(), Some(0), "{}", text(&again));
    assert_eq!(String::from_utf8_lossy(&again.stdout), "");

    // A worker pointed at no broker says so.
    let bad = Command::new(env!("CARGO_BIN_EXE_airlock"))
        .args([
            "worker",
            "--repo",
            "acme/calc",
            "--once",
            "--broker",
            "http://x",
        ])
        .arg("--config")
        .arg(&airlock_toml)
        .current_dir(&dir)
        .output()
        .unwrap();
    assert_eq!(bad.status.code(), Some(2), "{}", text(&bad));
    assert!(text(&bad).contains("--broker"), "{}", text(&bad));
}
