//! `cargo bench -p airlock-audit --bench detect [-- PATH...]`: how long the injection detector
//! takes per file on this machine, over the files `airlock audit fp-scan` would scan under the
//! given paths (default: this repository's own tree). Prints the machine, the file count, the
//! mean, median, 99th percentile and the slowest files. Figures only; nothing is asserted.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

fn machine() -> String {
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|c| {
            c.lines()
                .find(|l| l.starts_with("model name"))
                .map(|l| l.split(':').nth(1).unwrap_or("").trim().to_string())
        })
        .unwrap_or_else(|| "unknown cpu".into());
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    format!("{cpu}, {cores} cores")
}

fn walk(root: &Path, out: &mut Vec<PathBuf>) {
    if root.is_file() {
        out.push(root.to_path_buf());
        return;
    }
    let Ok(entries) = std::fs::read_dir(root) else {
        return;
    };
    for e in entries.flatten() {
        let p = e.path();
        let Ok(ft) = e.file_type() else { continue };
        if ft.is_dir() {
            if p.file_name().is_some_and(|n| n == ".git" || n == "target") {
                continue;
            }
            walk(&p, out);
        } else if ft.is_file() {
            out.push(p);
        }
    }
}

fn main() {
    // `cargo bench` passes `--bench`; everything else that is not a flag is a path.
    let mut roots: Vec<PathBuf> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with("--"))
        .map(PathBuf::from)
        .collect();
    if roots.is_empty() {
        roots.push(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(".."));
    }
    // Compiling the patterns is a once-per-process cost; it is timed apart from the files.
    let start = Instant::now();
    assert!(
        airlock_audit::detect::rules_ready(),
        "a detector pattern failed to compile"
    );
    let warm_up = start.elapsed();
    let mut files = Vec::new();
    for r in &roots {
        walk(r, &mut files);
    }
    files.sort();
    let mut times: Vec<(Duration, PathBuf)> = Vec::new();
    let mut flagged = 0;
    for path in files {
        let start = Instant::now();
        // One file at a time through the same function `fp-scan` uses, so the extension
        // filter, the size cap and the binary check are the same.
        let Ok(report) = airlock_audit::scan_corpus(std::slice::from_ref(&path)) else {
            continue;
        };
        let took = start.elapsed();
        if report.source.scanned + report.docs.scanned == 1 {
            flagged += report.flagged.len();
            times.push((took, path));
        }
    }
    println!("machine: {}", machine());
    for r in &roots {
        println!("root: {}", r.display());
    }
    println!("pattern compilation (once per process): {warm_up:.2?}");
    if times.is_empty() {
        println!("no file to scan");
        return;
    }
    let total: Duration = times.iter().map(|(d, _)| *d).sum();
    let mut sorted: Vec<Duration> = times.iter().map(|(d, _)| *d).collect();
    sorted.sort();
    let pct = |p: usize| sorted[(sorted.len() * p / 100).min(sorted.len() - 1)];
    println!(
        "files: {} ({} flagged); total {:.2?}; per file: mean {:.2?}, median {:.2?}, p99 {:.2?}, max {:.2?}",
        times.len(),
        flagged,
        total,
        total / times.len() as u32,
        pct(50),
        pct(99),
        sorted[sorted.len() - 1]
    );
    times.sort_by_key(|t| std::cmp::Reverse(t.0));
    println!("slowest:");
    for (d, p) in times.iter().take(5) {
        let size = std::fs::metadata(p).map_or(0, |m| m.len());
        println!("  {d:>10.2?}  {size:>8} bytes  {}", p.display());
    }
}
