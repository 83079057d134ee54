//! The demo's closing report: both audit chains verified with `airlock audit verify`, the
//! injection queue, `summary.json`, the summary table, and the commands an approver would run
//! on the queue.

use anyhow::Context;
use serde_json::{Value, json};
use std::path::Path;
use std::process::Command;

use super::check::{DemoPaths, Verdict};
use super::fixtures::write;

/// Verify both audit logs' chains and print the supervisors' injection queue; whether both
/// chains are intact.
pub(super) fn audit_logs(exe: &Path, workdir: &Path) -> anyhow::Result<bool> {
    outln!("\n== audit logs");
    let mut chains_ok = true;
    for log in ["audit.jsonl", "broker-audit.jsonl"] {
        let path = workdir.join(log);
        let out = Command::new(exe)
            .args(["audit", "verify", "--log"])
            .arg(&path)
            .output()
            .context("running airlock audit verify")?;
        let ok = out.status.success();
        chains_ok &= ok;
        outln!(
            "  airlock audit verify --log {}: {}",
            path.display(),
            if ok { "chain intact" } else { "CHAIN BROKEN" }
        );
    }
    let injections = Command::new(exe)
        .args(["audit", "injections", "--log"])
        .arg(workdir.join("audit.jsonl"))
        .output()
        .context("running airlock audit injections")?;
    outln!(
        "  airlock audit injections --log {}:",
        workdir.join("audit.jsonl").display()
    );
    // Shown to the person as it was printed, indented; nothing is read from it.
    for line in String::from_utf8_lossy(&injections.stdout).lines() {
        outln!("    {line}");
    }
    Ok(chains_ok)
}

/// Write `summary.json`: one entry per scenario and whether the audit chains are intact.
pub(super) fn write_summary(
    workdir: &Path,
    verdicts: &[Verdict],
    chains_ok: bool,
) -> anyhow::Result<()> {
    let summary: Vec<Value> = verdicts
        .iter()
        .map(|v| {
            json!({"scenario": v.scenario, "expected": v.expected, "got": v.got, "pass": v.passed,
                   "run_id": v.run_id, "exit_code": v.exit_code, "queue_id": v.queue_id,
                   "problems": v.problems})
        })
        .collect();
    write(
        &workdir.join("summary.json"),
        &serde_json::to_string_pretty(
            &json!({"scenarios": summary, "audit_chains_intact": chains_ok}),
        )?,
    )
}

/// The summary table: one row per scenario, expected beside got.
pub(super) fn print_summary(verdicts: &[Verdict]) {
    outln!("\n== summary");
    let rows: Vec<[String; 4]> = verdicts
        .iter()
        .map(|v| {
            [
                v.scenario.to_string(),
                v.expected.to_string(),
                v.got.clone(),
                if v.passed { "pass" } else { "FAIL" }.to_string(),
            ]
        })
        .collect();
    print_table(&["SCENARIO", "EXPECTED", "GOT", "RESULT"], &rows);
}

/// The broker commands that review the queue the demo left, and whether they still can.
pub(super) fn print_review_hints(paths: &DemoPaths<'_>, verdicts: &[Verdict], kept: bool) {
    let broker_exe = paths.broker_exe.display();
    let config = paths.broker_toml.display();
    outln!("\n== review the queue as the approver would");
    outln!("  {broker_exe} --config {config} queue");
    if let Some(id) = verdicts.iter().find_map(|v| v.queue_id) {
        outln!("  {broker_exe} --config {config} show {id}");
        outln!("  {broker_exe} --config {config} approve {id} --by NAME");
        outln!(
            "  {broker_exe} --config {config} approve {id} --by NAME --confirm-risk --reason \"...\"   # a risky item (findings, flags)"
        );
        outln!("  {broker_exe} --config {config} deny {id} --reason \"...\"");
    }
    if kept {
        outln!(
            "  (the broker is stopped; these commands read its state in {})",
            paths.workdir.display()
        );
    } else {
        outln!(
            "  (this temporary work directory is removed now: run `airlock demo --keep` or `--workdir DIR` to review the queue afterwards)"
        );
    }
}

fn print_table(header: &[&str; 4], rows: &[[String; 4]]) {
    let mut widths = header.map(|h| h.chars().count());
    for row in rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let line = |cells: [&str; 4]| {
        let parts: Vec<String> = cells
            .iter()
            .zip(widths)
            .map(|(c, w)| format!("{c:<w$}"))
            .collect();
        outln!("  {}", parts.join("  ").trim_end());
    };
    line(*header);
    for row in rows {
        line([&row[0], &row[1], &row[2], &row[3]]);
    }
}
