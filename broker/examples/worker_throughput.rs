//! Issues per minute with 1, 2 and 4 `airlock worker` processes on one broker
//! (`bench/many_hosts.sh`): the broker's state in PostgreSQL (a throwaway server from the
//! machine's PostgreSQL), workers over mutual TLS on loopback, each worker with its own runs,
//! cache and index folders as a separate host would have, a small Python repository, the mock
//! GitHub for the issues, and a scripted model that escalates at its first turn (so what is
//! measured is the harness and the broker: intake, pin, index, warm start, claims, not a
//! model). Each round queues the same number of issues on a fresh database and times from the
//! workers' start until the last one finds the queue empty. The binaries are
//! `$AIRLOCK_BIN` and `$AIRLOCK_BROKER_BIN` (default: the release builds). Figures print to
//! stdout; nothing is asserted.
// A benchmark harness, like a test: a broken fixture stops it.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use airlock_testkit::mockgithub::MockForge;
use airlock_testkit::{git, write};
use serde_json::json;

const ISSUES: u64 = 24;

fn bin(var: &str, name: &str) -> PathBuf {
    std::env::var_os(var).map(PathBuf::from).unwrap_or_else(|| {
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../target/release")
            .join(name)
    })
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn main() {
    let airlock = bin("AIRLOCK_BIN", "airlock");
    let broker_bin = bin("AIRLOCK_BROKER_BIN", "airlock-broker");
    for b in [&airlock, &broker_bin] {
        assert!(b.exists(), "{} is missing: build it first", b.display());
    }
    let (airlock, broker_bin) = (
        airlock.canonicalize().unwrap(),
        broker_bin.canonicalize().unwrap(),
    );
    let cores = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(0);
    println!(
        "machine: {cores} cores; binaries: {}; {ISSUES} issues a round",
        airlock.display()
    );
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let repo = root.join("repo");
    write(&repo, "calc/__init__.py", "");
    write(&repo, "calc/ops.py", "def add(a, b):\n    return a - b\n");
    write(&repo, "tests/__init__.py", "");
    write(
        &repo,
        "tests/test_mul.py",
        "import unittest\n\n\nclass T(unittest.TestCase):\n    def test_t(self):\n        self.assertEqual(1, 1)\n",
    );
    airlock_testkit::git::repo_with(&repo, &[]);
    git(
        root,
        &["clone", "-q", repo.to_str().unwrap(), "broker-clone"],
    );
    let pki = airlock_testkit::tls::Pki::create(&root.join("pki"));
    let api = MockForge::start();
    api.route("/repos/acme/calc", 200, json!({"default_branch": "main"}));
    for n in 1..=ISSUES {
        api.route(
            &format!("/repos/acme/calc/issues/{n}"),
            200,
            json!({"number": n, "title": format!("add() is wrong ({n})"),
                   "body": "`calc.ops.add(2, 3)` returns -1; expected 5.",
                   "labels": [{"name": "airlock"}], "user": {"login": "alice"}, "state": "open",
                   "comments": 0, "html_url": format!("https://github.com/acme/calc/issues/{n}")}),
        );
    }
    let script = root.join("escalate.jsonl");
    let outcome = json!({"outcome": "escalate", "summary": "looked only", "root_cause": "",
        "files_changed": [], "tests_added": [], "test_evidence": {"before": "", "after": ""},
        "also_noticed": [], "injection_observed": [], "confidence": 0.2});
    std::fs::write(&script, json!({"text": outcome.to_string()}).to_string()).unwrap();
    let pg = airlock_testkit::pg::PgServer::start();

    for workers in [1usize, 2, 4] {
        let round = root.join(format!("round-{workers}"));
        std::fs::create_dir_all(round.join("broker-runs")).unwrap();
        let port = free_port();
        let config = round.join("broker.toml");
        std::fs::write(
            &config,
            format!(
                "socket = \"{r}/broker.sock\"\nstate_db = \"{db}\"\nruns_root = \"{r}/broker-runs\"\n\
                 audit_log = \"{r}/audit.jsonl\"\nqueue_max_age = \"7d\"\nlisten = \"127.0.0.1:{port}\"\n\n\
                 [tls]\ncert = \"{}\"\nkey = \"{}\"\nclient_ca = \"{}\"\n\n\
                 [repositories.\"acme/calc\"]\nclone = \"{}/broker-clone\"\nremote = \"origin\"\n",
                pki.server_cert.display(),
                pki.server_key.display(),
                pki.ca.display(),
                root.display(),
                r = round.display(),
                db = pg.database(&format!("throughput_{workers}")),
            ),
        )
        .unwrap();
        let mut broker = Command::new(&broker_bin)
            .arg("--config")
            .arg(&config)
            .arg("serve")
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(round.join("broker.log")).unwrap())
            .spawn()
            .unwrap();
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            std::thread::sleep(Duration::from_millis(50));
        }
        let mut add = Command::new(&broker_bin);
        add.arg("--config")
            .arg(&config)
            .args(["work", "add", "acme/calc"]);
        for n in 1..=ISSUES {
            add.arg(n.to_string());
        }
        assert!(add.output().unwrap().status.success());
        let start = Instant::now();
        let children: Vec<_> = (0..workers)
            .map(|w| {
                let home = round.join(format!("w{w}"));
                std::fs::create_dir_all(&home).unwrap();
                std::fs::write(
                    home.join("airlock.toml"),
                    format!(
                        "[tests]\ncommand = [\"python3\", \"-m\", \"unittest\", \"-v\"]\n\n\
                         [broker]\nurl = \"tls://127.0.0.1:{port}\"\ntls_ca = \"{}\"\ntls_cert = \"{}\"\n\
                         tls_key = \"{}\"\nrepository = \"acme/calc\"\n\n\
                         [github]\napi_url = \"{}\"\nproject_key = \"CALC\"\n\n\
                         [paths]\nruns_root = \"runs\"\naudit_log = \"audit.jsonl\"\ncache_dir = \"cache\"\nindex_dir = \"index\"\n",
                        pki.ca.display(),
                        pki.client_cert.display(),
                        pki.client_key.display(),
                        api.base,
                    ),
                )
                .unwrap();
                Command::new(&airlock)
                    .args(["worker", "--repo", "acme/calc", "--once"])
                    .arg("--clone")
                    .arg(&repo)
                    .arg("--model")
                    .arg(format!("scripted:{}", script.display()))
                    .arg("--config")
                    .arg(home.join("airlock.toml"))
                    .current_dir(&home)
                    .stdout(std::fs::File::create(home.join("out.txt")).unwrap())
                    .stderr(std::fs::File::create(home.join("err.txt")).unwrap())
                    .spawn()
                    .unwrap()
            })
            .collect();
        for mut child in children {
            assert!(child.wait().unwrap().success());
        }
        let took = start.elapsed();
        let ran: usize = (0..workers)
            .map(|w| {
                std::fs::read_to_string(round.join(format!("w{w}/out.txt")))
                    .unwrap()
                    .lines()
                    .filter(|l| l.contains(" escalated: "))
                    .count()
            })
            .sum();
        assert_eq!(ran, ISSUES as usize, "every issue once");
        let _ = broker.kill();
        let _ = broker.wait();
        println!(
            "{workers} worker(s): {ISSUES} issues in {:.1} s, {:.1} issues per minute",
            took.as_secs_f64(),
            ISSUES as f64 * 60.0 / took.as_secs_f64()
        );
    }
}
