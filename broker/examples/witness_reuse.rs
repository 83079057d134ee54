//! What a queued item costs the broker in test time, in suite-equivalents (the time spent in
//! the witness's test commands divided by one full run of the suite), for the first and a later
//! run at one pin: with the base inventory run by every witness (each intake in a work
//! directory of its own, as before it was kept) and kept per pin (one work directory). The
//! suite is a real one: the PyPI sdist of `more-itertools` (its own unittest suite, about 40 s
//! on this machine), committed with a small module of the bench's (`more_itertools/airlock_bench.py`,
//! with a bug) so a fix has a fail-to-pass test. Needs python3 with pip and the package index.
//! Figures print to stdout; nothing is asserted.
//!
//!   cargo run --release -p airlock-broker --example witness_reuse
// A benchmark harness, like a test: a broken fixture stops it.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use airlock_broker::config::BrokerConfig;
use airlock_broker::rules::PolicyRules;
use airlock_broker::sandboxed::SandboxExecutor;
use airlock_broker::service::{AuditJournal, Broker};
use airlock_broker::{BrokerReply, RunRegistration, TestRunner};
use airlock_testkit::{git, write};

#[path = "common/timed.rs"]
mod timed;
use timed::Timed;

const PACKAGE: &str = "more-itertools==11.2.1";
const BUGGY: &str = "def double(x):\n    return x + x + 1\n";
const FIXED: &str = "def double(x):\n    return x + x\n";
const NEW_TEST: &str = "import unittest\n\nfrom more_itertools.airlock_bench import double\n\n\nclass TestDouble(unittest.TestCase):\n    def test_double(self):\n        self.assertEqual(double(2), 4)\n";
const NEW_TEST_NAME: &str = "tests.test_airlock_bench.TestDouble.test_double";

/// The sdist, unpacked and committed with the bench's buggy module; returns (origin, pin).
fn project(root: &Path) -> (PathBuf, String) {
    let dl = root.join("dl");
    let out = Command::new("python3")
        .args([
            "-m",
            "pip",
            "download",
            "--quiet",
            "--no-deps",
            "--no-binary",
            ":all:",
        ])
        .args(["--disable-pip-version-check", "-d"])
        .arg(&dl)
        .arg(PACKAGE)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let sdist = std::fs::read_dir(&dl)
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let unpacked = root.join("unpacked");
    std::fs::create_dir_all(&unpacked).unwrap();
    let out = Command::new("tar")
        .arg("xzf")
        .arg(&sdist)
        .arg("-C")
        .arg(&unpacked)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let origin = std::fs::read_dir(&unpacked)
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    write(&origin, "more_itertools/airlock_bench.py", BUGGY);
    git(&origin, &["init", "-q", "-b", "main"]);
    git(&origin, &["add", "-A"]);
    git(&origin, &["commit", "-q", "-m", "pin"]);
    let pin = git(&origin, &["rev-parse", "HEAD"]);
    git(
        root,
        &[
            "clone",
            "-q",
            origin.to_str().unwrap(),
            root.join("clone").to_str().unwrap(),
        ],
    );
    (origin, pin)
}

fn broker(root: &Path, state: &str, commands: Arc<Mutex<Vec<Duration>>>) -> Broker {
    let dir = root.join(state);
    let text = format!(
        "socket = \"{0}/s\"\nstate_db = \"{0}/state.db\"\nruns_root = \"{1}/runs\"\naudit_log = \"{0}/audit.jsonl\"\nwork_dir = \"{0}/work\"\nqueue_max_age = \"1d\"\nwitness_timeout = \"10m\"\n\n[repositories.\"bench/mi\"]\nclone = \"{1}/clone\"\nremote = \"origin\"\n",
        dir.display(),
        root.display()
    );
    std::fs::create_dir_all(&dir).unwrap();
    let config = BrokerConfig::parse(&text, Path::new("/")).unwrap();
    Broker::new(
        config.clone(),
        airlock_broker::store::open(&config).unwrap(),
        Box::new(PolicyRules::load(None).unwrap()),
        Box::new(Timed {
            inner: SandboxExecutor::new(Vec::new(), Vec::new()),
            commands,
        }),
        Box::new(AuditJournal::open(&config.audit_log).unwrap()),
        Box::new(airlock_broker::publish::GitHubForge::default()),
    )
}

