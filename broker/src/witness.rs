//! The witness run: fresh trees built from the broker's own clone (never from the run's
//! worktree), the claimed fail-to-pass test run on the pinned source and on the patched source,
//! then the full suite on the patched source, each in the sandbox, each graded from its output.
//!
//! Every tree starts from the pinned commit. The base tree is the pin alone (its full run is the
//! base inventory: which tests run there and which fail); the pinned tree gets only the newly
//! added test files; the patched tree gets the diff's non-test changes plus the newly added test
//! files. The patched full run is green only when every test that passed at base ran and passed
//! again and the new tests ran and passed (`airlock_policies::testrun::grade_full_run`).
//! Pre-existing test files are never taken from the diff: they stay as pinned, read-only, so a
//! weakened test cannot make the witness green. A test file is one the policy's patterns name or
//! one the base run collected tests from (the inventory's ids name it: a Django-style
//! `app/tests.py`), so the base run comes before any step on the patched tree, built after it.
//! Rust's unit tests live inside source files
//! (`#[cfg(test)]` items): a changed `.rs` file's test code is treated like a test file's, its
//! new tests joining the pinned source in the pinned tree when the patch only added test lines,
//! its test code kept as pinned in both trees when the patch changed or removed any.
//!
//! No witness command can change a test: the pinned and newly added test files are mounted
//! read-only in its sandbox ([`read_only_guard`]), and Python reads no bytecode from the tree.
//! Where the runner can write a structured report (pytest's JUnit XML; unittest through
//! airlock's reporter), each command is told to write one into a fresh directory named with a
//! random nonce outside the tree, and a step whose report is missing or disagrees with its
//! exit code and parsed output is invalid.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::changes::{ChangeKind, ChangeSet};
use crate::error::{Error, Result};
use airlock_policies::testrun::{
    self as results, FullRunVerdict, Grade, ParsedRun, TestEnvironment, TestInventory, TestRunner,
};

use airlock_policies::network::BlockedAttempt;

mod base_cache;
pub mod rerun;
mod slots;
mod steps;
mod trees;
mod warm;

pub use base_cache::BaseInventories;
pub use slots::{SlotCounts, WitnessSlot, WitnessSlots};
pub use steps::{Expectation, StepRecord, WitnessStep};
pub use trees::{TreeKind, build_tree, write_pinned_tree};
pub use warm::Warmed;

/// Bytes of stdout and of stderr kept per witness command in replies and the queue.
pub const OUTPUT_KEEP_BYTES: usize = 64 * 1024;

/// What one sandboxed command printed and returned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CapturedRun {
    /// Exit code; `None` when killed (timeout, signal).
    pub exit_code: Option<i32>,
    /// Standard output, lossily decoded.
    pub stdout: String,
    /// Standard error, lossily decoded.
    pub stderr: String,
    /// What the egress proxy refused the command (the run's `proxy` network).
    pub blocked: Vec<BlockedAttempt>,
}

/// What one witness command must be unable to change, and where it may write its report,
/// beyond its tree and its environment.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CommandGuard {
    /// Paths of the tree (relative, `/`-separated) shown read-only: the pinned and newly
    /// added test files, or a directory in place of its files when everything below it is
    /// one of them.
    pub read_only: Vec<String>,
    /// Directories of the tree (relative; `""` is the tree itself) holding a read-only test
    /// file, whose `__pycache__` is shown as the empty read-only [`Self::empty_dir`], so no
    /// bytecode can be planted beside a test file at run time.
    pub no_pycache: Vec<String>,
    /// An empty host directory, outside the tree, shown at each `no_pycache` path.
    pub empty_dir: Option<PathBuf>,
    /// A fresh host directory outside the tree, named with a random nonce, that this
    /// command alone may write: where the runner writes its report.
    pub report_dir: Option<PathBuf>,
    /// Paths of the tree (relative) the change touched outside its test files, on a patched
    /// tree: the runner's guard refuses a test whose code comes from one (a hollow test module
    /// planted by the change's source).
    pub changed_source: Vec<String>,
}

/// Runs a test command in a tree. The production implementation is the sandbox.
pub trait TestExecutor: Send + Sync {
    /// Run `argv` with `tree` as working directory, within `timeout`, in the run's test
    /// environment (its read-only grants, variables and prepared links inside `tree`), with
    /// what `guard` names read-only and its report directory writable.
    fn run(
        &self,
        tree: &Path,
        argv: &[String],
        timeout: Duration,
        env: &TestEnvironment,
        guard: &CommandGuard,
    ) -> Result<CapturedRun>;

