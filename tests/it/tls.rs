//! `airlock run` against a broker on "another host": the real supervisor reaches the real
//! `airlock-broker serve` only through its TLS listener (`[broker] url = "tls://..."` with the
//! worker's certificate; no socket in airlock.toml), and its pull request is queued there. The
//! two share this machine's filesystem, so the broker reads the run's worktree as it does from
//! a local run.

use crate::run::{ISSUE, fix_turns, git, setup};
use airlock_testkit::tls::Pki;
use serde_json::Value;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

struct Broker(Child);

impl Drop for Broker {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn a_run_whose_broker_is_a_tls_url_gets_its_pull_request_queued_through_the_tls_listener() {
    let s = setup();
    let dir = s.dir.path().to_path_buf();
    git(
        &dir,
        &["clone", "-q", s.repo.to_str().unwrap(), "broker-clone"],
    );
    let pki = Pki::create(&dir.join("tls"));
    let broker_toml = dir.join("broker.toml");
    std::fs::write(
        &broker_toml,
        format!(
            "socket = \"{d}/broker.sock\"\nlisten = \"127.0.0.1:0\"\nstate_db = \"{d}/broker.db\"\n\
             runs_root = \"{d}/runs\"\naudit_log = \"{d}/broker-audit.jsonl\"\n\
             witness_timeout = \"120s\"\nqueue_max_age = \"7d\"\n\n\
             [tls]\ncert = \"{}\"\nkey = \"{}\"\nclient_ca = \"{}\"\n\n\
             [repositories.\"acme/calc\"]\nclone = \"{d}/broker-clone\"\nremote = \"origin\"\n",
            pki.server_cert.display(),
            pki.server_key.display(),
            pki.ca.display(),
            d = dir.display(),
        ),
    )
    .unwrap();
    let log = dir.join("broker.log");
    let _broker = Broker(
        Command::new(crate::e2e::broker())
            .arg("--config")
            .arg(&broker_toml)
            .arg("serve")
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .unwrap(),
    );
    let start = Instant::now();
    let address = loop {
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        if let Some(rest) = text
            .lines()
            .find_map(|l| l.strip_prefix("airlock-broker: listening on tls://"))
        {
            break rest.split_whitespace().next().unwrap().to_owned();
        }
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "no TLS listener: {text}"
        );
        std::thread::sleep(Duration::from_millis(50));
    };

    let airlock_toml = dir.join("airlock.toml");
    std::fs::write(
        &airlock_toml,
        format!(
            "[tests]\ncommand = [\"python3\", \"-m\", \"unittest\", \"-v\"]\n\n\
             [broker]\nurl = \"tls://{address}\"\ntls_ca = \"tls/ca.pem\"\n\
             tls_cert = \"tls/worker.pem\"\ntls_key = \"tls/worker.key\"\nrepository = \"acme/calc\"\n\n\
             [paths]\nruns_root = \"runs\"\naudit_log = \"audit.jsonl\"\ncache_dir = \"cache\"\nindex_dir = \"index\"\n",
        ),
    )
    .unwrap();
    let issue = dir.join("issue.md");
    std::fs::write(&issue, ISSUE).unwrap();
    let script = dir.join("script.jsonl");
    let turns: Vec<String> = fix_turns(&s).iter().map(Value::to_string).collect();
    std::fs::write(&script, turns.join("\n")).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_airlock"))
        .args([
            "run",
            "--repo",
            s.repo.to_str().unwrap(),
            "--commit",
            "main",
        ])
        .arg("--issue")
        .arg(&issue)
        .arg("--model")
        .arg(format!("scripted:{}", script.display()))
        .arg("--config")
        .arg(&airlock_toml)
        .arg("--json")
        .output()
        .unwrap();
    let shown = format!(
        "stdout: {}\nstderr: {}\nbroker: {}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
        std::fs::read_to_string(&log).unwrap_or_default()
    );
    assert_eq!(out.status.code(), Some(0), "{shown}");
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["result"], "pr_queued", "{shown}");

    // The broker queued it, and every connection of the run was the worker's certificate.
    let queue = Command::new(crate::e2e::broker())
        .arg("--config")
        .arg(&broker_toml)
        .args(["queue", "--json"])
        .output()
        .unwrap();
    let rows: Value = serde_json::from_slice(&queue.stdout).unwrap();
    let rows = rows.as_array().unwrap();
    assert_eq!(rows.len(), 1, "{rows:?}");
    assert_eq!(rows[0]["issue_id"], "CALC-7", "{rows:?}");
    let text = std::fs::read_to_string(&log).unwrap();
    let connections = text
        .lines()
        .filter(|l| {
            l.contains("tls connection from 127.0.0.1:")
                && l.ends_with(": CN=worker-7.test, O=airlock tests")
        })
        .count();
    assert!(
        connections >= 2,
        "register_run and open_pr over TLS: {text}"
    );
}
