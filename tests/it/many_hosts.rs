//! Beyond one machine, end to end with the real binaries: `airlock worker` takes issues from
//! the broker's shared work queue (`airlock-broker work add`), and a run whose worktree the
//! broker cannot read (`[broker] tree = "bytes"`, its runs root elsewhere) still gets its pull
//! request queued: the change travels as a git patch and the broker rebuilds and witnesses the
//! tree itself. Then four workers on four hosts (network namespaces this test makes, joined to
//! the broker's by veth pairs, TLS with client certificates, the broker's state in PostgreSQL)
//! drain fifty issues through a kill -9 of a worker and of the broker: each issue runs to its
//! end exactly once, and a fix made on a worker's host is queued from bytes alone.

use crate::run::{Setup, fix_turns, git, setup};
use airlock_testkit::mockgithub::MockForge;
use serde_json::{Value, json};
use std::path::Path;
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
    work_entries(config)
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

fn work_entries(config: &Path) -> Vec<Value> {
    let out = broker_cli(config, &["work", "list", "--json"]);
    assert!(out.status.success(), "{}", text(&out));
    serde_json::from_slice(&out.stdout).unwrap()
}

/// The issue a held claim of the process `pid` is on (`airlock worker` ids end
/// `-PID-START`).
fn held_by(config: &Path, pid: u32) -> Option<u64> {
    work_entries(config)
        .iter()
        .find(|e| {
            e["claim"]["state"] == "held"
                && e["claim"]["holder"]
                    .as_str()
                    .is_some_and(|h| h.contains(&format!("-{pid}-")))
        })
        .and_then(|e| e["issue"]["issue_number"].as_u64())
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
    };
    crate::e2e::wait_for_socket(&socket, Some(&log));
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

/// Hosts for one test: network namespaces it creates, a hub (the broker's and the forge's
/// host) and one per worker, each worker joined to the hub by a veth pair of its own
/// (`10.77.I.1` on the hub's side, `10.77.I.2` on the worker's). Nothing else can reach them,
/// and they reach nothing else: the workers talk to the broker only over TLS on that link.
pub(crate) struct Hosts {
    pub(crate) hub: String,
    pub(crate) workers: Vec<String>,
}

fn ip(args: &[&str]) {
    let out = Command::new("ip").args(args).output().unwrap_or_else(|e| {
        panic!("this test needs iproute2's `ip` (Debian package iproute2) and root: {e}")
    });
    assert!(
        out.status.success(),
        "ip {} failed (the many-hosts test makes network namespaces: it needs root and \
         CONFIG_NET_NS): {}",
        args.join(" "),
        text(&out)
    );
}

impl Hosts {
    pub(crate) fn create(workers: usize) -> Hosts {
        let tag = std::process::id();
        let hub = format!("airlock-{tag}-hub");
        ip(&["netns", "add", &hub]);
        let mut hosts = Hosts {
            hub: hub.clone(),
            workers: Vec::new(),
        };
        ip(&["-n", &hub, "link", "set", "lo", "up"]);
        for i in 0..workers {
            let name = format!("airlock-{tag}-w{i}");
            ip(&["netns", "add", &name]);
            hosts.workers.push(name.clone());
            ip(&["-n", &name, "link", "set", "lo", "up"]);
            let (hub_end, worker_end) = (format!("vh{i}"), format!("vw{i}"));
            ip(&[
                "link",
                "add",
                &hub_end,
                "netns",
                &hub,
                "type",
                "veth",
                "peer",
                "name",
                &worker_end,
                "netns",
                &name,
            ]);
            ip(&[
                "-n",
                &hub,
                "addr",
                "add",
                &format!("10.77.{i}.1/24"),
                "dev",
                &hub_end,
            ]);
            ip(&[
                "-n",
                &name,
                "addr",
                "add",
                &format!("10.77.{i}.2/24"),
                "dev",
                &worker_end,
            ]);
            ip(&["-n", &hub, "link", "set", &hub_end, "up"]);
            ip(&["-n", &name, "link", "set", &worker_end, "up"]);
        }
        hosts
    }

    /// `program` run on host `ns`.
    pub(crate) fn on(ns: &str, program: &Path) -> Command {
        let mut cmd = Command::new("ip");
        cmd.args(["netns", "exec", ns]).arg(program);
        cmd
    }