    /// The variables a command run in `env` sees, as recorded for the approver (and a person
    /// rerunning it): by default the run's test environment's own.
    fn variables(&self, env: &TestEnvironment) -> BTreeMap<String, String> {
        env.variables().into_iter().collect()
    }
}

/// One witness step as recorded in the queue and attached to refusals.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WitnessOutput {
    /// `pinned_selected`, `patched_selected`, `base_full` or `patched_full`: the recorded name
    /// of a [`WitnessStep`].
    pub step: String,
    /// What the step must show: `fail`, `pass`, `inventory` (the base run: it must report
    /// tests) or `green`: the recorded word of an [`Expectation`].
    pub expect: String,
    /// The command as a person types it at the root of the step's tree: the runner's own
    /// argv with the selected test ids, without the options airlock adds for its report.
    /// Empty in records written before it was kept (`argv` is all there is).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub command: Vec<String>,
    /// The tree the command ran at the root of ([`WitnessStep::tree`]): `pinned`,
    /// `pinned+tests` or `patched`. Empty in older records.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub tree: String,
    /// The variables the command ran with (the run's test environment and the broker's own).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub env: BTreeMap<String, String>,
    /// The command line as executed: `command` with the report option (airlock's unittest
    /// reporter named, its source not repeated), an implementation detail shown apart.
    pub argv: Vec<String>,
    /// Exit code, `None` when killed.
    pub exit_code: Option<i32>,
    /// Standard output (cut at [`OUTPUT_KEEP_BYTES`], the cut marked).
    pub stdout: String,
    /// Standard error (cut likewise).
    pub stderr: String,
    /// Per-test results parsed from the output.
    pub parsed: ParsedRun,
    /// The grade of this step.
    pub grade: Grade,
    /// The base inventory this step took (`base_full`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inventory: Option<TestInventory>,
    /// The comparison with the base inventory (`patched_full`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub full_run: Option<FullRunVerdict>,
    /// What the egress proxy refused this step, once per host and port.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub blocked: Vec<BlockedAttempt>,
    /// Set on a `base_full` step that was not run again: whose base run it is
    /// ([`BaseInventories`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reused: Option<String>,
}

/// The outcome of the whole witness.
#[derive(Debug, Clone, PartialEq)]
pub struct WitnessReport {
    /// Every step that ran, in order, with its output.
    pub steps: Vec<StepRecord>,
    /// Whether every step met its requirement.
    pub green: bool,
    /// The first unmet requirement, for the refusal message.
    pub failure: Option<String>,
    /// Files the change modified or deleted that the runner collected tests from at base
    /// although no test pattern of the policy names them: run as pinned, like every test file.
    pub collected_test_files: Vec<String>,
}

impl WitnessReport {
    /// The recorded outputs, in order: the queue item's evidence and a refusal's details.
    pub fn outputs(&self) -> Vec<WitnessOutput> {
        self.steps.iter().map(|s| s.output.clone()).collect()
    }
}

/// The test set-up a witness needs from the run registration.
#[derive(Debug, Clone)]
pub struct WitnessPlan<'a> {
    /// The operator's full-suite command.
    pub test_command: &'a [String],
    /// How it selects one test and reports.
    pub runner: TestRunner,
    /// The claimed fail-to-pass test; `None` for a documentation change, whose witness is
    /// the base inventory and the patched full run only.
    pub before_failing_test: Option<&'a str>,
    /// Per-command time limit.
    pub timeout: Duration,
    /// The environment of every command (from the run's registration, checked against
    /// `broker.toml` when the run registered).
    pub test_env: &'a TestEnvironment,
    /// Where base runs are kept for the later witnesses at a pin; `None` runs every base.
    pub base_inventories: Option<&'a BaseInventories>,
    /// The broker's witness slots: when one more is free, a selected step and the full step
    /// after it run at once (`pinned_selected` with `base_full`, `patched_selected` with
    /// `patched_full`); `None` runs every step in turn.
    pub spare_slots: Option<&'a WitnessSlots>,
}

fn keep(text: String) -> String {
    if text.len() <= OUTPUT_KEEP_BYTES {
        return text;
    }
    let mut cut = OUTPUT_KEEP_BYTES;
    while !text.is_char_boundary(cut) {
        cut -= 1;
    }
    format!(
        "{}\n[... {} bytes cut by the broker]",
        &text[..cut],
        text.len() - cut
    )
}

