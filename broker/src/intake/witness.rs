//! The witness: the run's claim that its change fixes the issue, checked by running the tests
//! in the sandbox on fresh trees built from the broker's own clone, pinned tests restored, in
//! the run's registered test environment. The claimed fail-to-pass test must be a test of a
//! test file (a pinned or a newly added one), not a function in a new or changed module the
//! runner is told to collect by naming it; a documentation change claims none and its witness
//! is the full suite, unchanged. Every step is an audit record; a witness that is not green is
//! POLICY_VIOLATION with every step's output.

use std::path::Path;

use airlock_audit::Event;
use airlock_policies::testrun::{Grade, TestRunner};

use super::gates::Gated;
use super::refusal::{Refusal, Stage};
use crate::changes::{self, ChangeSet};
use crate::config::BrokerConfig;
use crate::error::{Error, Result};
use crate::rules::Rules;
use crate::service::Journal;
use crate::witness::{TestExecutor, WitnessPlan, WitnessReport, WitnessSlots};
use airlock_protocol::{ChangeKind, RunRegistration};

/// What the witness stage uses of the broker.
pub struct WitnessBench<'a> {
    /// Time limit and work directory.
    pub config: &'a BrokerConfig,
    /// Which files are tests.
    pub rules: &'a dyn Rules,
    /// Runs each command in the sandbox.
    pub executor: &'a dyn TestExecutor,
    /// The witness runs that may go at once.
    pub slots: &'a WitnessSlots,
    /// Where each step is recorded.
    pub journal: &'a dyn Journal,
}

/// A gated change set whose witness is green.
pub struct Witnessed {
    /// The gated change set.
    pub gated: Gated,
    /// The green witness.
    pub report: WitnessReport,
}

/// Run the witness for `gated` and hold it to green.
pub fn run(bench: &WitnessBench<'_>, run: &RunRegistration, gated: Gated) -> Stage<Witnessed> {
    let allowed = &gated.digested.allowed;
    let (call, repo, pin) = (
        &allowed.checkout.call,
        &allowed.checkout.repo,
        allowed.checkout.pin,
    );
    let fail_to_pass = match run.change {
        ChangeKind::Fix => Some(call.test_evidence.before_failing_test.as_str()),
        ChangeKind::Docs => None,
    };
    if let Some(claimed) = fail_to_pass
        && let Some(refusal) = claimed_test_outside_test_files(
            repo,
            pin,
            &allowed.changes,
            bench.rules,
            run.test_runner,
            claimed,
        )?
    {
        return Err(refusal.into());
    }
    let pinned_tests = pinned_test_files(repo, pin, bench.rules)?;
    let work_dir = bench.config.witness_work_dir();
    // The base run of a pin is kept and reused by later witnesses at it.
    let kept = crate::witness::BaseInventories::at(work_dir.join("base-inventories"));
    let plan = WitnessPlan {
        test_command: &run.test_command,
        runner: run.test_runner,
        before_failing_test: fail_to_pass,
        timeout: bench.config.witness_timeout,
        test_env: &run.test_env,
        base_inventories: Some(&kept),
        spare_slots: Some(bench.slots),
    };
    // Queued behind `witness_concurrency` other witness runs, so N runs submitting at once
    // do not start N test suites together.
    let slot = bench.slots.acquire();
    let report = crate::witness::run_witness(
        repo,
        pin,
        &allowed.changes,
        &pinned_tests,
        &plan,
        bench.executor,
        &work_dir,
    );
    drop(slot);
    let report = report?;
    for record in &report.steps {
        let out = &record.output;
        let result = match (&out.grade, out.exit_code) {
            (_, None) => airlock_audit::TestResult::TimedOut,
            (Grade::Invalid(_), _) => airlock_audit::TestResult::Error,
            (_, Some(0)) => airlock_audit::TestResult::Passed,
            _ => airlock_audit::TestResult::Failed,
        };
        let full = record.step.runs_full_suite();
        bench.journal.record(
            &run.run_id,
            Event::TestRun {
                selector: (!full).then(|| call.test_evidence.before_failing_test.clone()),
                scope: if full {
                    airlock_audit::TestScope::Full
                } else {
                    airlock_audit::TestScope::Narrow
                },
                result,
                witness: true,
            },
        )?;
        if !out.blocked.is_empty() {
            bench.journal.record(
                &run.run_id,
                Event::NetworkBlocked {
                    command: format!("witness {}", out.step),
                    attempts: out
                        .blocked
                        .iter()
                        .map(|b| airlock_audit::BlockedNetwork {
                            target: b.target(),
                            reason: b.reason.to_string(),
                        })
                        .collect(),
                },
            )?;
        }
    }
    if !report.green {
        let set_aside: Vec<String> = allowed
            .changes
            .files
            .iter()
            .filter(|c| {
                c.kind != changes::ChangeKind::Added
                    && (c.is_test || report.collected_test_files.contains(&c.path))
            })
            .map(|c| c.path.clone())
            .collect();
        let set_aside_findings = gated
            .digested
            .findings
            .iter()
            .filter(|f| set_aside.contains(&f.file))
            .cloned()
            .collect();
        return Err(Refusal::WitnessNotGreen {
            failure: report.failure.clone().unwrap_or_default(),
            set_aside,
            set_aside_findings,
            outputs: report.outputs(),
        }
        .into());
    }
    Ok(Witnessed { gated, report })
}