    /// Run `f` on a thread that lives in the hub's network namespace (sockets it opens, and
    /// threads it starts, are the hub's).
    pub(crate) fn in_hub<T: Send + 'static>(&self, f: impl FnOnce() -> T + Send + 'static) -> T {
        let path = format!("/run/netns/{}", self.hub);
        std::thread::spawn(move || {
            let ns = std::fs::File::open(&path).unwrap();
            nix::sched::setns(ns, nix::sched::CloneFlags::CLONE_NEWNET).unwrap();
            f()
        })
        .join()
        .unwrap()
    }
}

impl Drop for Hosts {
    fn drop(&mut self) {
        for ns in self.workers.iter().chain(std::iter::once(&self.hub)) {
            let _ = Command::new("ip").args(["netns", "del", ns]).output();
        }
    }
}

/// The drained issues: fifty, numbered from 8 (#7 is the one the scripted fix answers).
const ISSUES: u64 = 50;
const FIRST: u64 = 8;
const WORKERS: usize = 4;

/// `airlock worker` number `i` on its host, its output in its own folder (`out-GEN.txt`).
fn start_worker(hosts: &Hosts, i: usize, generation: usize, s: &Setup, script: &Path) -> Child {
    let home = s.dir.path().join(format!("w{i}"));
    Hosts::on(&hosts.workers[i], Path::new(env!("CARGO_BIN_EXE_airlock")))
        .args([
            "worker",
            "--repo",
            "acme/calc",
            "--lease",
            "6s",
            "--interval",
            "1s",
        ])
        .arg("--clone")
        .arg(&s.repo)
        .arg("--model")
        .arg(format!("scripted:{}", script.display()))
        .arg("--config")
        .arg(home.join("airlock.toml"))
        .current_dir(&home)
        .stdout(std::fs::File::create(home.join(format!("out-{generation}.txt"))).unwrap())
        .stderr(std::fs::File::create(home.join(format!("err-{generation}.txt"))).unwrap())
        .spawn()
        .unwrap()
}