/// The read-only part of a witness command's guard for the built tree at `tree`: every path of
/// `protected` that is a file there, each directory everything below which is protected in
/// place of its files (one mount instead of hundreds), and the `__pycache__` of every other
/// directory holding a protected file. A directory holding a prepared link (`node_modules`)
/// is never mounted whole.
pub fn read_only_guard(tree: &Path, protected: &[String], links: &[String]) -> CommandGuard {
    use std::collections::{BTreeMap, BTreeSet};
    let files: BTreeSet<&str> = protected
        .iter()
        .map(String::as_str)
        .filter(|p| {
            tree.join(p)
                .symlink_metadata()
                .is_ok_and(|m| m.file_type().is_file())
        })
        .collect();
    // Whether everything below each directory holding a protected file is protected.
    let mut whole: BTreeMap<String, bool> = BTreeMap::new();
    for file in &files {
        let mut dir = parent_of(file);
        while !dir.is_empty() && !whole.contains_key(dir) {
            let all = only_protected_below(tree, dir, &files)
                && !links
                    .iter()
                    .any(|l| l == dir || l.starts_with(&format!("{dir}/")));
            whole.insert(dir.to_owned(), all);
            dir = parent_of(dir);
        }
    }
    let covering = |path: &str| -> Option<String> {
        // The shallowest wholly protected directory above `path`.
        let mut found = None;
        let mut dir = parent_of(path);
        while !dir.is_empty() {
            if whole.get(dir) == Some(&true) {
                found = Some(dir.to_owned());
            }
            dir = parent_of(dir);
        }
        found
    };
    let mut read_only = BTreeSet::new();
    let mut no_pycache = BTreeSet::new();
    for file in &files {
        match covering(file) {
            Some(dir) => {
                read_only.insert(dir);
            }
            None => {
                read_only.insert((*file).to_owned());
                let dir = parent_of(file);
                let cache = tree.join(dir).join("__pycache__");
                if cache.symlink_metadata().map_or(true, |m| m.is_dir()) {
                    no_pycache.insert(dir.to_owned());
                }
            }
        }
    }
    CommandGuard {
        read_only: read_only.into_iter().collect(),
        no_pycache: no_pycache.into_iter().collect(),
        ..CommandGuard::default()
    }
}

fn parent_of(path: &str) -> &str {
    path.rfind('/').map_or("", |i| &path[..i])
}

/// Whether every entry below `dir` of `tree` is a directory or a file of `files`.
fn only_protected_below(tree: &Path, dir: &str, files: &std::collections::BTreeSet<&str>) -> bool {
    let Ok(entries) = std::fs::read_dir(tree.join(dir)) else {
        return false;
    };
    for entry in entries {
        let Ok(entry) = entry else { return false };
        let Some(name) = entry.file_name().to_str().map(str::to_owned) else {
            return false;
        };
        let rel = format!("{dir}/{name}");
        let Ok(kind) = entry.file_type() else {
            return false;
        };
        let ok = if kind.is_dir() {
            only_protected_below(tree, &rel, files)
        } else {
            kind.is_file() && files.contains(rel.as_str())
        };
        if !ok {
            return false;
        }
    }
    true
}

/// The report a runner wrote, read back: `Err` says why there is none to trust.
fn read_report(path: &Path) -> std::result::Result<results::JunitReport, String> {
    let meta = path.symlink_metadata().map_err(|_| {
        format!(
            "the runner wrote no report to {}: the process ended before the runner finished \
             (os._exit, a signal) or removed the report, so its output cannot be trusted",
            path.display()
        )
    })?;
    if !meta.file_type().is_file() {
        return Err(format!(
            "the report {} is not a regular file",
            path.display()
        ));
    }
    if meta.len() > results::MAX_REPORT_BYTES as u64 {
        return Err(format!(
            "the report {} is {} bytes, more than the {} read",
            path.display(),
            meta.len(),
            results::MAX_REPORT_BYTES
        ));
    }
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("the report {} cannot be read: {e}", path.display()))?;
    results::parse_junit(&text).map_err(|e| format!("the report {}: {e}", path.display()))
}

struct StepRun {
    out: WitnessOutput,
    parsed: ParsedRun,
    /// Why the runner's report cannot be trusted or disagrees with the run, when one was asked
    /// for.
    report_problem: Option<String>,
}

