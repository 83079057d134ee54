//! `airlock eval injection --corpus DIR`: the detector's recall per category, language and
//! place on a labelled corpus, and its false positives on the corpus's benign near-misses.
//!
//! Exit code 0 when recall is at least `--min-recall` (default 0.95) and no benign item is
//! flagged, 1 otherwise, 2 on an unusable corpus.

use airlock_audit::{self as audit, InjectionEval, Tally};
use airlock_policies::terminal::escaped_line;
use clap::Args;
use comfy_table::{Cell, CellAlignment, ContentArrangement, Table, presets};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::ExitCode;

/// Arguments of `airlock eval injection`.
#[derive(Debug, Args)]
pub struct EvalInjectionArgs {
    /// Directory of labelled TOML files (`[[item]]` with id, expect, category, language, place,
    /// path, source, text), such as bench/injection/corpus.
    #[arg(long, value_name = "DIR")]
    corpus: PathBuf,
    /// Print the full report as JSON.
    #[arg(long)]
    json: bool,
    /// List every missed injection and every flagged benign item.
    #[arg(long)]
    list: bool,
    /// Recall below which the command exits 1.
    #[arg(long, value_name = "FRACTION", default_value_t = 0.95)]
    min_recall: f64,
}

/// Run `airlock eval injection`.
pub fn run(args: EvalInjectionArgs) -> anyhow::Result<ExitCode> {
    anyhow::ensure!(
        audit::detect::rules_ready(),
        "a detector pattern failed to compile"
    );
    anyhow::ensure!(
        (0.0..=1.0).contains(&args.min_recall),
        "--min-recall {} is not a fraction: give a number from 0 to 1, such as 0.95",
        args.min_recall
    );
    let items = audit::load_labelled(&args.corpus)?;
    let report = audit::evaluate(&items);
    if args.json {
        outln!("{}", airlock_policies::terminal::to_ascii_json(&report)?);
    } else {
        print_report(&report, args.list);
    }
    let pass = report.injections.rate() >= args.min_recall && report.false_positives.is_empty();
    Ok(if pass {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

fn pct(t: &Tally) -> String {
    format!("{:.1}%", t.rate() * 100.0)
}

fn table(title: &str, rows: &BTreeMap<String, Tally>, right: &str) -> String {
    let mut table = Table::new();
    table
        .load_style(presets::NOTHING)
        .set_content_arrangement(ContentArrangement::Disabled)
        .set_header([title, "ITEMS", right, "RATE"]);
    for (name, t) in rows {
        table.add_row([
            Cell::new(escaped_line(name)),
            Cell::new(t.items).set_alignment(CellAlignment::Right),
            Cell::new(t.right).set_alignment(CellAlignment::Right),
            Cell::new(pct(t)).set_alignment(CellAlignment::Right),
        ]);
    }
    table.to_string()
}

fn print_report(r: &InjectionEval, list: bool) {
    outln!(
        "injections: {} of {} flagged, recall {}",
        r.injections.right,
        r.injections.items,
        pct(&r.injections)
    );
    outln!(
        "benign near-misses: {} of {} flagged",
        r.benign.items - r.benign.right,
        r.benign.items
    );
    outln!();
    outln!("{}", table("CATEGORY", &r.by_category, "FLAGGED"));
    outln!();
    outln!("{}", table("LANGUAGE", &r.by_language, "FLAGGED"));
    outln!();
    outln!("{}", table("PLACE", &r.by_place, "FLAGGED"));
    outln!();
    outln!("{}", table("BENIGN KIND", &r.benign_by_kind, "CLEAN"));
    if list {
        for m in &r.missed {
            outln!(
                "missed {} ({}, {}, {})",
                escaped_line(&m.id),
                escaped_line(&m.category),
                escaped_line(&m.language),
                escaped_line(&m.place)
            );
        }
        for m in &r.false_positives {
            for f in &m.findings {
                outln!(
                    "false positive {}:{}: {}: {}",
                    escaped_line(&m.id),
                    f.line,
                    f.rule,
                    escaped_line(&f.excerpt)
                );
            }
        }
    }
}