/// The broker on the hub: its Unix socket for the operator's commands on this host, and TLS on
/// port 8643 of every hub address for the workers.
fn start_hub_broker(hosts: &Hosts, config: &Path, log: &Path) -> Child {
    let child = Hosts::on(&hosts.hub, &crate::e2e::broker())
        .arg("--config")
        .arg(config)
        .arg("serve")
        .stdout(Stdio::null())
        .stderr(
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(log)
                .unwrap(),
        )
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    while !hosts.in_hub(|| std::net::TcpStream::connect("10.77.0.1:8643").is_ok()) {
        assert!(
            Instant::now() < deadline,
            "the broker never listened on the hub: {}",
            std::fs::read_to_string(log).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    child
}

#[test]
fn four_workers_on_four_hosts_drain_fifty_issues_once_each_through_a_kill_9_of_a_worker_and_of_the_broker()
 {
    let s = setup();
    let dir = s.dir.path().to_path_buf();
    git(
        &dir,
        &["clone", "-q", s.repo.to_str().unwrap(), "broker-clone"],
    );
    let hosts = Hosts::create(WORKERS);
    let pki = airlock_testkit::tls::Pki::create(&dir.join("pki"));
    let api = hosts.in_hub(|| MockForge::start_on("0.0.0.0:0"));
    let forge_port = api.base.rsplit(':').next().unwrap().to_owned();
    api.route("/repos/acme/calc", 200, json!({"default_branch": "main"}));
    for n in (FIRST..FIRST + ISSUES).chain([7]) {
        api.route(&format!("/repos/acme/calc/issues/{n}"), 200, ready_issue(n));
    }
    std::fs::create_dir_all(dir.join("broker-runs")).unwrap();
    // The broker's state in PostgreSQL, reached over its Unix socket (the hub's network has
    // no route to the server's loopback port).
    let pg = airlock_testkit::pg::PgServer::shared();
    let database = pg.database("many_hosts");
    let database = database.rsplit('/').next().unwrap();
    let state_db = format!(
        "postgres://postgres@{}:{}/{database}",
        pg.socket_dir().display().to_string().replace('/', "%2F"),
        pg.port()
    );
    let broker_toml = dir.join("broker.toml");
    std::fs::write(
        &broker_toml,
        format!(
            "socket = \"{d}/broker.sock\"\nstate_db = \"{state_db}\"\nruns_root = \"{d}/broker-runs\"\n\
             audit_log = \"{d}/broker-audit.jsonl\"\nqueue_max_age = \"7d\"\nlisten = \"0.0.0.0:8643\"\n\n\
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
    let mut broker = start_hub_broker(&hosts, &broker_toml, &log);
    let numbers: Vec<String> = (FIRST..FIRST + ISSUES).map(|n| n.to_string()).collect();
    let mut add = vec!["work", "add", "acme/calc"];
    add.extend(numbers.iter().map(String::as_str));
    let added = broker_cli(&broker_toml, &add);
    assert!(added.status.success(), "{}", text(&added));

    // Every run escalates at its first turn: what is tested is who runs what, not the fix.
    let script = dir.join("escalate.jsonl");
    let outcome = json!({"outcome": "escalate", "summary": "looked only", "root_cause": "",
        "files_changed": [], "tests_added": [], "test_evidence": {"before": "", "after": ""},
        "also_noticed": [], "injection_observed": [], "confidence": 0.2});
    std::fs::write(&script, json!({"text": outcome.to_string()}).to_string()).unwrap();
    for i in 0..WORKERS {
        let home = dir.join(format!("w{i}"));
        std::fs::create_dir_all(&home).unwrap();
        std::fs::write(
            home.join("airlock.toml"),
            format!(
                "[tests]\ncommand = [\"python3\", \"-m\", \"unittest\", \"-v\"]\n\n\
                 [broker]\nurl = \"tls://10.77.{i}.1:8643\"\ntls_ca = \"{}\"\ntls_cert = \"{}\"\n\
                 tls_key = \"{}\"\ntls_server_name = \"localhost\"\nrepository = \"acme/calc\"\n\n\
                 [github]\napi_url = \"http://10.77.{i}.1:{forge_port}\"\nproject_key = \"CALC\"\n\n\
                 [paths]\nruns_root = \"runs\"\naudit_log = \"audit.jsonl\"\ncache_dir = \"cache\"\nindex_dir = \"index\"\n",
                pki.ca.display(),
                pki.client_cert.display(),
                pki.client_key.display(),
            ),
        )
        .unwrap();
    }
    let mut workers: Vec<Child> = (0..WORKERS)
        .map(|i| start_worker(&hosts, i, 0, &s, &script))
        .collect();

    let done = |config: &Path| {
        work_list(config)
            .iter()
            .filter(|(_, _, state)| state == "done")
            .count()
    };
    let deadline = Instant::now() + Duration::from_secs(900);
    let (mut killed_on, mut broker_killed) = (None, false);
    // Worker 0's current process is its generation `w0_generation` (its output files).
    let mut w0_generation = 0;
    loop {
        let finished = done(&broker_toml);
        if finished == ISSUES as usize {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "{finished} of {ISSUES} done; queue: {:?}\nbroker: {}",
            work_list(&broker_toml),
            std::fs::read_to_string(&log).unwrap_or_default()
        );
        let pid = workers[0].id();
        if killed_on.is_none() && finished >= 10 && held_by(&broker_toml, pid).is_some() {
            // kill -9 of a worker in the middle of a run: the issue lapses after one lease and
            // another worker takes it; the worker comes back as a new process. Which issue the
            // kill interrupted is read after it: a dead process's claim stays held until its
            // lease lapses, while the run seen held before the kill may have ended since (then
            // the kill interrupted nothing, or the next issue taken, and is tried again).
            workers[0].kill().unwrap();
            workers[0].wait().unwrap();
            killed_on = held_by(&broker_toml, pid);
            w0_generation += 1;
            workers[0] = start_worker(&hosts, 0, w0_generation, &s, &script);
        }
        if !broker_killed && finished >= 25 {
            // kill -9 of the broker: the workers' requests fail until it is back, and nothing
            // it had recorded is lost.
            broker.kill().unwrap();
            broker.wait().unwrap();
            broker = start_hub_broker(&hosts, &broker_toml, &log);
            broker_killed = true;
        }
        std::thread::sleep(Duration::from_millis(500));
    }
    // The broker records an issue done when its worker releases the claim; the worker prints
    // the run's outcome line just after that reply. The workers are stopped only once the last
    // lines are out (or a minute has passed: then the check below says which one is missing).
    let printed = |generations: usize| {
        let mut lines = Vec::new();
        for i in 0..WORKERS {
            for generation in 0..=if i == 0 { generations } else { 1 } {
                let path = dir.join(format!("w{i}/out-{generation}.txt"));
                if let Ok(out) = std::fs::read_to_string(&path) {
                    lines.extend(out.lines().map(|l| (i, l.to_owned())));
                }
            }
        }
        lines
    };
    let ran_to_the_end = |lines: &[(usize, String)], n: u64| {
        lines
            .iter()
            .filter(|(_, l)| l.starts_with(&format!("acme/calc#{n} escalated: looked only")))
            .count()
    };
    let settled = Instant::now() + Duration::from_secs(60);
    while Instant::now() < settled {
        let lines = printed(w0_generation);
        if (FIRST..FIRST + ISSUES).all(|n| ran_to_the_end(&lines, n) > 0) {
            break;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    for w in &mut workers {
        let _ = w.kill();
        let _ = w.wait();
    }

    // A fix made on worker 1's host: its run's tree goes to the broker as bytes over TLS (a
    // network broker's default), and the broker witnesses the tree it rebuilt.
    let added = broker_cli(&broker_toml, &["work", "add", "acme/calc", "7"]);
    assert!(added.status.success(), "{}", text(&added));
    let fix = dir.join("fix.jsonl");
    let turns: Vec<String> = fix_turns(&s).iter().map(Value::to_string).collect();
    std::fs::write(&fix, turns.join("\n")).unwrap();
    let mut fixer = start_worker(&hosts, 1, 1, &s, &fix);
    let deadline = Instant::now() + Duration::from_secs(300);
    while !work_list(&broker_toml).contains(&(7, 1, "done".to_owned())) {
        assert!(
            Instant::now() < deadline,
            "#7 was not done: {:?}\n{}",
            work_list(&broker_toml),
            std::fs::read_to_string(dir.join("w1/err-1.txt")).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(300));
    }
    let _ = fixer.kill();
    let _ = fixer.wait();
    let fixed = std::fs::read_to_string(dir.join("w1/out-1.txt")).unwrap();
    assert!(
        fixed.starts_with("acme/calc#7 pull request queued: add now adds [run CALC-7-"),
        "{fixed}\n{}",
        std::fs::read_to_string(dir.join("w1/err-1.txt")).unwrap_or_default()
    );
    let shown = broker_cli(&broker_toml, &["show", "1", "--json"]);
    let item: Value = serde_json::from_slice(&shown.stdout).unwrap();
    assert!(
        item["diff"].as_str().unwrap().contains("+    return a + b"),
        "{item}"
    );
    let _ = broker.kill();
    let _ = broker.wait();

    let lines = printed(w0_generation);
    let all = lines
        .iter()
        .map(|(i, l)| format!("w{i}: {l}"))
        .collect::<Vec<_>>()
        .join("\n");
    // Every issue ran to its end exactly once, on one of the hosts.
    for n in FIRST..FIRST + ISSUES {
        let ran = ran_to_the_end(&lines, n);
        assert_eq!(ran, 1, "issue {n} ran to its end {ran} times:\n{all}");
    }
    assert!(
        !all.contains("claim was taken over"),
        "a claim was taken over while its run went on:\n{all}"
    );
    // Each host did some of the work.
    for i in 0..WORKERS {
        assert!(
            lines
                .iter()
                .any(|(w, l)| *w == i && l.contains(" escalated: ")),
            "worker {i} ran nothing:\n{all}"
        );
    }
    // The broker never read a worker's files: its runs root is as it was.
    assert_eq!(
        std::fs::read_dir(dir.join("broker-runs")).unwrap().count(),
        0
    );
    let queue = work_list(&broker_toml);
    assert_eq!(queue.len(), ISSUES as usize + 1);
    assert!(
        queue.iter().all(|(_, _, state)| state == "done"),
        "{queue:?}"
    );
    // The killed worker's issue was taken again (its second attempt) and ran once, elsewhere
    // or on the worker that came back.
    let killed_on = killed_on.expect("the first worker never held an issue to be killed on");
    let attempts = queue.iter().find(|(n, _, _)| *n == killed_on).unwrap().1;
    assert!(attempts >= 2, "issue {killed_on}: {queue:?}");
    assert!(broker_killed);
}