#[allow(clippy::too_many_arguments)]
#[tracing::instrument(name = "witness_step", skip_all, fields(step = %witness_step))]
fn step(
    executor: &dyn TestExecutor,
    plan: &WitnessPlan<'_>,
    tree: &Path,
    witness_step: WitnessStep,
    argv: Vec<String>,
    guard: &CommandGuard,
    scratch: &Path,
) -> Result<StepRun> {
    // A fresh directory per command, named with a random nonce, outside the tree.
    let report_dir = tempfile::Builder::new()
        .prefix(&format!("report-{witness_step}-"))
        .tempdir_in(scratch)
        .map_err(Error::io(format!(
            "creating a report directory in {}",
            scratch.display()
        )))?;
    let report_path = report_dir.path().join("junit.xml");
    let with_report = report_path
        .to_str()
        .and_then(|path| plan.runner.with_report(&argv, path));
    let mut guard = guard.clone();
    let command = argv.clone();
    let argv = match with_report {
        Some(argv) => {
            guard.report_dir = Some(report_dir.path().to_path_buf());
            // What the runner's guard reads before any test runs (see
            // `airlock_policies::testrun::GUARD_CHANGED_SOURCE`).
            let listed = report_dir.path().join(results::GUARD_CHANGED_SOURCE);
            let text = serde_json::to_string(&guard.changed_source).unwrap_or_default();
            std::fs::write(&listed, text)
                .map_err(Error::io(format!("writing {}", listed.display())))?;
            argv
        }
        None => argv,
    };
    let run = executor.run(tree, &argv, plan.timeout, plan.test_env, &guard)?;
    let combined = format!("{}\n{}", run.stdout, run.stderr);
    let parsed = results::parse(plan.runner, &combined);
    let report_problem = if guard.report_dir.is_some() {
        match read_report(&report_path) {
            Ok(report) => results::report_disagreement(
                plan.runner,
                &parsed,
                run.exit_code,
                &report,
                plan.runner.guards(&argv),
            ),
            Err(why) => Some(why),
        }
    } else {
        None
    };
    let mut grade = match witness_step.expectation() {
        // Only a fix's witness has these steps, so the claimed test is there.
        Expectation::Fail => results::grade_must_fail(
            &parsed,
            run.exit_code,
            plan.before_failing_test.unwrap_or_default(),
        ),
        Expectation::Pass => results::grade_must_pass(
            &parsed,
            run.exit_code,
            plan.before_failing_test.unwrap_or_default(),
        ),
        // Graded by the caller against the inventory.
        Expectation::Inventory | Expectation::Green => Grade::Ok,
    };
    if let Some(why) = &report_problem
        && !matches!(grade, Grade::Invalid(_))
    {
        grade = Grade::Invalid(why.clone());
    }
    // The reporter's source is the same in every command: named, not repeated, in the record.
    let argv = argv
        .into_iter()
        .map(|word| {
            if word == results::UNITTEST_REPORTER {
                "<airlock's unittest reporter (airlock_policies::testrun::UNITTEST_REPORTER)>"
                    .to_owned()
            } else if word == results::PYTEST_GUARD {
                "<airlock's pytest guard (airlock_policies::testrun::PYTEST_GUARD)>".to_owned()
            } else {
                word
            }
        })
        .collect();
    let out = WitnessOutput {
        step: witness_step.name().to_owned(),
        expect: witness_step.expectation().as_str().to_owned(),
        command,
        tree: witness_step.tree().to_owned(),
        env: executor.variables(plan.test_env),
        argv,
        exit_code: run.exit_code,
        stdout: keep(run.stdout),
        stderr: keep(run.stderr),
        parsed: parsed.clone(),
        grade,
        inventory: None,
        full_run: None,
        blocked: run.blocked,
        reused: None,
    };
    Ok(StepRun {
        out,
        parsed,
        report_problem,
    })
}

/// What the base inventory says of the change: each changed file it collected tests from
/// becomes a test file of the witness (kept as pinned, protected) and is listed as such.
fn take_inventory(
    changes: &mut ChangeSet,
    pinned_test_files: &mut Vec<String>,
    collected_test_files: &mut Vec<String>,
    (runner, inventory, base): (TestRunner, Option<&TestInventory>, &Path),
) {
    let Some(inventory) = inventory else {
        return;
    };
    for path in test_files_collected_at_base(runner, inventory, base, changes) {
        if let Some(change) = changes.files.iter_mut().find(|c| c.path == path) {
            change.is_test = true;
        }
        if !pinned_test_files.contains(&path) {
            pinned_test_files.push(path.clone());
        }
        collected_test_files.push(path);
    }
}