/// A refusal when `test` (the claimed `before_failing_test`) resolves to a file of the
/// patched tree (the pin with the diff's additions and deletions) that is not a test file.
/// An id that resolves to no file is left to the witness, which finds it among no results.
fn claimed_test_outside_test_files(
    repo: &git2::Repository,
    pin: git2::Oid,
    changes: &ChangeSet,
    rules: &dyn Rules,
    runner: TestRunner,
    test: &str,
) -> Result<Option<Refusal>> {
    let tree = repo
        .find_commit(pin)
        .and_then(|c| c.tree())
        .map_err(Error::git("reading the pinned tree"))?;
    let is_file = |path: &str| match changes.files.iter().find(|c| c.path == path) {
        Some(change) => change.kind != changes::ChangeKind::Deleted,
        None => tree
            .get_path(Path::new(path))
            .is_ok_and(|e| e.kind() == Some(git2::ObjectType::Blob)),
    };
    let Some(file) = runner.file_of_test(test, is_file) else {
        return Ok(None);
    };
    if rules.is_test_file(&file) {
        return Ok(None);
    }
    Ok(Some(Refusal::policy(
        "test_evidence.before_failing_test",
        "claimed_test_in_a_test_file",
        &format!(
            "the claimed before_failing_test {test:?} resolves to {file}, which is not a test \
             file: the fail-to-pass test must live in a pinned or newly added test file"
        ),
    )))
}

/// Take `run`'s base full run now, while its agent works, and keep it for its witness
/// ([`crate::witness::BaseInventories::warm`]): only with `witness_warm_up` on and a witness
/// slot free, never queued behind (or ahead of) a witness that is waiting. A failure only
/// means the witness runs its base itself; it is logged, never a reply.
pub(crate) fn warm_base(broker: &crate::service::Broker, run: &RunRegistration) {
    let config = broker.config();
    if !config.witness_warm_up {
        return;
    }
    let Some(_slot) = broker.witness_slots.try_acquire() else {
        tracing::debug!(run = %run.run_id, "no witness slot free: its base is not taken ahead");
        return;
    };
    let started = std::time::Instant::now();
    let warmed = (|| {
        let repo_cfg = config.repositories.get(&run.repository).ok_or_else(|| {
            Error::Registration(format!("repository {:?} is not configured", run.repository))
        })?;
        let repo = crate::publish::open_clone(&repo_cfg.clone)?;
        let pin = git2::Oid::from_str(&run.base_commit).map_err(Error::git("reading the pin"))?;
        let pinned_tests = pinned_test_files(&repo, pin, broker.rules.as_ref())?;
        let work_dir = config.witness_work_dir();
        let kept = crate::witness::BaseInventories::at(work_dir.join("base-inventories"));
        let plan = WitnessPlan {
            test_command: &run.test_command,
            runner: run.test_runner,
            before_failing_test: None,
            timeout: config.witness_timeout,
            test_env: &run.test_env,
            base_inventories: Some(&kept),
            spare_slots: None,
        };
        kept.warm(
            &repo,
            pin,
            &pinned_tests,
            &plan,
            broker.executor.as_ref(),
            &work_dir,
        )
    })();
    match warmed {
        Ok(done) => tracing::info!(
            run = %run.run_id,
            took_ms = started.elapsed().as_millis() as u64,
            "base run taken ahead: {done:?}"
        ),
        Err(e) => tracing::warn!(
            run = %run.run_id,
            "taking the base run ahead: {e}; its witness runs the base itself"
        ),
    }
}

/// Every test file of the pinned tree, sorted: the witness restores them as pinned.
fn pinned_test_files(
    repo: &git2::Repository,
    pin: git2::Oid,
    rules: &dyn Rules,
) -> Result<Vec<String>> {
    let tree = repo
        .find_commit(pin)
        .and_then(|c| c.tree())
        .map_err(Error::git("reading the pinned tree"))?;
    let mut out = Vec::new();
    tree.walk(git2::TreeWalkMode::PreOrder, |dir, entry| {
        if entry.kind() == Some(git2::ObjectType::Blob)
            && let Ok(name) = entry.name()
        {
            let path = format!("{dir}{name}");
            if rules.is_test_file(&path) {
                out.push(path);
            }
        }
        git2::TreeWalkResult::Ok
    })
    .map_err(Error::git("walking the pinned tree"))?;
    out.sort();
    Ok(out)
}
