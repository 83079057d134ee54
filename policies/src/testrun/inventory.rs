//! The base inventory (which tests the full command runs at the pin, and which of them fail
//! there) and the one rule both sides grade a full run by: green only when every test that
//! passed at base ran and passed again, no test fails that did not fail at base, the required
//! new tests ran and passed, and the exit code agrees with the results.

use super::{ParsedRun, TestRunner, TestStatus, normalise};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};

/// Why a base inventory could not be taken.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InventoryError {
    /// The base run was killed or timed out.
    #[error("the full test command did not finish at the pin (killed or timed out)")]
    Killed,
    /// The base run reported no test at all.
    #[error(
        "the full test command ran at the pin but reported no test{hint}: check the command \
         and the runner in [tests]"
    )]
    NoTests {
        /// What the listing or the exit code says.
        hint: String,
    },
}

/// The tests the full command runs at the pin, with their status there.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TestInventory {
    /// The runner whose names these are.
    pub runner: TestRunner,
    /// Every test the base run reported, with its status.
    pub tests: BTreeMap<String, TestStatus>,
    /// How many tests the runner's listing command found, where it has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub collected: Option<usize>,
    /// The base run's exit code.
    pub exit_code: Option<i32>,
    /// The counts of the runner's own summary line ([`ParsedRun::counts`]).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub runner_counts: BTreeMap<String, u64>,
    /// Why tests failed at base, where the runner says it ([`ParsedRun::reasons`]).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub reasons: BTreeMap<String, String>,
}

impl TestInventory {
    /// The inventory from the base full run's parsed output (and the listing's count).
    pub fn from_base_run(
        runner: TestRunner,
        parsed: &ParsedRun,
        exit_code: Option<i32>,
        collected: Option<usize>,
    ) -> Result<TestInventory, InventoryError> {
        if exit_code.is_none() {
            return Err(InventoryError::Killed);
        }
        if parsed.tests.is_empty() {
            let hint = match (collected, exit_code) {
                (Some(0), _) => " (the listing found no test either)".to_string(),
                (Some(n), _) if shows_results(parsed) => format!(
                    " although the listing found {n} and the runner's summary shows results: \
                     the command lacks the flag that names each test's result (pytest -rA, \
                     unittest -v, jest --verbose, vitest --reporter=verbose, go test -v)"
                ),
                (Some(n), _) => format!(
                    " although the listing found {n}: the output shows no result of the runner \
                     (see what it printed, below)"
                ),
                (None, Some(code)) if code != 0 => format!(" (exit code {code})"),
                _ => String::new(),
            };
            return Err(InventoryError::NoTests { hint });
        }
        Ok(TestInventory {
            runner,
            tests: parsed.tests.clone(),
            collected,
            exit_code,
            runner_counts: parsed.counts.clone(),
            reasons: parsed.reasons.clone(),
        })
    }

    /// Tests that passed at base: each must run and pass in a green full run.
    pub fn passing(&self) -> impl Iterator<Item = &str> {
        self.with_status(TestStatus::Passed)
    }

    /// Tests that failed or errored at base: known failures, neither required nor blamed.
    pub fn failing(&self) -> Vec<&str> {
        self.tests
            .iter()
            .filter(|(_, s)| matches!(s, TestStatus::Failed | TestStatus::Error))
            .map(|(n, _)| n.as_str())
            .collect()
    }

    /// Tests that errored at base (collection, set-up, import), apart from those that failed.
    pub fn errored(&self) -> usize {
        self.with_status(TestStatus::Error).count()
    }

    /// The doctor's line: `passed 409, failed 2, errors 1, skipped 15, xfailed 2, xpassed 0`,
    /// each from the runner's own summary where it gives one (it counts what it names no test
    /// of: pytest's `-rA` names no skipped test), else from the tests named.
    pub fn breakdown(&self) -> String {
        let named = |status| self.with_status(status).count() as u64;
        // The runner's summary counts by outcome (pytest's line), or only names tests.
        let counted = ["passed", "failed", "errors", "skipped"]
            .iter()
            .any(|w| self.runner_counts.contains_key(*w));
        let count = |word: &str, fallback: u64| {
            self.runner_counts
                .get(word)
                .copied()
                .unwrap_or(if counted { 0 } else { fallback })
        };
        let mut out = format!(
            "passed {}, failed {}, errors {}, skipped {}",
            count("passed", named(TestStatus::Passed)),
            count("failed", named(TestStatus::Failed)),
            count("errors", named(TestStatus::Error)),
            count("skipped", named(TestStatus::Skipped)),
        );
        for word in ["xfailed", "xpassed", "deselected"] {
            if let Some(n) = self.runner_counts.get(word) {
                out.push_str(&format!(", {word} {n}"));
            }
        }
        out
    }