/// The files `changes` modified or deleted, not already test files, that the base run
/// collected tests from: what the inventory's ids name (`base` is the base tree on disk).
/// Runners whose ids name no file (cargo, go) give none.
fn test_files_collected_at_base(
    runner: TestRunner,
    inventory: &TestInventory,
    base: &Path,
    changes: &ChangeSet,
) -> Vec<String> {
    let candidates: std::collections::BTreeSet<&str> = changes
        .files
        .iter()
        .filter(|c| !c.is_test && c.kind != ChangeKind::Added)
        .map(|c| c.path.as_str())
        .collect();
    if candidates.is_empty() {
        return Vec::new();
    }
    let is_file = |path: &str| {
        !path.starts_with('/')
            && !path.split('/').any(|part| part == "..")
            && base
                .join(path)
                .symlink_metadata()
                .is_ok_and(|m| m.file_type().is_file())
    };
    let mut found: std::collections::BTreeSet<String> = std::collections::BTreeSet::new();
    for id in inventory.tests.keys() {
        if let Some(file) = runner.file_of_test(id, is_file)
            && candidates.contains(file.as_str())
        {
            found.insert(file);
        }
    }
    found.into_iter().collect()
}

/// The tests a green patched full run must show passing: the claimed one, and the newly added
/// test files (where the runner's names say which file a test is in).
fn required_tests<'c>(plan: &WitnessPlan<'c>, changes: &'c ChangeSet) -> Vec<&'c str> {
    let mut required: Vec<&str> = plan.before_failing_test.into_iter().collect();
    required.extend(results::new_test_files_required(
        plan.runner,
        changes
            .files
            .iter()
            .filter(|c| c.is_test && c.kind == ChangeKind::Added)
            .map(|c| c.path.as_str()),
    ));
    required
}

/// Where a witness's steps run: every step at the one path `at`, its tree moved there for
/// the command and back after it.
struct Place<'p, 'c> {
    executor: &'p dyn TestExecutor,
    plan: &'p WitnessPlan<'c>,
    at: &'p Path,
    links: &'p [String],
    empty: &'p Path,
    scratch: &'p Path,
}

impl Place<'_, '_> {
    /// Run `witness_step` in `tree`, the test files no command may change (the pinned ones and
    /// the newly added ones) read-only, and, on the patched tree, the guard told which source
    /// files the change touched.
    fn run(
        &self,
        tree: &Path,
        witness_step: WitnessStep,
        argv: Vec<String>,
        changes: &ChangeSet,
        pinned_test_files: &[String],
    ) -> Result<StepRun> {
        let name = witness_step.name();
        let protected: Vec<String> = pinned_test_files
            .iter()
            .cloned()
            .chain(
                changes
                    .files
                    .iter()
                    .filter(|c| c.is_test && c.kind == ChangeKind::Added)
                    .map(|c| c.path.clone()),
            )
            .collect();
        std::fs::rename(tree, self.at).map_err(Error::io(format!(
            "moving the {name} tree to {}",
            self.at.display()
        )))?;
        let mut guard = read_only_guard(self.at, &protected, self.links);
        guard.empty_dir = Some(self.empty.to_path_buf());
        if matches!(
            witness_step,
            WitnessStep::PatchedSelected | WitnessStep::PatchedFull
        ) {
            guard.changed_source = changes
                .files
                .iter()
                .filter(|c| !c.is_test && c.kind != ChangeKind::Deleted)
                .map(|c| c.path.clone())
                .collect();
        }
        let ran = step(
            self.executor,
            self.plan,
            self.at,
            witness_step,
            argv,
            &guard,
            self.scratch,
        );
        std::fs::rename(self.at, tree).map_err(Error::io(format!(
            "moving the {name} tree back to {}",
            tree.display()
        )))?;
        ran
    }
}

/// Whether `next` may run at once with `step` before it: a selected step and the full step
/// after it, on different trees.
fn runs_beside(step: WitnessStep, next: WitnessStep) -> bool {
    matches!(
        (step, next),
        (WitnessStep::PinnedSelected, WitnessStep::BaseFull)
            | (WitnessStep::PatchedSelected, WitnessStep::PatchedFull)
    )
}

/// The base inventory a base run's output gives.
fn take_base_inventory(
    runner: TestRunner,
    parsed: &ParsedRun,
    out: &WitnessOutput,
) -> Result<TestInventory> {
    TestInventory::from_base_run(runner, parsed, out.exit_code, None).map_err(|e| {
        Error::Witness(format!(
            "the base inventory could not be taken from the broker's clone: {e}"
        ))
    })
}

