//! `airlock demo`: the whole product on bundled example repositories, with scripted models and
//! nothing outside the machine.
//!
//! The demo turns the plain files under `examples/repos/` into git repositories in a work
//! directory, starts the real `airlock-broker serve` (the binary next to this one), and drives
//! one real `airlock run` per scenario of `examples/scenarios/`: a bug fixed with a
//! fail-to-pass test, an ambiguous issue escalated without a diff, a hostile repository whose
//! planted instruction is reported and not obeyed, and an agent that weakens a test and is
//! refused by the broker's witness run. Each scenario is then checked against its records (run
//! exit code, outcome document, trajectory, audit log, the broker's queue item through `show
//! --json`) and a summary table is printed. It goes through the binaries' interfaces (their
//! exit codes, JSON documents and records), never by reading their printed text back.
//!
//! Work-directory layout (the end-to-end suite reads it): `broker.toml`, `broker.sock`,
//! `broker.db`, `broker-audit.jsonl`, `broker.log`; `audit.jsonl` (the supervisors' log);
//! `repos/<name>/` (the examples as git repositories), `forge/<name>.git` (bare stand-ins of
//! the forge, where `approve` pushes) and `clones/<name>/` (the broker's clones of them);
//! `runs/<run_id>/` (outcome, trajectory, worktree); `scenarios/<name>/` (issue, script with
//! the pinned commit filled in, `airlock.toml`, `run.json` = the outcome document
//! printed by `airlock run --json`, `run.stderr`, `show.txt` = `airlock-broker show` of the
//! queued item, for a person); `summary.json` (one entry per scenario).
//!
//! Files: [`scenarios`] the bundled material, [`fixtures`] the repositories on disk, [`broker`]
//! the broker process and its queue item, [`records`] the run's records read into types,
//! [`check`] one scenario run and checked, [`report`] the closing report.

mod broker;
mod check;
mod fixtures;
mod records;
mod report;
mod scenarios;

use anyhow::{Context, bail};
use std::path::{Path, PathBuf};
use std::time::Instant;

use check::DemoPaths;
use scenarios::{BROKER_TOML, SCENARIOS};

/// Where and how the demo runs.
#[derive(Debug, Clone, Default)]
pub struct DemoOptions {
    /// The work directory (created if missing; must be empty), kept afterwards. `None`: a
    /// fresh temporary directory, removed at the end unless `keep`.
    pub workdir: Option<PathBuf>,
    /// Keep the temporary work directory.
    pub keep: bool,
}

/// How the demo's scenarios ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DemoResult {
    /// Every scenario behaved as expected and both audit chains are intact.
    AllAsExpected,
    /// At least one scenario did not, or an audit chain is broken.
    SomeUnexpected,
}

/// Run the demo, printing its progress and report. `Err` when it could not run (a missing
/// binary, git or python3, a work directory that is not empty).
pub fn run(options: &DemoOptions) -> anyhow::Result<DemoResult> {
    let started = Instant::now();
    let exe = std::env::current_exe().context("locating the airlock binary")?;
    let broker_exe = exe.with_file_name("airlock-broker");
    if !broker_exe.is_file() {
        bail!(
            "{} is missing: the demo starts the real broker next to the airlock binary; build both with `cargo build --workspace`",
            broker_exe.display()
        );
    }
    let (workdir, temporary) = match &options.workdir {
        Some(dir) => (prepare_workdir(dir)?, false),
        None => {
            let dir = std::env::temp_dir().join(format!("airlock-demo-{}", std::process::id()));
            (prepare_workdir(&dir)?, true)
        }
    };
    outln!("airlock demo: work directory {}", workdir.display());
    let kept = !temporary || options.keep;
    let outcome = run_in(&exe, &broker_exe, &workdir, kept);
    if !kept && let Err(e) = std::fs::remove_dir_all(&workdir) {
        eprintln!("airlock demo: could not remove {}: {e}", workdir.display());
    }
    let all_passed = outcome?;
    outln!("\nfinished in {:.1}s", started.elapsed().as_secs_f64());
    Ok(if all_passed {
        DemoResult::AllAsExpected
    } else {
        DemoResult::SomeUnexpected
    })
}

/// Create `dir` if missing and refuse it unless empty; its canonical path.
fn prepare_workdir(dir: &Path) -> anyhow::Result<PathBuf> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let dir = dir
        .canonicalize()
        .with_context(|| format!("resolving {}", dir.display()))?;
    let mut entries =
        std::fs::read_dir(&dir).with_context(|| format!("reading {}", dir.display()))?;
    if entries.next().is_some() {
        bail!(
            "work directory {} is not empty; give an empty or new directory",
            dir.display()
        );
    }
    Ok(dir)
}

/// Set up, run every scenario and report; whether all behaved as expected.
fn run_in(exe: &Path, broker_exe: &Path, workdir: &Path, kept: bool) -> anyhow::Result<bool> {
    for dir in ["repos", "forge", "clones", "runs", "scenarios"] {
        std::fs::create_dir_all(workdir.join(dir))
            .with_context(|| format!("creating {}", workdir.join(dir).display()))?;
    }
    outln!("\n== setting up the example repositories");
    fixtures::create_example_repos(workdir)?;

    let broker_toml = workdir.join("broker.toml");
    fixtures::write(
        &broker_toml,
        &BROKER_TOML.replace("{{WORKDIR}}", &workdir.to_string_lossy()),
    )?;
    outln!("\n== starting the broker");
    let _broker = broker::start_broker(broker_exe, &broker_toml, workdir)?;
    outln!(
        "  {} serve (socket {})",
        broker_exe.display(),
        workdir.join("broker.sock").display()
    );

    let paths = DemoPaths {
        exe,
        broker_exe,
        broker_toml: &broker_toml,
        workdir,
    };
    let mut verdicts = Vec::new();
    for (n, scenario) in SCENARIOS.iter().enumerate() {
        outln!(
            "\n== [{}/{}] {}: {} (expected: {})",
            n + 1,
            SCENARIOS.len(),
            scenario.name,
            scenario.title(),
            scenario.expect.describe()
        );
        let verdict = check::run_scenario(&paths, scenario)?;
        for problem in &verdict.problems {
            outln!("  !! {problem}");
        }
        if !verdict.passed {
            let stderr = workdir
                .join("scenarios")
                .join(scenario.name)
                .join("run.stderr");
            let text = std::fs::read_to_string(&stderr).unwrap_or_default();
            for line in text.lines() {
                outln!("  !! run stderr: {line}");
            }
        }
        outln!(
            "  => {} ({})",
            verdict.got,
            if verdict.passed {
                "as expected"
            } else {
                "UNEXPECTED"
            }
        );
        verdicts.push(verdict);
    }

    let chains_ok = report::audit_logs(exe, workdir)?;
    report::write_summary(workdir, &verdicts, chains_ok)?;
    report::print_summary(&verdicts);
    let all = verdicts.iter().all(|v| v.passed) && chains_ok;
    report::print_review_hints(&paths, &verdicts, kept);
    outln!(
        "\n{}",
        if all {
            "every scenario behaved as expected"
        } else {
            "SOME SCENARIOS DID NOT BEHAVE AS EXPECTED"
        }
    );
    Ok(all)
}
