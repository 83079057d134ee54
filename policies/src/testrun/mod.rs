//! The test rules both sides apply: which runner a command is, how one test is selected and the
//! suite collected, the per-test results parsed from the output of pytest, unittest, cargo test,
//! go test and jest/vitest, the base inventory, and grading in the manner of the SWE-bench
//! harness. Output is untrusted (the patch under test can print anything), so a verdict always
//! needs the exit code and the parsed results to agree, and a full run is green only when every
//! test that passed at base ran and passed again.

mod collect;
mod diagnose;
mod env;
mod inventory;
mod parsers;
mod report;
mod runner;

pub use collect::parse_collection;
pub use diagnose::hints;
pub use env::{
    FIXED_TEST_ENV, NO_BYTECODE_DIR, SANDBOX_TREE, TestEnvironment, TestService, TreeLink,
    is_fixed, valid_env_name,
};
pub use inventory::{
    FullRunVerdict, InventoryError, TestInventory, grade_full_run, new_test_files_required,
};
pub use report::{
    GUARD_CHANGED_SOURCE, JunitReport, MAX_REPORT_BYTES, PYTEST_GUARD, UNITTEST_REPORTER,
    parse_junit, report_disagreement,
};
pub use runner::TestRunner;

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The outcome of one test as reported by its runner.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TestStatus {
    /// Passed.
    Passed,
    /// Skipped, ignored, xfailed: never counts as a pass.
    Skipped,
    /// Failed an assertion.
    Failed,
    /// Errored (collection, set-up, import).
    Error,
}

/// What the parser found in one run's output.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ParsedRun {
    /// Every test named in the output with its worst reported status (a test reported both
    /// passed and failed counts as failed: a patch can print its own PASSED lines).
    pub tests: BTreeMap<String, TestStatus>,
    /// Whether the runner's own summary (e.g. `Ran 3 tests`, `test result:`) appeared.
    pub summary_seen: bool,
    /// The counts the runner's own summary line gives, by its word (`passed`, `failed`,
    /// `errors`, `skipped`, `xfailed`, `xpassed`, `deselected`): what it says of tests it does
    /// not name one by one (pytest's `-rA` names no skipped test).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub counts: BTreeMap<String, u64>,
    /// Why a failing test failed, where the runner says it on the test's line (pytest's
    /// `FAILED node - message`): the message, as printed.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub reasons: BTreeMap<String, String>,
}

impl ParsedRun {
    pub(crate) fn record(&mut self, name: &str, status: TestStatus) {
        let name = name.trim();
        if name.is_empty() {
            return;
        }
        let entry = self.tests.entry(name.to_owned()).or_insert(status);
        if status > *entry {
            *entry = status;
        }
    }

    /// Names of tests that failed or errored.
    pub fn failures(&self) -> Vec<&str> {
        self.tests
            .iter()
            .filter(|(_, s)| matches!(s, TestStatus::Failed | TestStatus::Error))
            .map(|(n, _)| n.as_str())
            .collect()
    }

    /// The status of `test` (a fully qualified name as the run claimed it), matching the
    /// runner's spelling (`a/b.py::C::t`, `a.b.C.t`, `C/t`) and, failing an exact match, a unique
    /// suffix on a name-component boundary.
    pub fn status_of(&self, test: &str) -> Option<TestStatus> {
        let want = normalise(test);
        if want.is_empty() {
            return None;
        }
        let mut exact = None;
        let mut suffix: Vec<TestStatus> = Vec::new();
        for (name, status) in &self.tests {
            let have = normalise(name);
            if have == want {
                exact = Some(exact.map_or(*status, |s: TestStatus| s.max(*status)));
            } else if have.ends_with(&format!(".{want}")) || want.ends_with(&format!(".{have}")) {
                suffix.push(*status);
            }
        }
        exact.or_else(|| suffix.into_iter().max())
    }
}

fn normalise(name: &str) -> String {
    let name = name
        .trim()
        .replace(".py::", ".")
        .replace("::", ".")
        .replace(['/', ' ', '>'], ".");
    let parts: Vec<&str> = name.split('.').filter(|p| !p.is_empty()).collect();
    parts.join(".")
}