/// Run the witness: build both trees under `work_dir` and run the three steps, stopping at the
/// first unmet requirement.
#[tracing::instrument(name = "witness", skip_all)]
pub fn run_witness(
    repo: &git2::Repository,
    pin: git2::Oid,
    changes: &ChangeSet,
    pinned_test_files: &[String],
    plan: &WitnessPlan<'_>,
    executor: &dyn TestExecutor,
    work_dir: &Path,
) -> Result<WitnessReport> {
    let kept = plan.base_inventories;
    let scratch = scratch_dir(work_dir, "witness-")?;
    let base: PathBuf = scratch.path().join("base");
    let pinned: PathBuf = scratch.path().join("pinned");
    let patched: PathBuf = scratch.path().join("patched");
    for (kind, dest) in [
        (TreeKind::Base, &base),
        (TreeKind::PinnedWithNewTests, &pinned),
    ] {
        build_tree(repo, pin, changes, pinned_test_files, kind, dest)?;
    }
    // The patched tree is built once the base inventory says which files hold tests: a file
    // the runner collected tests from at base is a test file whatever its name, and stays as
    // pinned there (a Django-style `app/tests.py` the change weakened is not what runs).
    let mut changes = changes.clone();
    let mut pinned_test_files = pinned_test_files.to_vec();
    let mut collected_test_files: Vec<String> = Vec::new();
    let mut patched_built = false;
    let links: Vec<String> = plan.test_env.links.iter().map(|l| l.path.clone()).collect();
    let empty = scratch.path().join("empty");
    std::fs::create_dir(&empty).map_err(Error::io(format!("creating {}", empty.display())))?;

    let full = plan.test_command.to_vec();
    // Each step with its command line: the claimed test alone, or the full suite. The base
    // run comes before any step on the patched tree (see above).
    let mut steps: Vec<(WitnessStep, Vec<String>)> = Vec::with_capacity(4);
    let one = plan
        .before_failing_test
        .map(|claimed| plan.runner.select_one(plan.test_command, claimed));
    if let Some(one) = &one {
        steps.push((WitnessStep::PinnedSelected, one.clone()));
    }
    steps.push((WitnessStep::BaseFull, full.clone()));
    if let Some(one) = one {
        steps.push((WitnessStep::PatchedSelected, one));
    }
    steps.push((WitnessStep::PatchedFull, full));
    let required: Vec<String> = required_tests(plan, &changes)
        .into_iter()
        .map(str::to_owned)
        .collect();
    let mut records = Vec::new();
    let mut failure = None;
    let mut inventory: Option<TestInventory> = None;
    // Every step runs at one path, so a test id that holds its tree's path (a fixture's
    // tmp path, a data file's location) is the same in the base and the patched runs.
    let at = scratch.path().join("tree");
    let base_key = BaseInventories::key(pin, plan, &executor.variables(plan.test_env));
    // A base run a warm-up is taking now (the run's registration started it) is waited for
    // and reused, not run a second time beside it.
    if let Some(kept) = kept {
        kept.wait_for_warm_up(&base_key, plan.timeout + Duration::from_secs(60));
    }
    let place = Place {
        executor,
        plan,
        at: &at,
        links: &links,
        empty: &empty,
        scratch: scratch.path(),
    };
    // A selected step run beside a full one runs at a path of its own, on a tree of its own:
    // its claimed test's id is the run's, never compared with the base inventory's.
    let beside_at = scratch.path().join("tree-selected");
    let beside = Place {
        at: &beside_at,
        ..place
    };
    let patched_beside: PathBuf = scratch.path().join("patched-selected");
    // The full step run at once with the selected step before it, waiting to be graded.
    let mut prefetched: Option<(WitnessStep, Result<StepRun>)> = None;
    let mut steps = steps.into_iter().peekable();
    while let Some((witness_step, argv)) = steps.next() {
        let tree: &Path = match witness_step {
            WitnessStep::PinnedSelected => &pinned,
            WitnessStep::PatchedSelected | WitnessStep::PatchedFull => &patched,
            WitnessStep::BaseFull => &base,
        };
        let (name, expect) = (witness_step.name(), witness_step.expectation());
        if tree == patched.as_path() && !patched_built {
            build_tree(
                repo,
                pin,
                &changes,
                &pinned_test_files,
                TreeKind::Patched,
                &patched,
            )?;
            patched_built = true;
        }
        // A base run kept from an earlier witness at this pin is not run again.
        let reused = match (witness_step, kept) {
            (WitnessStep::BaseFull, Some(kept)) => kept.reuse(&base_key, &at),
            _ => None,
        };
        if let Some(out) = reused {
            let taken = out.inventory.clone();
            take_inventory(
                &mut changes,
                &mut pinned_test_files,
                &mut collected_test_files,
                (plan.runner, taken.as_ref(), &base),
            );
            inventory = taken;
            records.push(StepRecord {
                step: witness_step,
                output: out,
            });
            continue;
        }
        let partner = steps
            .peek()
            .filter(|(next, _)| runs_beside(witness_step, *next))
            .filter(|(next, _)| {
                *next != WitnessStep::BaseFull || !kept.is_some_and(|k| k.has(&base_key))
            })
            .cloned();
        let extra = partner
            .as_ref()
            .and(plan.spare_slots)
            .and_then(WitnessSlots::try_acquire);
        let ran = match (prefetched.take(), partner, extra) {
            (Some((step, ran)), _, _) if step == witness_step => ran,
            (_, Some((next, next_argv)), Some(_extra)) => {
                let (own_tree, next_tree): (&Path, &Path) = match witness_step {
                    WitnessStep::PinnedSelected => (&pinned, &base),
                    _ => {
                        build_tree(
                            repo,
                            pin,
                            &changes,
                            &pinned_test_files,
                            TreeKind::Patched,
                            &patched_beside,
                        )?;
                        (&patched_beside, &patched)
                    }
                };
                let (own, theirs) = std::thread::scope(|s| {
                    let theirs = s.spawn(|| {
                        place.run(next_tree, next, next_argv, &changes, &pinned_test_files)
                    });
                    let own =
                        beside.run(own_tree, witness_step, argv, &changes, &pinned_test_files);
                    (own, theirs.join())
                });
                let theirs = theirs.unwrap_or_else(|_| {
                    Err(Error::Witness(format!("the {next} step's thread panicked")))
                });
                prefetched = Some((next, theirs));
                own
            }
            _ => place.run(tree, witness_step, argv, &changes, &pinned_test_files),
        };
        let StepRun {
            mut out,
            parsed,
            report_problem,
        } = ran?;
        match expect {
            Expectation::Inventory => {
                let taken = take_base_inventory(plan.runner, &parsed, &out)?;
                take_inventory(
                    &mut changes,
                    &mut pinned_test_files,
                    &mut collected_test_files,
                    (plan.runner, Some(&taken), &base),
                );
                out.inventory = Some(taken.clone());
                inventory = Some(taken);
                if let Some(kept) = kept
                    && out.grade == Grade::Ok
                {
                    kept.keep(&base_key, &at, &out);
                }
            }
            Expectation::Green => {
                let Some(taken) = &inventory else {
                    return Err(Error::Witness(
                        "the patched full run came before the base inventory".to_owned(),
                    ));
                };
                let required: Vec<&str> = required.iter().map(String::as_str).collect();
                let mut verdict = results::grade_full_run(taken, &parsed, out.exit_code, &required);
                // A reused base run can only spare time, never decide: graded short against
                // it (a test id that holds the tree's path in a form not moved), the base
                // runs again here and the patched run is graded against that.
                let base_at = records
                    .iter()
                    .position(|r: &StepRecord| r.step == WitnessStep::BaseFull);
                if verdict.failure().is_some()
                    && let Some(i) = base_at.filter(|i| records[*i].output.reused.is_some())
                {
                    let fresh = place.run(
                        &base,
                        WitnessStep::BaseFull,
                        plan.test_command.to_vec(),
                        &changes,
                        &pinned_test_files,
                    )?;
                    let mut base_out = fresh.out;
                    let retaken = take_base_inventory(plan.runner, &fresh.parsed, &base_out)?;
                    verdict = results::grade_full_run(&retaken, &parsed, out.exit_code, &required);
                    base_out.inventory = Some(retaken.clone());
                    if let Some(kept) = kept
                        && base_out.grade == Grade::Ok
                    {
                        kept.keep(&base_key, &at, &base_out);
                    }
                    records[i].output = base_out;
                    inventory = Some(retaken);
                }
                out.grade = match (&verdict.invalid, &report_problem, verdict.failure()) {
                    (Some(why), _, _) | (None, Some(why), _) => Grade::Invalid(why.clone()),
                    (None, None, Some(why)) => Grade::NotOk(why),
                    (None, None, None) => Grade::Ok,
                };
                out.full_run = Some(verdict);
            }
            Expectation::Fail | Expectation::Pass => {}
        }
        let grade = out.grade.clone();
        records.push(StepRecord {
            step: witness_step,
            output: out,
        });
        match grade {
            Grade::Ok => {}
            Grade::NotOk(why) => {
                failure = Some(format!("{name} (must {expect}): {why}"));
                break;
            }
            Grade::Invalid(why) => {
                failure = Some(format!("{name} (must {expect}) is invalid: {why}"));
                break;
            }
        }
    }
    restore_writable(scratch.path());
    Ok(WitnessReport {
        green: failure.is_none(),
        steps: records,
        failure,
        collected_test_files,
    })
}

