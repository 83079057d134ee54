//! Every line a real run writes to its trajectory satisfies `schemas/trajectory_event.json`:
//! scripted runs over the fixture repository that between them record most kinds (a fix with
//! refused writes, test runs and a queued pull request; a repaired final message; a parked
//! run).

use crate::fixture::*;
use airlock_schemas::Schema;
use airlock_supervisor::runner::RunReport;
use serde_json::json;
use std::collections::BTreeSet;

const NEW_TEST: &str = "import unittest\n\nfrom calc.ops import add\n\n\nclass AddTest(unittest.TestCase):\n    def test_add(self):\n        self.assertEqual(add(2, 3), 5)\n";

/// Validate every line of the run's trajectory; the kinds it holds.
fn validated(report: &RunReport) -> BTreeSet<String> {
    let mut kinds = BTreeSet::new();
    for line in trajectory(report) {
        let violations = Schema::TrajectoryEvent.violations(&line).unwrap();
        assert!(violations.is_empty(), "{line}\n{violations:#?}");
        kinds.insert(line["kind"].as_str().unwrap().to_owned());
    }
    kinds
}

fn fix_with_refusals(fx: &Fixture) -> RunReport {
    let config = fx.config("max_turns = 14\nmax_full_runs = 2\nmax_refusals = 5");
    let issue = fx.issue(ready_issue());
    let open_pr = json!({
        "issue_id": "CALC-7",
        "base_commit": fx.commit,
        "title": "fix: add() adds instead of subtracting",
        "body": "add() subtracted its arguments. It now adds them; tests.test_add covers it.",
        "scope": "source-plus-new-tests",
        "diff_digest": {
            "files_changed": ["calc/ops.py", "tests/test_add.py"],
            "insertions": 9, "deletions": 1,
            "test_files_added": ["tests/test_add.py"], "test_files_modified": [],
            "assertions_removed": 0, "skip_markers_added": 0
        },
        "test_evidence": {
            "before_selector": "tests.test_add",
            "before_failing_test": "tests.test_add.AddTest.test_add",
            "after_full_run": "green", "witness_run": "green"
        },
        "confidence": 0.85
    });
    let mut done = outcome("pr", 0.85);
    done["files_changed"] = json!(["calc/ops.py", "tests/test_add.py"]);
    let mut missing = done.clone();
    missing.as_object_mut().unwrap().remove("root_cause");
    let model = fx.script(&[
        call("search_repo", json!({"query": "add sum"})),
        call(
            "read_file",
            json!({"path": "calc/ops.py", "start_line": 1, "end_line": 10}),
        ),
        call(
            "write_file",
            json!({"path": ".github/workflows/ci.yml", "content": "on: push\n"}),
        ),
        call(
            "edit_file",
            json!({"path": ".GitHub/workflows/release.yml", "old_text": "a", "new_text": "b"}),
        ),
        call(
            "write_file",
            json!({"path": "tests/test_add.py", "content": NEW_TEST}),
        ),
        call("run_tests", json!({"selector": "tests.test_add"})),
        call(
            "edit_file",
            json!({"path": "calc/ops.py", "old_text": "return a - b", "new_text": "return a + b"}),
        ),
        call("open_pr", open_pr.clone()),
        call("run_tests", json!({})),
        call("open_pr", open_pr),
        json!({"text": missing.to_string()}),
        json!({"text": done.to_string()}),
    ]);
    fx.run(&issue, &model, &config, &BrokerStub::default())
}

fn parked_on_turns(fx: &Fixture) -> RunReport {
    let config = fx.config("max_turns = 2");
    let issue = fx.issue(ready_issue());
    let model = fx.script(&[
        call("search_repo", json!({"query": "add"})),
        call(
            "read_file",
            json!({"path": "calc/ops.py", "start_line": 4, "end_line": 6}),
        ),
        json!({"text": "I ran out of turns."}),
    ]);
    fx.run(&issue, &model, &config, &BrokerStub::default())
}

pub fn every_line_of_real_runs_satisfies_the_trajectory_schema() {
    let mut seen = BTreeSet::new();
    let fx = Fixture::new();
    let report = fix_with_refusals(&fx);
    assert_eq!(report.model_finish_problem, None);
    seen.extend(validated(&report));
    let fx = Fixture::new();
    seen.extend(validated(&parked_on_turns(&fx)));
    for kind in [
        "run_started",
        "skill_call",
        "triage",
        "test_baseline",
        "message",
        "tool_call",
        "tool_result",
        "policy_refusal",
        "full_run_verdict",
        "open_pr_reply",
        "repair_prompt",
        "budget_exhausted",
        "outcome",
        "model_usage",
    ] {
        assert!(seen.contains(kind), "no {kind} line in {seen:?}");
    }
}