    /// Tests skipped at base.
    pub fn skipped(&self) -> usize {
        self.with_status(TestStatus::Skipped).count()
    }

    fn with_status(&self, status: TestStatus) -> impl Iterator<Item = &str> {
        self.tests
            .iter()
            .filter(move |(_, s)| **s == status)
            .map(|(n, _)| n.as_str())
    }

    /// One line for a person or a model: `412 tests at base (collected 412): 409 pass, 2 fail,
    /// 1 skipped`.
    pub fn summary(&self) -> String {
        format!(
            "{} tests at base{}: {} pass, {} fail, {} skipped",
            self.tests.len(),
            self.collected
                .map(|n| format!(" (the listing found {n})"))
                .unwrap_or_default(),
            self.passing().count(),
            self.failing().len(),
            self.skipped()
        )
    }
}

/// Whether the runner's own summary counts tests that ran (pytest's `3 passed`, unittest's
/// `Ran 3 tests`), as opposed to none or only collection errors.
fn shows_results(parsed: &ParsedRun) -> bool {
    parsed.counts.iter().any(|(word, n)| {
        *n > 0
            && matches!(
                word.as_str(),
                "passed" | "failed" | "skipped" | "xfailed" | "xpassed" | "ran"
            )
    })
}

/// How a full run compares with the base inventory.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FullRunVerdict {
    /// Whether the run is green.
    pub green: bool,
    /// Tests the run reported.
    pub ran: usize,
    /// Tests that passed at base and did not appear at all (deselected, uncollected, not run).
    pub missing: Vec<String>,
    /// Tests that passed at base and were skipped.
    pub newly_skipped: Vec<String>,
    /// Tests that passed at base and now fail.
    pub regressed: Vec<String>,
    /// Tests not in the inventory (new tests) that fail or were skipped.
    pub new_not_passing: Vec<String>,
    /// Tests not in the inventory that passed.
    pub new_passing: Vec<String>,
    /// Required tests (the claimed fail-to-pass test, the new test files) that did not pass.
    pub required_missing: Vec<String>,
    /// Known failures (failing at base) that still fail: reported, not blamed.
    pub known_failures: Vec<String>,
    /// Exit code and results disagree, or nothing ran: the run cannot be trusted either way.
    pub invalid: Option<String>,
}

impl FullRunVerdict {
    /// The first reason the run is not green, for a refusal message; `None` when green.
    pub fn failure(&self) -> Option<String> {
        if self.green {
            return None;
        }
        if let Some(why) = &self.invalid {
            return Some(why.clone());
        }
        let list = |v: &[String]| {
            let mut s = v.iter().take(10).cloned().collect::<Vec<_>>().join(", ");
            if v.len() > 10 {
                s.push_str(&format!(" and {} more", v.len() - 10));
            }
            s
        };
        let mut parts = Vec::new();
        if !self.missing.is_empty() {
            parts.push(format!(
                "{} test(s) that passed at base did not run: {}",
                self.missing.len(),
                list(&self.missing)
            ));
        }
        if !self.newly_skipped.is_empty() {
            parts.push(format!(
                "{} test(s) that passed at base were skipped: {}",
                self.newly_skipped.len(),
                list(&self.newly_skipped)
            ));
        }
        if !self.regressed.is_empty() {
            parts.push(format!(
                "{} test(s) that passed at base now fail: {}",
                self.regressed.len(),
                list(&self.regressed)
            ));
        }
        if !self.new_not_passing.is_empty() {
            parts.push(format!(
                "new test(s) not passing: {}",
                list(&self.new_not_passing)
            ));
        }
        if !self.required_missing.is_empty() {
            parts.push(format!(
                "required test(s) did not run and pass: {}",
                list(&self.required_missing)
            ));
        }
        Some(parts.join("; "))
    }