/// One honest fix taken in; returns the wall time of each witness command.
fn intake(
    broker: &Broker,
    commands: &Arc<Mutex<Vec<Duration>>>,
    root: &Path,
    origin: &Path,
    pin: &str,
    run_id: &str,
) -> Vec<Duration> {
    let wt = root.join("runs").join(run_id);
    git(
        root,
        &[
            "clone",
            "-q",
            origin.to_str().unwrap(),
            wt.to_str().unwrap(),
        ],
    );
    git(&wt, &["checkout", "-q", pin]);
    broker
        .register_run(&RunRegistration {
            run_id: run_id.to_owned(),
            repository: "bench/mi".into(),
            base_commit: pin.to_owned(),
            issue_id: "MI-1".into(),
            issue_number: None,
            worktree: wt.display().to_string(),
            test_command: ["python3", "-m", "unittest", "-v"]
                .map(String::from)
                .to_vec(),
            test_runner: TestRunner::Unittest,
            write_allowlist: vec!["more_itertools/**".into(), "tests/**".into()],
            test_env: Default::default(),
            reconnect_secs: None,
            issue: None,
            follow_up_of: None,
            change: Default::default(),
            tree: Default::default(),
        })
        .unwrap();
    write(&wt, "more_itertools/airlock_bench.py", FIXED);
    write(&wt, "tests/test_airlock_bench.py", NEW_TEST);
    let digest = airlock_policies::compute_digest(&wt, pin)
        .unwrap()
        .to_diff_digest();
    let args = serde_json::json!({
        "issue_id": "MI-1", "base_commit": pin,
        "title": "fix: double doubles",
        "body": "double added one; the new test fails before and passes after.",
        "scope": "source-plus-new-tests", "diff_digest": digest,
        "test_evidence": {"before_selector": NEW_TEST_NAME, "before_failing_test": NEW_TEST_NAME,
                          "after_full_run": "green", "witness_run": "green"},
        "confidence": 0.9
    })
    .to_string();
    commands.lock().unwrap().clear();
    let reply = broker
        .open_pr_with_change(run_id, run_id, &args, None)
        .unwrap();
    assert!(matches!(reply, BrokerReply::Queued { .. }), "{reply:?}");
    commands.lock().unwrap().clone()
}

fn secs(d: Duration) -> f64 {
    d.as_secs_f64()
}

fn main() {
    // The witness's sandbox re-executes this binary as its set-up helper.
    airlock_sandbox::helper::run_if_requested();
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let (origin, pin) = project(root);
    println!(
        "machine: {} cores; build: {}; suite: {PACKAGE} (unittest), in the sandbox",
        std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(0),
        if cfg!(debug_assertions) {
            "debug"
        } else {
            "release"
        }
    );
    let mut rows = Vec::new();
    // Before: every witness in a work directory of its own, so none finds a kept base run.
    for (label, shared) in [
        ("base run by every witness", false),
        ("base run kept per pin", true),
    ] {
        let commands = Arc::new(Mutex::new(Vec::new()));
        let mut times = Vec::new();
        let shared_broker =
            shared.then(|| broker(root, &format!("{label}-state"), commands.clone()));
        for n in 0..2 {
            let own;
            let b = match &shared_broker {
                Some(b) => b,
                None => {
                    own = broker(root, &format!("{label}-state-{n}"), commands.clone());
                    &own
                }
            };
            let run_id = format!("{}-{n}", if shared { "kept" } else { "every" });
            times.push(intake(b, &commands, root, &origin, &pin, &run_id));
        }
        rows.push((label, times));
    }
    // One suite: the first intake's base run (its second command: pinned_selected,
    // base_full, patched_selected, patched_full).
    let suite = rows[0].1[0][1];
    println!(
        "one full run of the suite (the first base_full): {:.1} s\n",
        secs(suite)
    );
    println!(
        "| witness | run at the pin | commands | each command (s) | test time (s) | suite-equivalents |"
    );
    println!("| --- | --- | ---: | --- | ---: | ---: |");
    for (label, times) in &rows {
        for (n, commands) in times.iter().enumerate() {
            let total: Duration = commands.iter().sum();
            let each: Vec<String> = commands
                .iter()
                .map(|d| format!("{:.1}", secs(*d)))
                .collect();
            println!(
                "| {label} | {} | {} | {} | {:.1} | {:.2} |",
                if n == 0 { "first" } else { "later" },
                commands.len(),
                each.join(" + "),
                secs(total),
                secs(total) / secs(suite)
            );
        }
    }
}