/// A fresh scratch directory `PREFIX*` in `work_dir` (created when missing), removed when
/// dropped; [`remove_stale_scratch`] removes what a killed broker left.
fn scratch_dir(work_dir: &Path, prefix: &str) -> Result<tempfile::TempDir> {
    std::fs::create_dir_all(work_dir)
        .map_err(Error::io(format!("creating {}", work_dir.display())))?;
    tempfile::Builder::new()
        .prefix(prefix)
        .tempdir_in(work_dir)
        .map_err(Error::io(format!(
            "creating a witness directory in {}",
            work_dir.display()
        )))
}

/// Remove witness scratch directories a killed broker left in `work_dir`. Call only when no
/// other witness can be running there (the serving broker holds the socket).
pub fn remove_stale_scratch(work_dir: &Path) -> Result<usize> {
    let Ok(entries) = std::fs::read_dir(work_dir) else {
        return Ok(0);
    };
    let mut removed = 0;
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let is_scratch = (name.starts_with("witness-") || name.starts_with(warm::WARM_UP_PREFIX))
            && entry.file_type().is_ok_and(|t| t.is_dir());
        if is_scratch {
            restore_writable(&entry.path());
            std::fs::remove_dir_all(entry.path())
                .map_err(Error::io(format!("removing {}", entry.path().display())))?;
            removed += 1;
        }
    }
    Ok(removed)
}