    /// One line: `green: 413 ran, 1 new passing, 2 known failures` or the failure.
    pub fn summary(&self) -> String {
        match self.failure() {
            None => format!(
                "green: {} tests ran, {} new passing, {} known failure(s) at base",
                self.ran,
                self.new_passing.len(),
                self.known_failures.len()
            ),
            Some(why) => format!("not green ({} tests ran): {why}", self.ran),
        }
    }
}

/// Grade a full run against the base inventory. `required` are tests that must have run and
/// passed (matched by the runner's spellings, like the witness's claimed test).
pub fn grade_full_run(
    inventory: &TestInventory,
    parsed: &ParsedRun,
    exit_code: Option<i32>,
    required: &[&str],
) -> FullRunVerdict {
    let mut v = FullRunVerdict {
        ran: parsed.tests.len(),
        ..FullRunVerdict::default()
    };
    let Some(code) = exit_code else {
        v.invalid = Some("the test command was killed or timed out".into());
        return v;
    };
    if parsed.tests.is_empty() {
        v.invalid = Some(if parsed.summary_seen {
            "the run reported no test".into()
        } else {
            "no test result and no sign that the suite ran".into()
        });
        return v;
    }
    for name in inventory.passing() {
        match parsed.tests.get(name) {
            None => v.missing.push(name.to_string()),
            Some(TestStatus::Passed) => {}
            Some(TestStatus::Skipped) => v.newly_skipped.push(name.to_string()),
            Some(TestStatus::Failed | TestStatus::Error) => v.regressed.push(name.to_string()),
        }
    }
    let known: BTreeSet<&str> = inventory.failing().into_iter().collect();
    let mut any_failure = false;
    for (name, status) in &parsed.tests {
        let failing = matches!(status, TestStatus::Failed | TestStatus::Error);
        any_failure |= failing;
        if known.contains(name.as_str()) {
            if failing {
                v.known_failures.push(name.clone());
            }
            continue;
        }
        if inventory.tests.contains_key(name) {
            // Passed or skipped at base: handled above (a test skipped at base may pass now).
            if failing && inventory.tests.get(name) == Some(&TestStatus::Skipped) {
                v.regressed.push(name.clone());
            }
            continue;
        }
        match status {
            TestStatus::Passed => v.new_passing.push(name.clone()),
            _ => v.new_not_passing.push(name.clone()),
        }
    }
    for want in required {
        let passed = parsed.status_of(want) == Some(TestStatus::Passed)
            || tests_under(parsed, want).is_some_and(|all_pass| all_pass);
        if !passed {
            v.required_missing.push((*want).to_string());
        }
    }
    if code == 0 && any_failure {
        v.invalid = Some(format!(
            "exit code 0 but failures reported: {}",
            parsed.failures().join(", ")
        ));
    } else if code != 0 && !any_failure {
        v.invalid = Some(format!("exit code {code} with no parsed failure"));
    }
    v.green = v.invalid.is_none()
        && v.missing.is_empty()
        && v.newly_skipped.is_empty()
        && v.regressed.is_empty()
        && v.new_not_passing.is_empty()
        && v.required_missing.is_empty();
    v
}

/// The new test files a green full run must show passing tests of: those whose tests the
/// runner names by module path (Python files under pytest and unittest). Other runners' names
/// do not say which file a test is in; for them the claimed test alone is required.
pub fn new_test_files_required<'a>(
    runner: TestRunner,
    new_test_files: impl IntoIterator<Item = &'a str>,
) -> Vec<&'a str> {
    if !matches!(runner, TestRunner::Pytest | TestRunner::Unittest) {
        return Vec::new();
    }
    new_test_files
        .into_iter()
        .filter(|p| p.ends_with(".py"))
        .filter(|p| {
            let name = p.rsplit('/').next().unwrap_or(p);
            // conftest.py and __init__.py hold no tests of their own.
            name != "conftest.py" && name != "__init__.py"
        })
        .collect()
}