/// Parse one run's output (stdout then stderr) for `runner`.
pub fn parse(runner: TestRunner, output: &str) -> ParsedRun {
    match runner {
        TestRunner::Pytest => parsers::pytest(output),
        TestRunner::Unittest => parsers::unittest(output),
        TestRunner::Cargo => parsers::cargo(output),
        TestRunner::Go => parsers::go(output),
        TestRunner::Jest | TestRunner::Vitest => parsers::jest_vitest(output),
    }
}

/// A grading verdict.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "verdict", content = "why", rename_all = "snake_case")]
pub enum Grade {
    /// The run shows what was required.
    Ok,
    /// The run shows the opposite of what was required.
    NotOk(String),
    /// The run cannot be trusted either way (nothing ran, or exit code and results disagree).
    Invalid(String),
}

impl Grade {
    /// Whether the requirement is met.
    pub fn is_ok(&self) -> bool {
        matches!(self, Grade::Ok)
    }
}

fn consistency(parsed: &ParsedRun, exit_code: Option<i32>) -> Option<Grade> {
    let ran = parsed.summary_seen || !parsed.tests.is_empty();
    match exit_code {
        None => Some(Grade::Invalid(
            "the test command was killed or timed out".to_owned(),
        )),
        Some(_) if !ran => Some(Grade::Invalid(
            "no test result and no sign that the suite ran".to_owned(),
        )),
        Some(0) if !parsed.failures().is_empty() => Some(Grade::Invalid(format!(
            "exit code 0 but failures reported: {}",
            parsed.failures().join(", ")
        ))),
        Some(code) if code != 0 && parsed.failures().is_empty() => Some(Grade::Invalid(format!(
            "exit code {code} with no parsed failure"
        ))),
        _ => None,
    }
}

/// The claimed fail-to-pass test on the pinned source (with the new tests): it must fail.
pub fn grade_must_fail(parsed: &ParsedRun, exit_code: Option<i32>, test: &str) -> Grade {
    if let Some(bad) = consistency(parsed, exit_code) {
        return bad;
    }
    match parsed.status_of(test) {
        Some(TestStatus::Failed | TestStatus::Error) => Grade::Ok,
        Some(TestStatus::Passed) => Grade::NotOk(format!(
            "{test} already passes on the pinned source: it is not fail-to-pass"
        )),
        Some(TestStatus::Skipped) => {
            Grade::NotOk(format!("{test} is skipped on the pinned source"))
        }
        None if exit_code != Some(0) => {
            // A new test module that cannot even import the fixed API fails as a module.
            let want = normalise(test);
            let module_failed = parsed.failures().iter().any(|f| {
                let f = normalise(f);
                want.starts_with(&format!("{f}."))
                    || format!(".{want}.").contains(&format!(".{f}."))
            });
            if module_failed {
                Grade::Ok
            } else {
                Grade::NotOk(format!("{test} does not appear among the results"))
            }
        }
        None => Grade::NotOk(format!("{test} does not appear among the results")),
    }
}

/// The claimed fail-to-pass test on the patched source: it must pass (skipped counts as failed).
pub fn grade_must_pass(parsed: &ParsedRun, exit_code: Option<i32>, test: &str) -> Grade {
    if let Some(bad) = consistency(parsed, exit_code) {
        return bad;
    }
    match parsed.status_of(test) {
        Some(TestStatus::Passed) if exit_code == Some(0) => Grade::Ok,
        Some(TestStatus::Passed) => Grade::NotOk(format!("{test} passed but the run failed")),
        Some(TestStatus::Skipped) => Grade::NotOk(format!("{test} was skipped: counts as failed")),
        Some(_) => Grade::NotOk(format!("{test} fails on the patched source")),
        None => Grade::NotOk(format!("{test} does not appear among the results")),
    }
}

/// The full suite on the patched source: it must be green.
pub fn grade_suite_green(parsed: &ParsedRun, exit_code: Option<i32>) -> Grade {
    if let Some(bad) = consistency(parsed, exit_code) {
        return bad;
    }
    let failures = parsed.failures();
    if exit_code == Some(0) && failures.is_empty() {
        Grade::Ok
    } else {
        Grade::NotOk(format!("failing: {}", failures.join(", ")))
    }
}

#[cfg(test)]
mod tests;
