//! `cargo bench -p airlock-checkout --bench checkout`: times the checkout path of a run.
//!
//! Without arguments it builds a synthetic repository of 3,000 files. With
//! `AIRLOCK_BENCH_REPO=/path/to/repo` (any local repository or bare mirror) and optionally
//! `AIRLOCK_BENCH_REV=<rev>` it measures that repository instead. Reference figures come from
//! the `git` CLI on the same machine in the same run: `git clone --mirror` for the first clone
//! and `git clone --local` + `git checkout --detach` for a worktree. Set
//! `AIRLOCK_BENCH_SHOW_TREE=1` to print the rendered file tree.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use std::path::Path;
use std::time::{Duration, Instant};

use airlock_checkout::{BoundedReader, FileTreeOptions, MirrorCache};
use airlock_testkit::git;

fn synthetic(parent: &Path) -> std::path::PathBuf {
    let repo = parent.join("synthetic");
    std::fs::create_dir_all(&repo).unwrap();
    git(&repo, &["init", "--quiet", "--initial-branch=main"]);
    for i in 0..3000 {
        let path = repo.join(format!("pkg{}/mod{}/file_{i}.py", i % 10, i % 37));
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        let body: String = (0..60)
            .map(|l| format!("def f_{i}_{l}(x):\n    return x + {l}\n"))
            .collect();
        std::fs::write(path, body).unwrap();
    }
    git(&repo, &["add", "--all"]);
    git(&repo, &["commit", "--quiet", "-m", "synthetic"]);
    repo
}

fn ms(d: Duration) -> String {
    format!("{:.1} ms", d.as_secs_f64() * 1000.0)
}

fn main() {
    let tmp = tempfile::tempdir().unwrap();
    let repo = match std::env::var("AIRLOCK_BENCH_REPO") {
        Ok(path) => std::path::PathBuf::from(path),
        Err(_) => synthetic(tmp.path()),
    };
    let rev = std::env::var("AIRLOCK_BENCH_REV").unwrap_or_else(|_| "HEAD".to_owned());
    let cpus = std::thread::available_parallelism().map_or(0, |n| n.get());
    println!(
        "machine: {} ({cpus} cpus), repository: {}",
        std::env::consts::ARCH,
        repo.display()
    );

    let cache = MirrorCache::new(tmp.path().join("cache")).unwrap();
    let t = Instant::now();
    let mirror = cache.mirror(repo.to_str().unwrap()).unwrap();
    let first_clone = t.elapsed();
    let t = Instant::now();
    let mirror_again = cache.mirror(repo.to_str().unwrap()).unwrap();
    let reuse = t.elapsed();
    assert_eq!(
        mirror_again.origin(),
        airlock_checkout::MirrorOrigin::Reused
    );
    let t = Instant::now();
    let commit = mirror.resolve(&rev).unwrap();
    let resolve = t.elapsed();

    let t = Instant::now();
    let wt = mirror.materialize(&commit, &tmp.path().join("wt")).unwrap();
    let materialize = t.elapsed();
    let files = wt.tracked_files().unwrap();

    let t = Instant::now();
    let tree = mirror
        .file_tree(
            &commit,
            &FileTreeOptions {
                char_budget: 4000,
                query: Some("parser fails on nested expressions"),
            },
        )
        .unwrap();
    let file_tree = t.elapsed();

    let reader = BoundedReader::open(wt.path()).unwrap();
    let sample: Vec<&String> = files.iter().step_by((files.len() / 200).max(1)).collect();
    let mut reads = Vec::new();
    for path in &sample {
        let t = Instant::now();
        let _ = reader.read(path, None);
        reads.push(t.elapsed());
    }
    reads.sort();
    let p50 = reads[reads.len() / 2];
    let p99 = reads[(reads.len() * 99 / 100).min(reads.len() - 1)];

    // Reference: the git CLI doing the same jobs.
    let t = Instant::now();
    git(
        tmp.path(),
        &[
            "clone",
            "--quiet",
            "--mirror",
            repo.to_str().unwrap(),
            "ref-mirror.git",
        ],
    );
    let ref_clone = t.elapsed();
    let t = Instant::now();
    git(
        tmp.path(),
        &[
            "clone",
            "--quiet",
            "--local",
            "--no-checkout",
            "ref-mirror.git",
            "ref-wt",
        ],
    );
    git(
        &tmp.path().join("ref-wt"),
        &["checkout", "--quiet", "--detach", commit.as_str()],
    );
    let ref_worktree = t.elapsed();

    println!("tracked files at {}: {}", commit.short(12), files.len());
    println!("{:<38} {:>12} {:>12}", "step", "airlock", "git CLI");
    println!(
        "{:<38} {:>12} {:>12}",
        "first clone into the cache",
        ms(first_clone),
        ms(ref_clone)
    );
    println!(
        "{:<38} {:>12} {:>12}",
        "reuse of the cached mirror",
        ms(reuse),
        "-"
    );
    println!("{:<38} {:>12} {:>12}", "resolve rev", ms(resolve), "-");
    println!(
        "{:<38} {:>12} {:>12}",
        "materialize worktree (pinned, no remote)",
        ms(materialize),
        ms(ref_worktree)
    );
    println!(
        "{:<38} {:>12} {:>12}",
        "file tree, 4000 chars, with query",
        ms(file_tree),
        "-"
    );
    println!(
        "{:<38} {:>12} {:>12}",
        format!("bounded read p50 ({} files)", sample.len()),
        ms(p50),
        "-"
    );
    println!("{:<38} {:>12} {:>12}", "bounded read p99", ms(p99), "-");
    if std::env::var_os("AIRLOCK_BENCH_SHOW_TREE").is_some() {
        println!("{tree}");
    }
    println!(
        "file tree: {} chars, {} lines",
        tree.chars().count(),
        tree.lines().count()
    );
}
