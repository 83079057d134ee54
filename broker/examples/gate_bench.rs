//! The gates' cost beside the broker's intake, in one run (`bench/gates.sh`):
//!
//! - a gate's cold start: building the component from its WebAssembly text, compiling it with
//!   cranelift and linking it, then the first call (an instance and the view included);
//! - a gate's per-call cost on a 40-file diff (every file read by the changelog gate);
//! - the broker's whole `open_pr` intake of an honest fix (schema, policy, digest, witness in the
//!   sandbox, queue) without gates and with the three example gates.
//!
//! Figures print to stdout with the machine; nothing is asserted.
// A benchmark harness, like a test: a broken fixture stops it.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use airlock_broker::config::BrokerConfig;
use airlock_broker::{BrokerReply, RunRegistration, TestRunner};
use airlock_gates::{FileStatus, GateEngine, GateFile, GateLimits, GateRequest, GateSpec};
use airlock_testkit::{git, write};

#[path = "common/calc.rs"]
mod calc;
use calc::{FIXED, NEW_TEST, NEW_TEST_NAME, Project, median, millis, project};

const GATES: [&str; 3] = ["migrations-route", "changelog-required", "vendor-freeze"];

fn gate_dir(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../examples/gates")
        .join(name)
}

fn forty_files() -> GateRequest {
    let body = "fn helper(x: u32) -> u32 {\n    x + 1\n}\n".repeat(60);
    let files: Vec<GateFile> = (0..40)
        .map(|i| GateFile {
            path: format!("src/module_{i:02}.rs"),
            status: FileStatus::Modified,
            base: Some(format!("pub fn f{i}() {{}}\n{body}").into_bytes()),
            patched: Some(format!("pub fn f{i}() {{}}\n{body}// changed\n").into_bytes()),
        })
        .collect();
    GateRequest {
        repository: "bench/repo".into(),
        issue_id: "BENCH-1".into(),
        base_commit: "a".repeat(40),
        title: "fix: forty files".into(),
        body: String::new(),
        scope: "source-only".into(),
        test_change_reason: "none".into(),
        before_failing_test: String::new(),
        digest: airlock_schemas::DiffDigest {
            files_changed: files.iter().map(|f| f.path.clone()).collect(),
            ..Default::default()
        },
        files,
    }
}

fn gate_figures() {
    let limits = GateLimits {
        fuel: airlock_gates::DEFAULT_GATE_FUEL,
        memory_bytes: 64 << 20,
        timeout: Duration::from_secs(2),
    };
    let request = forty_files();
    for name in GATES {
        let spec = GateSpec {
            name: name.into(),
            component: gate_dir(name).join("gate.wat"),
            examples: gate_dir(name).join("examples.toml"),
            limits,
        };
        let text = std::fs::read(&spec.component).unwrap();
        let started = Instant::now();
        let engine = GateEngine::new().unwrap();
        let component = airlock_gates::compile::component_from_source(&text).unwrap();
        let built = started.elapsed();
        let gate = engine
            .prepare(name, &spec.component, &component, limits)
            .unwrap();
        let compiled = started.elapsed();
        let first = gate.check(&request);
        let cold = started.elapsed();
        assert!(first.failure.is_none(), "{first:?}");
        let calls: Vec<Duration> = (0..30)
            .map(|_| {
                let t = Instant::now();
                let run = gate.check(&request);
                assert!(run.failure.is_none(), "{run:?}");
                t.elapsed()
            })
            .collect();
        let loaded = Instant::now();
        airlock_gates::load_gate(&engine, &spec).unwrap();
        let load = loaded.elapsed();
        println!(
            "gate {name:<19} cold {:>7.1} ms (text to component {:.1}, compile+link {:.1}, first call {:.1}); per call on 40 files: median {:.2} ms, fuel {}; load with examples {:.1} ms",
            millis(cold),
            millis(built),
            millis(compiled - built),
            millis(cold - compiled),
            millis(median(calls)),
            first.fuel_consumed,
            millis(load),
        );
    }
}

