//! `run_tests`: the test command in the sandbox on an overlay of the worktree. A narrow run is
//! judged by its exit code, a full run against the base inventory (and counted against the
//! full-run budget); after a green full run the model is handed the diff digest the broker
//! will recompute.

use super::{Flow, Tool, ToolReply, Toolbox, args};
use crate::ledger::Result;
use crate::ports::TestReport;
use crate::trajectory::TrajectoryEvent;
use airlock_audit::{BlockedNetwork, Event, TestResult, TestScope};
use airlock_model::{ToolCall, ToolSpec};
use airlock_policies::testrun::{FullRunVerdict, grade_full_run, new_test_files_required};
use serde::Deserialize;
use serde_json::json;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TestArgs {
    #[serde(default)]
    selector: Option<String>,
}

/// `run_tests`' spec.
pub(super) fn spec() -> ToolSpec {
    ToolSpec {
        name: Tool::RunTests.name().into(),
        description: "Run the test command in the sandbox on an overlay of the worktree \
                      (side effects never reach the diff; no network beyond the sandbox's own loopback \
                      unless the operator's allowlist admits a host). With a selector, a \
                      narrow run; without one, a full run, which counts against your \
                      full-run budget."
            .into(),
        input_schema: json!({
            "type": "object", "additionalProperties": false,
            "properties": {"selector": {"type": "string", "description": "One test name in the configured style; omit for a full run."}}
        }),
    }
}

pub(super) fn run_tests(tb: &mut Toolbox<'_>, call: &ToolCall) -> Result<ToolReply> {
    let selector = match args::<TestArgs>(call) {
        Ok(a) => a.selector,
        Err(reply) => return Ok(reply),
    };
    let config = tb.run.config;
    let max_full_runs = config.budgets.max_full_runs;
    if let Some(sel) = &selector
        && let Err(why) = config.tests.selector_style.check(sel)
    {
        return Ok(ToolReply::error(format!(
            "{} refused: {why}",
            Tool::RunTests.name()
        )));
    }
    if selector.is_none() {
        if tb.ledger.counts.full_runs >= max_full_runs {
            return Ok(ToolReply {
                text: format!("full-run budget spent ({max_full_runs} full runs)"),
                is_error: true,
                flow: Flow::Park(
                    crate::park::ParkedOn::MaxFullRuns,
                    format!("MAX_FULL_RUNS ({max_full_runs}) spent"),
                ),
                read: None,
            });
        }
        tb.ledger.counts.full_runs += 1;
    }
    let report = tb.tests.run(selector.as_deref());
    // A narrow run is judged by its exit code; a full run against the base inventory.
    let verdict: Option<FullRunVerdict> = match &report {
        Ok(r) if r.selector.is_none() => {
            let required = new_test_files_required(
                config.tests.runner,
                tb.ledger.work.new_test_files.iter().map(String::as_str),
            );
            let exit = if r.timed_out { None } else { r.exit_code };
            Some(grade_full_run(
                &tb.baseline.inventory,
                &r.parsed,
                exit,
                &required,
            ))
        }
        _ => None,
    };
    let green = |r: &TestReport| match &verdict {
        Some(v) => v.green,
        None => r.exit_ok(),
    };
    let reply = match &report {
        Ok(r) => {
            let word = if green(r) {
                "green"
            } else if r.timed_out {
                "timed out"
            } else {
                "red"
            };
            tb.ledger.facts.test_runs.push(format!(
                "{} -> {word}",
                r.selector.as_deref().unwrap_or("full")
            ));
            if r.selector.is_none() {
                tb.ledger.work.green_full_since_write = green(r);
            }
            let against_base = verdict
                .as_ref()
                .map(|v| format!("\nAgainst the base inventory: {}", v.summary()))
                .unwrap_or_default();
            tb.ledger.record(&TrajectoryEvent::FullRunVerdict {
                selector: r.selector.as_deref(),
                verdict: verdict.as_ref(),
            })?;
            let budget_used = if selector.is_none() {
                format!(
                    "; full runs used {}/{max_full_runs}",
                    tb.ledger.counts.full_runs
                )
            } else {
                String::new()
            };
            let network = if r.blocked.is_empty() {
                String::new()
            } else {
                tb.ledger.record(&TrajectoryEvent::NetworkBlocked {
                    selector: r.selector.as_deref(),
                    blocked: &r.blocked,
                })?;
                tb.ledger.append(Event::NetworkBlocked {
                    command: if r.selector.is_some() {
                        "narrow"
                    } else {
                        "full"
                    }
                    .into(),
                    attempts: r
                        .blocked
                        .iter()
                        .map(|b| BlockedNetwork {
                            target: b.target(),
                            reason: b.reason.to_string(),
                        })
                        .collect(),
                })?;
                for attempt in &r.blocked {
                    tb.ledger.work.network_blocked.insert(attempt.clone());
                }
                let lines: Vec<String> = r
                    .blocked
                    .iter()
                    .map(|b| format!("\n- {}", b.sentence()))
                    .collect();
                format!(
                    "\nNetwork: the sandbox's egress proxy refused these attempts (the run's \
                     allowlist, [tests] allow, decides; a test that needs them fails here and \
                     in the broker's witness alike):{}",
                    lines.concat()
                )
            };
            ToolReply::ok(format!(
                "{} run: {word} (exit code {}){budget_used}{against_base}{network}\n{}",
                if r.selector.is_some() {
                    "selected"
                } else {
                    "full"
                },
                r.exit_code
                    .map(|c| c.to_string())
                    .unwrap_or_else(|| "none".into()),
                r.output
            ))
        }
        Err(e) => ToolReply::error(format!("{} failed: {e}", Tool::RunTests.name())),
    };
    // After a green full run, hand the model the digest the broker will recompute, so the
    // open_pr claim is filled from the tree rather than from memory.
    let reply = match &report {
        Ok(r) if r.selector.is_none() && green(r) => {
            let extra = match tb
                .policy
                .compute_digest(tb.worktree.root(), tb.run.base_commit)
            {
                Ok(digest) => format!(
                    "\nThe diff digest of the worktree now (use it as {}.diff_digest):\n{}",
                    Tool::OpenPr.name(),
                    serde_json::to_string(&digest.to_diff_digest()).unwrap_or_default()
                ),
                Err(e) => format!("\n(the diff digest could not be computed: {e})"),
            };
            ToolReply {
                text: reply.text + &extra,
                ..reply
            }
        }
        _ => reply,
    };
    let result = match &report {
        Ok(r) if green(r) => TestResult::Passed,
        Ok(r) if r.timed_out => TestResult::TimedOut,
        Ok(r) if r.exit_code.is_some() => TestResult::Failed,
        _ => TestResult::Error,
    };
    tb.ledger.append(Event::TestRun {
        scope: if selector.is_some() {
            TestScope::Narrow
        } else {
            TestScope::Full
        },
        selector,
        result,
        witness: false,
    })?;
    Ok(reply)
}
