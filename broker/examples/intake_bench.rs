//! The broker's own time per `open_pr` intake, without the witness (`bench/many_hosts.sh`):
//! an honest fix of a small Python project taken in end to end (schema, policy, digest,
//! witness in the sandbox, queue), with the time spent inside the witness's test commands
//! subtracted. Side by side: the state in SQLite or in PostgreSQL (a throwaway server from
//! the machine's PostgreSQL), and the tree read from a shared worktree or rebuilt from the
//! run's patch (a run on another host). Figures print to stdout; nothing is asserted.
// A benchmark harness, like a test: a broken fixture stops it.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use airlock_broker::config::BrokerConfig;
use airlock_broker::rules::PolicyRules;
use airlock_broker::sandboxed::SandboxExecutor;
use airlock_broker::service::{AuditJournal, Broker};
use airlock_broker::{BrokerReply, RunRegistration, TestRunner};
use airlock_protocol::{SubmittedChange, TreeTransfer};
use airlock_testkit::{git, write};

#[path = "common/calc.rs"]
mod calc;
#[path = "common/timed.rs"]
mod timed;
use calc::{FIXED, NEW_TEST, NEW_TEST_NAME, Project, median, millis, project};
use timed::Timed;

const RUNS: usize = 9;

/// Median (own time, whole intake) over [`RUNS`] intakes.
fn intake(p: &Project, label: &str, state_db: &str, tree: TreeTransfer) -> (Duration, Duration) {
    let state = p.root.join(label);
    let text = format!(
        "socket = \"{0}/s\"\nstate_db = \"{state_db}\"\nruns_root = \"{1}/runs\"\naudit_log = \"{0}/audit.jsonl\"\nwork_dir = \"{0}/work\"\nqueue_max_age = \"1d\"\n\n[repositories.\"bench/calc\"]\nclone = \"{1}/clone\"\nremote = \"origin\"\n",
        state.display(),
        p.root.display()
    );
    let config = BrokerConfig::parse(&text, Path::new("/")).unwrap();
    let spent = Arc::new(Mutex::new(Vec::new()));
    let executor = Timed {
        inner: SandboxExecutor::new(Vec::new(), Vec::new()),
        commands: spent.clone(),
    };
    let broker = Broker::new(
        config.clone(),
        airlock_broker::store::open(&config).unwrap(),
        Box::new(PolicyRules::load(None).unwrap()),
        Box::new(executor),
        Box::new(AuditJournal::open(&config.audit_log).unwrap()),
        Box::new(airlock_broker::publish::GitHubForge::default()),
    );
    let mut own = Vec::new();
    let mut whole = Vec::new();
    for i in 0..RUNS {
        let run_id = format!("{label}-{i}");
        let wt = p.root.join("runs").join(&run_id);
        git(
            &p.root,
            &[
                "clone",
                "-q",
                p.origin.to_str().unwrap(),
                wt.to_str().unwrap(),
            ],
        );
        git(&wt, &["checkout", "-q", &p.pin]);
        broker
            .register_run(&RunRegistration {
                run_id: run_id.clone(),
                repository: "bench/calc".into(),
                base_commit: p.pin.clone(),
                issue_id: "CALC-1".into(),
                issue_number: None,
                worktree: wt.display().to_string(),
                test_command: vec![
                    "python3".into(),
                    "-m".into(),
                    "unittest".into(),
                    "-v".into(),
                ],
                test_runner: TestRunner::Unittest,
                write_allowlist: vec!["calc/**".into(), "tests/**".into()],
                test_env: Default::default(),
                reconnect_secs: None,
                issue: None,
                follow_up_of: None,
                change: Default::default(),
                tree,
            })
            .unwrap();
        write(&wt, "calc/ops.py", FIXED);
        write(&wt, "tests/test_high.py", NEW_TEST);
        let digest = airlock_policies::compute_digest(&wt, &p.pin)
            .unwrap()
            .to_diff_digest();
        let args = serde_json::json!({
            "issue_id": "CALC-1", "base_commit": p.pin,
            "title": "fix: clamp respects the upper bound",
            "body": "clamp ignored hi; the new test fails before and passes after.",
            "scope": "source-plus-new-tests", "diff_digest": digest,
            "test_evidence": {"before_selector": NEW_TEST_NAME, "before_failing_test": NEW_TEST_NAME,
                              "after_full_run": "green", "witness_run": "green"},
            "confidence": 0.9
        })
        .to_string();
        // What the run sends: for a run elsewhere, its patch (made on the run's side, not timed).
        let change = (tree == TreeTransfer::Bytes).then(|| {
            SubmittedChange::new(
                &p.pin,
                &airlock_policies::change_patch(&wt, &p.pin).unwrap(),
            )
        });
        spent.lock().unwrap().clear();
        let t = Instant::now();
        let reply = broker
            .open_pr_with_change(&run_id, &run_id, &args, change.as_ref())
            .unwrap();
        let took = t.elapsed();
        assert!(matches!(reply, BrokerReply::Queued { .. }), "{reply:?}");
        let witness: Duration = spent.lock().unwrap().iter().sum();
        own.push(took.saturating_sub(witness));
        whole.push(took);
    }
    (median(own), median(whole))
}

fn main() {
    // The witness's sandbox re-executes this binary as its set-up helper.
    airlock_sandbox::helper::run_if_requested();
    let cores = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(0);
    println!(
        "machine: {cores} cores; build: {}; {RUNS} intakes each, medians",
        if cfg!(debug_assertions) {
            "debug"
        } else {
            "release"
        }
    );
    let p = project(200);
    let pg = airlock_testkit::pg::PgServer::start();
    let sqlite = format!("{}/state.db", p.root.display());
    for (store, label, state_db) in [
        ("sqlite", "sq", sqlite),
        ("postgres", "pg", pg.database("intake_bench")),
    ] {
        for tree in [TreeTransfer::Shared, TreeTransfer::Bytes] {
            let name = match tree {
                TreeTransfer::Shared => "shared worktree",
                TreeTransfer::Bytes => "patch (bytes)",
            };
            let (own, whole) = intake(&p, &format!("{label}-{tree:?}"), &state_db, tree);
            println!(
                "intake, {store}, {name}: broker's own time {:.1} ms (whole intake with its witness {:.0} ms)",
                millis(own),
                millis(whole)
            );
        }
    }
}