fn broker_config(p: &Project, label: &str, with_gates: bool) -> BrokerConfig {
    let state = p.root.join(label);
    let mut text = format!(
        "socket = \"{0}/s\"\nstate_db = \"{0}/db\"\nruns_root = \"{1}/runs\"\naudit_log = \"{0}/audit.jsonl\"\nwork_dir = \"{0}/work\"\nqueue_max_age = \"1d\"\n\n[repositories.\"bench/calc\"]\nclone = \"{1}/clone\"\nremote = \"origin\"\n",
        state.display(),
        p.root.display()
    );
    if with_gates {
        for name in GATES {
            text.push_str(&format!(
                "\n[[repositories.\"bench/calc\".gates]]\nname = \"{name}\"\ncomponent = \"{}\"\nexamples = \"{}\"\n",
                gate_dir(name).join("gate.wat").display(),
                gate_dir(name).join("examples.toml").display()
            ));
        }
    }
    BrokerConfig::parse(&text, Path::new("/")).unwrap()
}

/// Median intake of an honest fix over `runs` runs, after loading the gates.
fn intake(p: &Project, label: &str, with_gates: bool, runs: usize) -> Duration {
    let broker =
        airlock_broker::cli::production_broker(broker_config(p, label, with_gates)).unwrap();
    broker.gates().unwrap();
    let times = (0..runs)
        .map(|i| {
            let run_id = format!("{label}-{i}");
            let wt = p.root.join("runs").join(&run_id);
            git(&p.root, &["clone", "-q", p.origin.to_str().unwrap(), wt.to_str().unwrap()]);
            git(&wt, &["checkout", "-q", &p.pin]);
            broker
                .register_run(&RunRegistration {
                    run_id: run_id.clone(),
                    repository: "bench/calc".into(),
                    base_commit: p.pin.clone(),
                    issue_id: "CALC-1".into(),
                    issue_number: None,
                    worktree: wt.display().to_string(),
                    test_command: vec!["python3".into(), "-m".into(), "unittest".into(), "-v".into()],
                    test_runner: TestRunner::Unittest,
                    write_allowlist: vec!["calc/**".into(), "tests/**".into()],
                    test_env: Default::default(),
                    reconnect_secs: None,
                    issue: None,
                    follow_up_of: None,
                    change: Default::default(),
                    tree: Default::default(),
                })
                .unwrap();
            write(&wt, "calc/ops.py", FIXED);
            write(&wt, "tests/test_high.py", NEW_TEST);
            let digest = airlock_policies::compute_digest(&wt, &p.pin).unwrap().to_diff_digest();
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
            let t = Instant::now();
            let reply = broker.open_pr(&run_id, &run_id, &args).unwrap();
            let took = t.elapsed();
            assert!(matches!(reply, BrokerReply::Queued { .. }), "{reply:?}");
            took
        })
        .collect();
    median(times)
}

fn main() {
    // The witness's sandbox re-executes this binary as its set-up helper.
    airlock_sandbox::helper::run_if_requested();
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|t| {
            t.lines()
                .find(|l| l.starts_with("model name"))
                .map(|l| l.split(':').nth(1).unwrap_or("").trim().to_owned())
        })
        .unwrap_or_default();
    let cores = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(0);
    println!(
        "machine: {cores} cores, {cpu}; build: {}",
        if cfg!(debug_assertions) {
            "debug"
        } else {
            "release"
        }
    );
    gate_figures();
    let p = project(0);
    let runs = 3;
    let without = intake(&p, "plain", false, runs);
    let with = intake(&p, "gated", true, runs);
    println!(
        "intake of an honest open_pr (median of {runs}, witness included): without gates {:.0} ms, with the three example gates {:.0} ms",
        millis(without),
        millis(with)
    );
}
