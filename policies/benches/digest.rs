//! `cargo bench -p airlock-policies --bench digest`: prints how long the policy gate takes on
//! this machine. Figures only; nothing is asserted.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use std::time::{Duration, Instant};

use airlock_policies::Policy;

fn time<T>(label: &str, iterations: u32, mut f: impl FnMut() -> T) -> Duration {
    let start = Instant::now();
    for _ in 0..iterations {
        std::hint::black_box(f());
    }
    let per = start.elapsed() / iterations;
    println!("{label:<58} {per:>12.2?} per run ({iterations} runs)");
    per
}

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

/// A synthetic unified diff: `files` test files, each with `hunks` one-line replacements.
fn synthetic_diff(files: usize, hunks: usize) -> String {
    let mut out = String::new();
    for f in 0..files {
        let path = format!("tests/test_mod{f}.py");
        out.push_str(&format!(
            "diff --git a/{path} b/{path}\n--- a/{path}\n+++ b/{path}\n"
        ));
        for h in 0..hunks {
            let start = h * 10 + 1;
            out.push_str(&format!("@@ -{start},3 +{start},3 @@ def test_{h}():\n"));
            out.push_str("     x = compute()\n");
            out.push_str(&format!("-    assert x == {h}\n"));
            out.push_str(&format!("+    assert x == pytest.approx({h}, rel=1e-3)\n"));
            out.push_str("     return x\n");
        }
    }
    out
}

fn main() {
    println!("airlock-policies benchmark on {}", machine());
    time("load + self-check default policy (uncached)", 20, || {
        Policy::from_toml_str(Policy::default_toml(), "bench").unwrap()
    });
    let policy = Policy::default().unwrap();
    let paths: Vec<String> = (0..1000)
        .map(|i| match i % 4 {
            0 => format!("src/pkg{i}/module.py"),
            1 => format!("crates/c{i}/Cargo.toml"),
            2 => format!(".github/workflows/w{i}.yml"),
            _ => format!("src/../x{i}.py"),
        })
        .collect();
    let per = time("check_write x1000 paths", 50, || {
        paths
            .iter()
            .filter(|p| policy.check_write(p).is_allowed())
            .count()
    });
    println!(
        "{:<58} {:>12.0} paths/s",
        "  => throughput",
        1000.0 / per.as_secs_f64()
    );
    for (files, hunks) in [(12, 10), (100, 20)] {
        let text = synthetic_diff(files, hunks);
        let per = time(
            &format!(
                "digest_from_unified_diff {files} files x {hunks} hunks ({} KiB)",
                text.len() / 1024
            ),
            20,
            || policy.digest_from_unified_diff(&text).unwrap(),
        );
        println!(
            "{:<58} {:>12.1} MiB/s",
            "  => throughput",
            text.len() as f64 / per.as_secs_f64() / 1_048_576.0
        );
    }
    // A repository of 2000 files with 40 changed and 10 untracked.
    let dir = tempfile::tempdir().unwrap();
    let repo = git2::Repository::init(dir.path()).unwrap();
    for i in 0..2000 {
        let p = dir.path().join(format!("src/d{}/f{i}.py", i % 50));
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, format!("def f{i}():\n    return {i}\n").repeat(20)).unwrap();
    }
    let mut index = repo.index().unwrap();
    index
        .add_all(["*"], git2::IndexAddOption::DEFAULT, None)
        .unwrap();
    let tree = repo.find_tree(index.write_tree().unwrap()).unwrap();
    let sig = git2::Signature::new("b", "b@example.invalid", &git2::Time::new(0, 0)).unwrap();
    let base = repo
        .commit(Some("HEAD"), &sig, &sig, "base", &tree, &[])
        .unwrap()
        .to_string();
    for i in 0..40 {
        let p = dir.path().join(format!("src/d{}/f{i}.py", i % 50));
        std::fs::write(p, format!("def f{i}():\n    return {}\n", i + 1).repeat(20)).unwrap();
    }
    for i in 0..10 {
        std::fs::write(dir.path().join(format!("src/new{i}.py")), "x = 1\n").unwrap();
    }
    time(
        "compute_digest: 2000-file repo, 40 changed + 10 untracked",
        10,
        || policy.compute_digest(dir.path(), &base).unwrap(),
    );
}
