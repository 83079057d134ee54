//! The broker's own change set (the tree against the pin) within the shared rules: every
//! path the run's write allowlist and the always-refused classes permit, no new Python module
//! shadowing one the tests import, no refusing test-code rule, and a documentation run touching
//! no test and claiming none. The rules are `airlock-policies`'s, reached through [`Rules`].

use std::path::Path;

use airlock_policies::{TestCodeAction, TestCodeFinding};
use airlock_schemas::OpenPr;

use super::refusal::{Refusal, Stage};
use super::tree::Checkout;
use crate::changes::{self, ChangeSet};
use crate::error::{Error, Result};
use crate::rules::Rules;
use airlock_protocol::{ChangeKind, RunRegistration};

/// A change set the policy allows, and the test-code findings that only flag.
pub struct Allowed {
    /// The call and the trees.
    pub checkout: Checkout,
    /// The broker's own change set.
    pub changes: ChangeSet,
    /// Every test-code finding (none refusing): flags for the approver.
    pub test_code: Vec<TestCodeFinding>,
}

/// Collect the change set from the checked-out tree and hold it to the policy.
pub fn check(rules: &dyn Rules, run: &RunRegistration, checkout: Checkout) -> Stage<Allowed> {
    let Checkout {
        call,
        repo,
        pin,
        tree,
    } = &checkout;
    let is_test = |p: &str| rules.is_test_file(p);
    let changes = changes::collect(repo, *pin, tree.path(), &is_test)?;
    if let Some(refusal) = rules.check_writes(&run.write_allowlist, &changes)? {
        return Err(Refusal::Policy {
            offending: refusal.path,
            rule: refusal.rule,
            reason: refusal.reason,
        }
        .into());
    }
    if let Some(refusal) = shadowing_module(repo, *pin, &changes)? {
        return Err(refusal.into());
    }
    let test_code = test_code_findings(repo, *pin, &changes, rules)?;
    if let Some(refusing) = test_code
        .iter()
        .find(|f| f.action == TestCodeAction::Refuse)
    {
        return Err(Refusal::TestCode(Box::new(refusing.clone())).into());
    }
    if run.change == ChangeKind::Docs
        && let Some(refusal) = docs_change_refusal(&changes, call)
    {
        return Err(refusal.into());
    }
    Ok(Allowed {
        checkout,
        changes,
        test_code,
    })
}

/// A newly added Python file that would be imported instead of a standard-library or
/// test-runner module (`unittest/__main__.py`, `pytest.py`, `tests/json.py`): refused, since
/// the test run itself would import it.
fn shadowing_module(
    repo: &git2::Repository,
    pin: git2::Oid,
    changes: &ChangeSet,
) -> Result<Option<Refusal>> {
    let tree = repo
        .find_commit(pin)
        .and_then(|c| c.tree())
        .map_err(Error::git("reading the pinned tree"))?;
    let pinned = |path: &str| tree.get_path(Path::new(path)).is_ok();
    let is_package = |dir: &str| {
        let init = format!("{dir}/__init__.py");
        match changes.files.iter().find(|c| c.path == init) {
            Some(change) => change.kind != changes::ChangeKind::Deleted,
            None => pinned(&init),
        }
    };
    for change in &changes.files {
        if change.kind != changes::ChangeKind::Added {
            continue;
        }
        if let Some(module) =
            airlock_policies::shadowed_python_module(&change.path, &is_package, &pinned)
        {
            return Ok(Some(Refusal::policy(
                &change.path,
                "shadowing-module",
                &format!(
                    "a new {} would be imported in place of the {module:?} module the tests \
                     (or their runner) import",
                    change.path
                ),
            )));
        }
    }
    Ok(None)
}

/// Every test-code rule that fires on a test file the change adds or modifies (its new text
/// against the pinned one): test infrastructure written as a test file, and import-time patches.
fn test_code_findings(
    repo: &git2::Repository,
    pin: git2::Oid,
    changes: &ChangeSet,
    rules: &dyn Rules,
) -> Result<Vec<TestCodeFinding>> {
    let tree = repo
        .find_commit(pin)
        .and_then(|c| c.tree())
        .map_err(Error::git("reading the pinned tree"))?;
    let mut out = Vec::new();
    // Every changed file: the rules for test files, and those for source that reaches into
    // the test process.
    for change in &changes.files {
        let Some(content) = &change.content else {
            continue;
        };
        let old = tree
            .get_path(Path::new(&change.path))
            .ok()
            .and_then(|entry| entry.to_object(repo).ok())
            .and_then(|object| object.peel_to_blob().ok())
            .map(|blob| String::from_utf8_lossy(blob.content()).into_owned());
        let new = String::from_utf8_lossy(content);
        out.extend(rules.check_test_code(&change.path, old.as_deref(), &new));
    }
    Ok(out)
}

/// What a documentation run's submission may not do, checked on the broker's own change set:
/// touch a test file, or claim a fail-to-pass test (its witness runs none, so the approver
/// must not be shown one as if it had been checked).
fn docs_change_refusal(changes: &ChangeSet, call: &OpenPr) -> Option<Refusal> {
    if let Some(test) = changes.files.iter().find(|c| c.is_test) {
        return Some(Refusal::policy(
            &test.path,
            "docs_change_touches_no_test",
            &format!(
                "{} is a test file; a documentation run changes documentation only",
                test.path
            ),
        ));
    }
    let evidence = &call.test_evidence;
    if !evidence.before_failing_test.is_empty() || !evidence.before_selector.is_empty() {
        return Some(Refusal::policy(
            "test_evidence",
            "docs_change_claims_no_test",
            "a documentation run claims no fail-to-pass test (its witness is the full suite, \
             unchanged): leave test_evidence.before_selector and before_failing_test empty",
        ));
    }
    None
}