/// For a required name that is a module or file (`tests/test_new.py`, `tests.test_new`):
/// `Some(true)` when tests under it ran and all passed, `Some(false)` when some did not pass,
/// `None` when none ran.
fn tests_under(parsed: &ParsedRun, module: &str) -> Option<bool> {
    let stem = module
        .strip_suffix(".py")
        .or_else(|| module.strip_suffix(".rs"))
        .unwrap_or(module);
    let want = normalise(stem);
    if want.is_empty() {
        return None;
    }
    let prefix = format!("{want}.");
    let mut seen = false;
    let mut all = true;
    for (name, status) in &parsed.tests {
        let have = normalise(name);
        if have.starts_with(&prefix) {
            seen = true;
            all &= *status == TestStatus::Passed;
        }
    }
    seen.then_some(all)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(entries: &[(&str, TestStatus)]) -> ParsedRun {
        let mut p = ParsedRun {
            summary_seen: true,
            ..ParsedRun::default()
        };
        for (n, s) in entries {
            p.record(n, *s);
        }
        p
    }

    fn base() -> TestInventory {
        let parsed = run(&[
            ("t.test_a", TestStatus::Passed),
            ("t.test_b", TestStatus::Passed),
            ("t.test_broken", TestStatus::Failed),
            ("t.test_later", TestStatus::Skipped),
        ]);
        TestInventory::from_base_run(TestRunner::Unittest, &parsed, Some(1), None).unwrap()
    }

    #[test]
    fn a_run_of_only_the_new_test_is_not_green() {
        let v = grade_full_run(
            &base(),
            &run(&[("t_new.test_fix", TestStatus::Passed)]),
            Some(0),
            &["t_new.test_fix"],
        );
        assert!(!v.green);
        assert_eq!(v.missing, vec!["t.test_a", "t.test_b"]);
        assert!(
            v.failure()
                .unwrap()
                .contains("did not run: t.test_a, t.test_b")
        );
    }

    #[test]
    fn known_failures_are_neither_required_nor_blamed() {
        let v = grade_full_run(
            &base(),
            &run(&[
                ("t.test_a", TestStatus::Passed),
                ("t.test_b", TestStatus::Passed),
                ("t.test_broken", TestStatus::Failed),
                ("t_new.test_fix", TestStatus::Passed),
            ]),
            Some(1),
            &["t_new.test_fix"],
        );
        assert!(v.green, "{v:?}");
        assert_eq!(v.known_failures, vec!["t.test_broken"]);
        assert_eq!(v.new_passing, vec!["t_new.test_fix"]);
    }

    #[test]
    fn skipped_regressed_and_exit_code_disagreement() {
        let v = grade_full_run(
            &base(),
            &run(&[
                ("t.test_a", TestStatus::Skipped),
                ("t.test_b", TestStatus::Failed),
            ]),
            Some(1),
            &[],
        );
        assert_eq!(v.newly_skipped, vec!["t.test_a"]);
        assert_eq!(v.regressed, vec!["t.test_b"]);
        assert!(!v.green);
        let v = grade_full_run(
            &base(),
            &run(&[
                ("t.test_a", TestStatus::Passed),
                ("t.test_b", TestStatus::Passed),
            ]),
            Some(3),
            &[],
        );
        assert!(v.invalid.unwrap().contains("exit code 3"));
    }

    #[test]
    fn a_required_module_must_have_passing_tests() {
        let all = [
            ("t.test_a", TestStatus::Passed),
            ("t.test_b", TestStatus::Passed),
            ("tests.test_new.T.test_x", TestStatus::Passed),
        ];
        let v = grade_full_run(&base(), &run(&all), Some(0), &["tests/test_new.py"]);
        assert!(v.green, "{v:?}");
        let v = grade_full_run(&base(), &run(&all[..2]), Some(0), &["tests/test_new.py"]);
        assert_eq!(v.required_missing, vec!["tests/test_new.py"]);
    }

    #[test]
    fn an_empty_base_run_is_an_error() {
        let err = TestInventory::from_base_run(
            TestRunner::Pytest,
            &ParsedRun::default(),
            Some(5),
            Some(12),
        )
        .unwrap_err();
        assert!(err.to_string().contains("listing found 12"), "{err}");
    }
}