/// Give write permission back so the scratch directory can be removed.
fn restore_writable(root: &Path) {
    use std::os::unix::fs::PermissionsExt;
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let Ok(meta) = entry.path().symlink_metadata() else {
                continue;
            };
            if meta.is_dir() {
                stack.push(entry.path());
            } else if meta.is_file() {
                let mode = meta.permissions().mode() | 0o200;
                let _ =
                    std::fs::set_permissions(entry.path(), std::fs::Permissions::from_mode(mode));
            }
        }
    }
}

#[cfg(test)]
mod same_path_tests;

#[cfg(test)]
mod guard_tests {
    use super::*;

    fn tree(files: &[&str]) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        for f in files {
            let path = dir.path().join(f);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, "").unwrap();
        }
        dir
    }

    fn strings(items: &[&str]) -> Vec<String> {
        items.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn a_directory_of_tests_only_is_one_mount_and_a_mixed_one_a_mount_per_file() {
        let dir = tree(&[
            "calc/ops.py",
            "tests/unit/test_a.py",
            "tests/unit/test_b.py",
            "tests/unit/deep/test_c.py",
            "tests/io/test_d.py",
            "tests/io/data.json",
            "test_root.py",
        ]);
        let protected = strings(&[
            "tests/unit/test_a.py",
            "tests/unit/test_b.py",
            "tests/unit/deep/test_c.py",
            "tests/io/test_d.py",
            "test_root.py",
            // Listed but absent from this tree (a new test file, in the base tree).
            "tests/new/test_e.py",
        ]);
        let guard = read_only_guard(dir.path(), &protected, &[]);
        assert_eq!(
            guard.read_only,
            strings(&["test_root.py", "tests/io/test_d.py", "tests/unit"])
        );
        assert_eq!(guard.no_pycache, strings(&["", "tests/io"]));
    }

    #[test]
    fn a_directory_holding_a_prepared_link_is_never_mounted_whole() {
        let dir = tree(&["web/test/a.test.js", "web/test/b.test.js"]);
        let protected = strings(&["web/test/a.test.js", "web/test/b.test.js"]);
        let guard = read_only_guard(dir.path(), &protected, &strings(&["web/node_modules"]));
        assert_eq!(guard.read_only, strings(&["web/test"]));
        let guard = read_only_guard(dir.path(), &protected, &strings(&["web/test/fixtures"]));
        assert_eq!(guard.read_only, protected);
        assert_eq!(guard.no_pycache, strings(&["web/test"]));
    }
}
